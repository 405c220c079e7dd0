"""``make bench``: every figure next to its baseline, measured in the same run.

Runs the egress, ingress and compaction throughput benchmarks on the fixed workload
(8 partitions, 2,000,000 records, 16-byte keys, 200-byte values, one header), the
end-to-end latency benchmark, the relay's throughput (half the workload) and latency, and
the scale benchmark (:mod:`bench.scale`) and an S3 upload with a round trip added to each
request (:mod:`bench.upload`), samples peak memory while they run, counts the
AWS requests of each stage; prints the tables and
writes ``bench/results/latest.json``. Each benchmark starts its own local stack.

Usage: python -m bench.run [--records N] [--latency-seconds S] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    compaction_throughput,
    egress_throughput,
    ingress_throughput,
    latency,
    relay,
    restore_throughput,
    scale,
    upload,
)
from replicator.core.logs import configure_logging

RESULTS = Path(__file__).parent / "results" / "latest.json"


@dataclass
class Figure:
    name: str
    unit: str
    project: float
    baseline: float | None
    """The raw client's figure in the same run; None where the target is absolute."""
    target: str
    met: bool

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        return self.project / self.baseline if self.baseline else None


def _ratio_figure(name: str, unit: str, project: float, baseline: float, least: float) -> Figure:
    return Figure(name, unit, project, baseline, f"ratio >= {least}", project >= least * baseline)


def _limit_figure(name: str, unit: str, value: float, most: float) -> Figure:
    return Figure(name, unit, value, None, f"<= {most:g} {unit}", value <= most)


LATENCY_STAGES = {
    "batch": "of which egress's micro-batch",
    "to_destination_bucket": "copy to the destination bucket (local stand-in)",
    "notification": "S3 notification to segment event",
    "replay": "segment event to readable",
}


