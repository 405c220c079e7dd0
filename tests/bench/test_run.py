from collections import Counter
from typing import Any

import pytest

from bench.run import (
    HOG,
    Figure,
    _compiled_limit_figures,
    aggregate,
    cost_table,
    figures_from,
    judge,
    peer_failures,
    plan,
    render,
    scale_tables,
    spread,
    summary_json,
)


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
    assert by_name["latency after a segment closes p99"].target == "-"  # the copy is in it
    assert by_name["  of which egress's micro-batch p99"].project == 0.9
    assert by_name["  the product's stages (all but the copy between buckets) p99"].met
    upload = by_name[
        "S3 upload of 64 MiB, 0.1 s added per request, 4 parts in flight (baseline: one at a time)"
    ]
    assert (upload.project, upload.ratio) == (75.0, 1.5)
    table = render(aggregate([list(by_name.values())]))
    assert "0.90" in table and "NOT MET" in table and "<= 512 MiB" in table


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


def ingress_run(rate: float, baseline: float) -> dict[str, dict[str, Any]]:
    return {
        "ingress": {
            "ingress_records_per_s": rate,
            "ingress_records_per_s_after_join": rate,
            "one_process_records_per_s": rate,
            "one_process_records_per_s_after_join": rate,
            "baseline_records_per_s": baseline,
            "ingress_peak_rss_mib": 300.0,
            "one_process_peak_rss_mib": 400.0,
        }
    }


def test_min_median_and_max_of_odd_and_even_counts():
    assert spread([3.0, 1.0, 2.0]) == (1.0, 2.0, 3.0)
    assert spread([4.0, 1.0, 2.0, 10.0]) == (1.0, 3.0, 10.0)
    assert spread([5.0]) == (5.0, 5.0, 5.0)
    with pytest.raises(ValueError, match="no values"):
        spread([])


def test_a_ratio_target_is_judged_on_the_median_of_same_run_ratios():
    # Ratios 0.5, 0.9, 0.85: the median 0.85 meets 0.8 though one run missed it. The ratio
    # of the medians (project 90, baseline 100 -> 0.9) is not what is judged.
    runs = [
        figures_from(ingress_run(50.0, 100.0)),
        figures_from(ingress_run(90.0, 100.0)),
        figures_from(ingress_run(170.0, 200.0)),
    ]
    by_name = {s.name: s for s in aggregate(runs)}
    rate = by_name["ingress records/s"]
    assert rate.projects == [50.0, 90.0, 170.0] and rate.baselines == [100.0, 100.0, 200.0]
    assert rate.ratios == pytest.approx([0.5, 0.9, 0.85])
    assert rate.met is True
    low = aggregate([figures_from(ingress_run(r, 100.0)) for r in (79.0, 90.0, 70.0)])
    assert {s.name: s for s in low}["ingress records/s"].met is False
    assert by_name["ingress records/s, one replay process"].met is None  # no target


def test_a_limit_is_judged_on_the_median_figure():
    def p99(value: float) -> list[Figure]:
        return figures_from({"relay_latency": {"p50_seconds": 0.1, "p99_seconds": value}})

    name = "relay latency p99 at 2,000 rec/s"
    held = {s.name: s for s in aggregate([p99(0.4), p99(9.0), p99(0.45)])}[name]
    assert held.met is True and judge(held) is True
    missed = {s.name: s for s in aggregate([p99(0.6), p99(0.1), p99(0.7)])}[name]
    assert missed.met is False


def test_the_end_to_end_target_is_the_segment_age_plus_one_second():
    def e2e(p99: float, age: float) -> Figure:
        lat = {"p50_seconds": 1.0, "p99_seconds": p99, "max_segment_age_seconds": age}
        return {f.name: f for f in figures_from({"latency": lat})}["end-to-end latency p99"]

    assert e2e(2.9, 2).met and not e2e(3.1, 2).met
    assert e2e(5.9, 5).met and e2e(5.9, 5).target == "<= 6 s"


def test_the_hog_pass_figures_stand_beside_the_unloaded_ones():
    raw = {
        "relay_latency": {"p50_seconds": 0.1, "p99_seconds": 0.3},
        "relay_latency_hog": {"p50_seconds": 0.2, "p99_seconds": 0.9},
    }
    by_name = {f.name: f for f in figures_from(raw)}
    assert by_name["relay latency p99 at 2,000 rec/s"].met
    loaded = by_name[f"relay latency p99 at 2,000 rec/s{HOG}"]
    assert (loaded.project, loaded.met) == (0.9, False)


