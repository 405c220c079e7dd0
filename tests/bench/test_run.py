from collections import Counter
from typing import Any

import pytest

from bench.run import cost_table, figures_from, render, scale_tables


def test_figures_are_judged_against_their_same_run_baselines_and_limits():
    raw: dict[str, dict[str, Any]] = {
        "ingress": {
            "ingress_records_per_s": 90.0,
            "ingress_records_per_s_after_join": 120.0,
            "one_process_records_per_s": 60.0,
            "one_process_records_per_s_after_join": 70.0,
            "baseline_records_per_s": 100.0,
            "ingress_peak_rss_mib": 600.0,
            "one_process_peak_rss_mib": 500.0,
        },
        "latency": {
            "p50_seconds": 2.0,
            "p99_seconds": 2.9,
            "after_close": {
                "total": {"p50_seconds": 0.9, "p99_seconds": 1.4},
                "batch": {"p50_seconds": 0.5, "p99_seconds": 0.9},
                "product": {"p50_seconds": 0.6, "p99_seconds": 0.95},
            },
        },
        "upload": {
            "object_mib": 64,
            "added_seconds_per_request": 0.1,
            "parts_in_flight": 4,
            "mb_per_s_parts_in_flight": 75.0,
            "mb_per_s_one_part_at_a_time": 50.0,
        },
    }
    by_name = {f.name: f for f in figures_from(raw)}
    rate = by_name["ingress records/s"]
    assert (rate.ratio, rate.met) == (0.9, True)
    assert by_name["ingress records/s (after the group join)"].ratio == 1.2
    assert not by_name["ingress largest process peak RSS"].met
    assert by_name["ingress one replay process peak RSS"].met
    assert by_name["end-to-end latency p99"].met and by_name["end-to-end latency p99"].ratio is None
    assert not by_name["latency after a segment closes p99"].met  # 1.4 s > 1 s
    assert by_name["  of which egress's micro-batch p99"].project == 0.9
    assert by_name["  the product's stages (all but the copy between buckets) p99"].met
    upload = by_name[
        "S3 upload of 64 MiB, 0.1 s added per request, 4 parts in flight (baseline: one at a time)"
    ]
    assert (upload.project, upload.ratio) == (75.0, 1.5)
    table = render(list(by_name.values()))
    assert "0.90" in table and "NO" in table and "<= 512 MiB" in table


def test_the_cost_table_prices_each_stage_per_million_records():
    from bench.aws_requests import priced

    requests = Counter(
        {("s3", "PutObject"): 8, ("s3", "ListObjectsV2"): 2, ("sqs", "ReceiveMessage"): 5}
    )
    aws = priced(requests, 2_000_000)
    assert aws["per_million_records"] == {
        "put_post_list": 5.0,
        "get": 0.0,
        "delete": 0.0,
        "sqs": 2.5,
    }
    assert aws["usd_per_million_records"] == pytest.approx(5 * 0.005 / 1000 + 2.5 * 0.0004 / 1000)
    table = cost_table({"egress": {"aws": aws, "segment_limits": "1,000 records"}, "ingress": {}})
    assert "egress" in table and "ingress" not in table and "1,000 records" in table
    assert cost_table({}) == ""


def test_the_scale_tables_show_each_partition_and_segment_count():
    aws = {"per_million_records": {"put_post_list": 10.0, "get": 5.0, "delete": 0.0, "sqs": 1.0}}
    stage = {"seconds": 20.0, "seconds_in_batches": 9.5, "peak_rss_mib": 300.0, "aws": aws}
    scale = {
        "records": 256_000,
        "partitions": {
            "8": {"egress": stage, "ingress": stage},
            "512": {"egress": stage, "ingress": stage},
        },
        "segments": [
            {
                "segments": 10_000,
                "listing_seconds": 1.5,
                "listing_requests": 10,
                "planning_seconds": 0.2,
                "replay_steps_seconds": 0.016,
                "removal_events_seconds": 0.4,
                "removal_events_list_requests": 1,
            }
        ],
    }
    text = scale_tables(scale)
    lines = text.splitlines()
    assert lines[0] == "Scale: 256,000 records over each partition count"
    assert any(line.startswith("512 ") and "9.5 (20.0)" in line and "16" in line for line in lines)
    assert any(line.startswith("10,000") and "1.50" in line and "0.016" in line for line in lines)