def figures_from(raw: dict[str, dict[str, Any]]) -> list[Figure]:
    """The issue's figures from the benchmarks' raw measurements. Pure."""
    found: list[Figure] = []
    if "egress" in raw:
        e = raw["egress"]
        found += [
            _ratio_figure(
                "egress records/s (whole run)",
                "rec/s",
                e["egress_records_per_s"],
                e["baseline_records_per_s"],
                1.0,
            ),
            _ratio_figure(
                "egress MB/s (whole run)",
                "MB/s",
                e["egress_mb_per_s"],
                e["baseline_mb_per_s"],
                1.0,
            ),
            _ratio_figure(
                "egress records/s (inside batches)",
                "rec/s",
                e["egress_records_per_s_in_batches"],
                e["baseline_records_per_s"],
                1.0,
            ),
            _limit_figure(
                "largest Spark Python worker peak RSS", "MiB", e["spark_worker_peak_rss_mib"], 512
            ),
        ]
    if "ingress" in raw:
        i = raw["ingress"]
        found += [
            _ratio_figure(
                "ingress records/s",
                "rec/s",
                i["ingress_records_per_s"],
                i["baseline_records_per_s"],
                0.8,
            ),
            _ratio_figure(
                "ingress records/s (after the group join)",
                "rec/s",
                i["ingress_records_per_s_after_join"],
                i["baseline_records_per_s"],
                0.8,
            ),
            Figure(
                "ingress records/s, one replay process",
                "rec/s",
                i["one_process_records_per_s"],
                i["baseline_records_per_s"],
                "-",
                True,
            ),
            Figure(
                "ingress records/s, one replay process (after the group join)",
                "rec/s",
                i["one_process_records_per_s_after_join"],
                i["baseline_records_per_s"],
                "-",
                True,
            ),
            _limit_figure(
                "ingress largest process peak RSS", "MiB", i["ingress_peak_rss_mib"], 512
            ),
            _limit_figure(
                "ingress one replay process peak RSS", "MiB", i["one_process_peak_rss_mib"], 512
            ),
        ]
    if "compaction" in raw:
        c = raw["compaction"]
        found += [
            _ratio_figure(
                "compaction MB/s (whole run)",
                "MB/s",
                c["compaction_mb_per_s"],
                c["baseline_mb_per_s"],
                0.8,
            ),
            _ratio_figure(
                "compaction MB/s (after Spark start)",
                "MB/s",
                c["compaction_mb_per_s_after_spark_start"],
                c["baseline_mb_per_s"],
                0.8,
            ),
            Figure("compaction Spark start", "s", c["spark_start_seconds"], None, "-", True),
            _ratio_figure(
                "compaction MB/s (inside merges)",
                "MB/s",
                c["compaction_mb_per_s_in_merges"],
                c["baseline_mb_per_s"],
                0.8,
            ),
        ]
    if "relay" in raw:
        r = raw["relay"]
        found += [
            _ratio_figure(
                "relay records/s (whole run)",
                "rec/s",
                r["relay_records_per_s"],
                r["baseline_records_per_s"],
                0.8,
            ),
            _ratio_figure(
                "relay records/s (after the group join)",
                "rec/s",
                r["relay_records_per_s_after_join"],
                r["baseline_records_per_s"],
                0.8,
            ),
        ]
    if "restore" in raw:
        r = raw["restore"]
        found += [
            _ratio_figure(
                "restore records/s (whole run)",
                "rec/s",
                r["restore_records_per_s"],
                r["baseline_records_per_s"],
                1.0,
            ),
            _ratio_figure(
                "restore MB/s (whole run)",
                "MB/s",
                r["restore_mb_per_s"],
                r["baseline_mb_per_s"],
                1.0,
            ),
            _ratio_figure(
                "restore records/s (inside the tasks)",
                "rec/s",
                r["restore_records_per_s_in_tasks"],
                r["baseline_records_per_s"],
                1.0,
            ),
        ]
    if "relay_latency" in raw:
        lat = raw["relay_latency"]
        found += [
            Figure("relay latency p50", "s", lat["p50_seconds"], None, "-", True),
            _limit_figure("relay latency p99", "s", lat["p99_seconds"], 0.5),
        ]
    if "latency" in raw:
        lat = raw["latency"]
        found += [
            Figure("end-to-end latency p50", "s", lat["p50_seconds"], None, "-", True),
            _limit_figure("end-to-end latency p99", "s", lat["p99_seconds"], 3),
        ]
        stages = lat.get("after_close", {})
        if "total" in stages:
            found.append(
                _limit_figure(
                    "latency after a segment closes p99",
                    "s",
                    stages["total"]["p99_seconds"],
                    1,
                )
            )
        if "product" in stages:
            found.append(
                _limit_figure(
                    "  the product's stages (all but the copy between buckets) p99",
                    "s",
                    stages["product"]["p99_seconds"],
                    1,
                )
            )
        for stage, label in LATENCY_STAGES.items():
            if stage in stages:
                p99 = stages[stage]["p99_seconds"]
                found.append(Figure(f"  {label} p99", "s", p99, None, "-", True))
    if "upload" in raw:
        u = raw["upload"]
        found.append(
            Figure(
                f"S3 upload of {u['object_mib']} MiB, {u['added_seconds_per_request']} s added "
                f"per request, {u['parts_in_flight']} parts in flight (baseline: one at a time)",
                "MB/s",
                u["mb_per_s_parts_in_flight"],
                u["mb_per_s_one_part_at_a_time"],
                "-",
                True,
            )
        )
    return found