def test_the_table_and_results_show_min_median_and_max():
    summaries = aggregate(
        [figures_from(ingress_run(r, b)) for r, b in ((50.0, 100.0), (90.0, 100.0), (85.0, 100.0))]
    )
    table = render(summaries)
    line = next(row for row in table.splitlines() if row.startswith("ingress records/s  "))
    assert "85.0 (50.0-90.0) rec/s" in line and "0.85 (0.50-0.90)" in line and "met" in line
    rate = summary_json(summaries[0])
    assert rate["project"] == {"min": 50.0, "median": 85.0, "max": 90.0}
    assert rate["ratio"]["median"] == pytest.approx(0.85) and rate["met"] is True
    assert rate["projects"] == [50.0, 90.0, 85.0]
    one = render(aggregate([figures_from(ingress_run(85.0, 100.0))]))
    assert "85.0 rec/s" in one and "(" not in one.splitlines()[1]


def test_a_figure_measured_once_is_summarised_over_the_one_run():
    upload = {
        "object_mib": 64,
        "added_seconds_per_request": 0.1,
        "parts_in_flight": 4,
        "mb_per_s_parts_in_flight": 75.0,
        "mb_per_s_one_part_at_a_time": 50.0,
    }
    runs = [figures_from(ingress_run(80.0, 100.0) | {"upload": upload})]
    runs += [figures_from(ingress_run(90.0, 100.0)) for _ in range(2)]
    by_name = {s.name: s for s in aggregate(runs)}
    assert len(by_name["ingress records/s"].projects) == 3
    assert [len(s.projects) for n, s in by_name.items() if n.startswith("S3 upload")] == [1]


def test_the_hog_pass_follows_the_normal_pass_and_repeats_the_latency_benchmarks_only():
    wanted = ["egress", "latency", "relay", "relay_latency"]
    assert plan(wanted, "both") == [
        ("egress", False),
        ("latency", False),
        ("relay", False),
        ("relay_latency", False),
        ("latency", True),
        ("relay_latency", True),
    ]
    assert plan(wanted, "off") == [(name, False) for name in wanted]
    assert plan(wanted, "only") == [
        ("egress", False),
        ("relay", False),
        ("latency", True),
        ("relay_latency", True),
    ]
    assert plan(["egress"], "both") == [("egress", False)]


def relay_run(relay: float, peer: float) -> dict[str, dict[str, Any]]:
    return {
        "relay": {
            "relay_records_per_s": relay,
            "relay_records_per_s_after_join": relay * 1.5,
            "baseline_records_per_s": 100.0,
            "relay_cpu_seconds_per_million_records": 10.0,
            "mirror_maker": {
                "records_per_s": peer,
                "records_per_s_after_first_commit": peer * 2,
                "cpu_seconds_per_million_records": 40.0,
            },
        }
    }


def test_the_relay_is_judged_against_twice_mirror_makers_throughput():
    name = "relay records/s (whole run) against MirrorMaker 2 exactly-once (whole run)"
    ahead = {f.name: f for f in figures_from(relay_run(250.0, 100.0))}
    assert (ahead[name].ratio, ahead[name].met, ahead[name].target) == (2.5, True, "ratio >= 2.0")
    behind = {f.name: f for f in figures_from(relay_run(150.0, 100.0))}
    assert not behind[name].met
    steady = behind[
        "relay records/s (after the group join) against MirrorMaker 2 exactly-once "
        "(after its first commit)"
    ]
    assert (steady.project, steady.baseline, steady.target) == (225.0, 200.0, "-")
    assert behind["relay CPU s per million records against MirrorMaker 2's"].ratio == 0.25
    # Without the peer (a results file from before it) the relay's rows stay as they were.
    alone = {k: v for k, v in relay_run(150.0, 100.0)["relay"].items() if k != "mirror_maker"}
    assert all("MirrorMaker" not in f.name for f in figures_from({"relay": alone}))


def test_the_relay_process_is_judged_on_its_peak_rss_and_older_results_have_no_such_row():
    def rss(peak: float) -> Figure:
        run = relay_run(250.0, 100.0)
        run["relay"] |= {
            "relay_process_records_per_s": 120.0,
            "relay_process_peak_rss_mib": peak,
        }
        return {f.name: f for f in figures_from(run)}["relay process peak RSS"]

    assert (rss(320.0).met, rss(320.0).target) == (True, "<= 512 MiB")
    assert not rss(671.0).met
    assert all("process" not in f.name for f in figures_from(relay_run(250.0, 100.0)))


def test_a_run_whose_peer_failed_keeps_the_relays_rows_and_says_so():
    failed = relay_run(250.0, 100.0)
    del failed["relay"]["mirror_maker"]
    failed["relay"]["mirror_maker_failed"] = "a MirrorMaker 2 task died"
    runs = [relay_run(250.0, 100.0), failed, relay_run(300.0, 100.0)]
    by_name = {s.name: s for s in aggregate([figures_from(raw) for raw in runs])}
    assert len(by_name["relay records/s (whole run)"].projects) == 3
    against = "relay records/s (whole run) against MirrorMaker 2 exactly-once (whole run)"
    assert by_name[against].ratios == [2.5, 3.0]
    assert peer_failures(runs) == [
        "run 2 of relay: no MirrorMaker 2 figures (a MirrorMaker 2 task died)"
    ]


def test_the_relay_latency_tail_is_judged_against_mirror_makers_on_the_median_ratio():
    def run(relay_p99: float, peer_p99: float) -> list[Figure]:
        peer = {"p50_seconds": 0.1, "p99_seconds": peer_p99, "max_seconds": 0.5}
        lat = {"p50_seconds": 0.2, "p99_seconds": relay_p99, "max_seconds": 0.6}
        return figures_from({"relay_latency": lat | {"mirror_maker": peer}})

    name = "relay latency p99 at 2,000 rec/s against MirrorMaker 2 exactly-once"
    one = {f.name: f for f in run(0.3, 0.4)}
    assert one[name].target == "ratio <= 1.0" and one[name].met
    assert one["relay latency p99 at 2,000 rec/s"].met  # the absolute 0.5 s stays
    assert one["relay latency max at 2,000 rec/s against MirrorMaker 2 exactly-once"].ratio == (
        pytest.approx(1.2)
    )
    # Ratios 1.5, 0.5, 1.2: the median 1.2 misses though one run met it.
    summary = {s.name: s for s in aggregate([run(0.6, 0.4), run(0.2, 0.4), run(0.48, 0.4)])}
    assert summary[name].met is False
    summary = {s.name: s for s in aggregate([run(0.6, 0.4), run(0.2, 0.4), run(0.36, 0.4)])}
    assert summary[name].met is True
    assert "ratio <= 1.0" in render(list(summary.values()))


def test_each_archive_stage_is_judged_against_half_the_compiled_client_limit():
    limit = {"to_s3_records_per_s": 400.0, "from_s3_records_per_s": 300.0}
    raw: dict[str, dict[str, Any]] = {
        "compiled_limit": limit,
        "egress": {"egress_records_per_s_in_batches": 240.0},
        "restore": {"restore_records_per_s_in_tasks": 120.0},
    }
    found = {f.name: f for f in _compiled_limit_figures(raw)}
    egress = found["egress records/s (inside batches) against the compiled-client limit"]
    assert (egress.baseline, egress.ratio, egress.met) == (400.0, 0.6, True)
    restore = found["restore records/s (inside the tasks) against the compiled-client limit"]
    assert (restore.baseline, restore.ratio, restore.met) == (300.0, 0.4, False)
    assert not any(name.startswith("ingress") for name in found)  # not measured in this run
    assert found["compiled-client limit S3 -> Kafka records/s"].project == 300.0
    assert _compiled_limit_figures({"egress": raw["egress"]}) == []


def test_the_s3_endpoints_cost_of_multipart_uploads_is_reported_against_single_puts():
    stand_in = {
        "object_mib": 256,
        "put_mib": 16,
        "multipart": {"endpoint_cpu_ns_per_byte": 14.0},
        "single_puts": {"endpoint_cpu_ns_per_byte": 7.0},
    }
    (figure,) = [
        f for f in figures_from({"s3_stand_in": stand_in}) if f.name.startswith("S3 endpoint")
    ]
    assert (figure.unit, figure.project, figure.baseline, figure.ratio) == (
        "ns/byte",
        14.0,
        7.0,
        2.0,
    )
    assert "256 MiB as one multipart upload" in figure.name and "16 MiB PUTs" in figure.name