def render(found: list[Figure]) -> str:
    rows = [("figure", "project", "baseline", "ratio", "target", "met")]
    for f in found:
        rows.append(
            (
                f.name,
                f"{f.project:,.1f} {f.unit}",
                "-" if f.baseline is None else f"{f.baseline:,.1f} {f.unit}",
                "-" if f.ratio is None else f"{f.ratio:.2f}",
                f.target,
                "yes" if f.met else "NO",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def _requests_per_million(aws: dict[str, Any]) -> str:
    return f"{sum(aws['per_million_records'].values()):,.0f}"


def scale_tables(scale: dict[str, Any]) -> str:
    """The scale benchmark's two tables: per partition count, per segment count. Pure."""
    rows: list[tuple[str, ...]] = [
        (
            "partitions",
            "egress s in batches (whole)",
            "egress worker RSS",
            "egress S3 req/M",
            "ingress s",
            "ingress largest RSS",
            "ingress S3 req/M",
        )
    ]
    for count, stages in scale["partitions"].items():
        e, i = stages["egress"], stages["ingress"]
        rows.append(
            (
                count,
                f"{e['seconds_in_batches']:.1f} ({e['seconds']:.1f})",
                f"{e['peak_rss_mib']:.0f} MiB",
                _requests_per_million(e["aws"]),
                f"{i['seconds']:.1f}",
                f"{i['peak_rss_mib']:.0f} MiB",
                _requests_per_million(i["aws"]),
            )
        )
    segments: list[tuple[str, ...]] = [
        (
            "segments",
            "listing s",
            "LISTs",
            "planning s",
            "replay steps s",
            "removal events s",
            "LISTs for them",
        )
    ]
    for row in scale["segments"]:
        segments.append(
            (
                f"{row['segments']:,}",
                f"{row['listing_seconds']:.2f}",
                str(row["listing_requests"]),
                f"{row['planning_seconds']:.3f}",
                f"{row.get('replay_steps_seconds', 0.0):.3f}",
                f"{row['removal_events_seconds']:.2f}",
                str(row["removal_events_list_requests"]),
            )
        )
    return (
        f"Scale: {scale['records']:,} records over each partition count\n"
        + _table(rows)
        + "\n\nScale: segments in one partition (ingress listing, compaction planning, "
        + "ingress choosing each next segment, a removal event for each)\n"
        + _table(segments)
    )


def cost_table(raw: dict[str, dict[str, Any]]) -> str:
    """S3 and SQS requests per million records for each stage that counted them, with the
    segment limits they were counted under. Pure."""
    rows = [("stage", "PUT/POST/LIST", "GET/HEAD", "DELETE", "SQS", "USD", "limits")]
    for stage in ("egress", "ingress", "compaction", "restore"):
        aws = raw.get(stage, {}).get("aws")
        if not aws:
            continue
        per = aws["per_million_records"]
        rows.append(
            (
                stage,
                f"{per['put_post_list']:,.0f}",
                f"{per['get']:,.0f}",
                f"{per['delete']:,.0f}",
                f"{per['sqs']:,.0f}",
                f"{aws['usd_per_million_records']:.4f}",
                str(raw[stage].get("segment_limits", "")),
            )
        )
    if len(rows) == 1:
        return ""
    return "AWS requests per million records (USD at us-east-1 list prices)\n" + _table(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--latency-rate", type=int, default=2_000)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[
            "egress",
            "ingress",
            "compaction",
            "restore",
            "latency",
            "relay",
            "relay_latency",
            "scale",
            "upload",
        ],
    )
    parser.add_argument("--scale-records", type=int, default=256_000)
    parser.add_argument("--scale-partitions", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--scale-segments", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    configure_logging("WARNING")
    wanted = args.only or [
        "egress",
        "ingress",
        "compaction",
        "restore",
        "latency",
        "relay",
        "relay_latency",
        "scale",
        "upload",
    ]
    raw: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "egress": lambda: egress_throughput.measure(args.records, args.partitions),
        "ingress": lambda: ingress_throughput.measure(args.records, args.partitions),
        "compaction": lambda: compaction_throughput.measure(args.records, args.partitions, 10),
        "restore": lambda: restore_throughput.measure(args.records, args.partitions),
        "latency": lambda: latency.measure(args.latency_rate, args.latency_seconds),
        "relay": lambda: relay.measure_throughput(args.records // 2, args.partitions),
        "relay_latency": lambda: relay.measure_latency(args.latency_rate, args.latency_seconds / 2),
        "scale": lambda: scale.measure(
            args.scale_records, args.scale_partitions, args.scale_segments
        ),
        "upload": lambda: upload.measure(64, 0.1),
    }
    for name in wanted:
        print(f"running the {name} benchmark ...", flush=True)
        raw[name] = steps[name]()
    found = figures_from(raw)
    print()
    print(render(found))
    costs = cost_table(raw)
    if costs:
        print()
        print(costs)
    if "scale" in raw:
        print()
        print(scale_tables(raw["scale"]))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(
        json.dumps(
            {
                "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": {
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "system": platform.platform(),
                },
                "workload": {
                    "records": args.records,
                    "partitions": args.partitions,
                    "key_bytes": 16,
                    "value_bytes": 200,
                    "headers": 1,
                },
                "seconds": round(time.monotonic() - started, 1),
                "figures": [asdict(f) | {"ratio": f.ratio} for f in found],
                "raw": raw,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
