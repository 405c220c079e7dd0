"""``make bench``: every figure next to its baseline, measured in the same run, each
figure measured ``--repeat`` times (3 by default) and judged on its median.

Runs the egress, ingress and compaction throughput benchmarks on the fixed workload
(8 partitions, 2,000,000 records, 16-byte keys, 200-byte values, one header), restore's,
the end-to-end latency benchmark, the relay's throughput (half the workload) and latency,
and the scale benchmark (:mod:`bench.scale`), an S3 upload with a round trip added to
each request (:mod:`bench.upload`) and what the local S3 endpoint spends on multipart
uploads against single PUTs (:mod:`bench.s3_stand_in`), samples peak memory while
they run, counts the AWS requests of each stage; prints the tables and writes
``bench/results/latest.json``.

Repeats. Ingress and restore repeat their measurement on one stack: the segments are
written once, and each run (the baseline loop, then the product as a process of its own)
writes into topics, groups and checkpoints of its own, so that no run finds another's
state. Every other benchmark starts a stack of its own for each run: compaction consumes
its input (it merges its segments away), egress's checkpoint and segments would make a
second run start where the first ended, and the latency benchmarks' services would carry
one run's backlog into the next. Egress and compaction run Spark in the benchmark's
process, so each of their runs after the first is a process of its own
(:func:`in_fresh_process`): a second Spark session in a process that had one starts in a
fraction of a second. Scale, upload and the S3 endpoint's cost run once: no target is
judged on them.

Under load. After the normal pass, the latency benchmarks (end to end, and the relay's)
run once more, as many times, with a CPU hog spinning on one core (:mod:`bench.cpu_hog`)
from before their load starts to after its last record is read; ``--no-hog`` leaves that
pass out, ``--cpu-hog`` runs only it.

Usage: python -m bench.run [--records N] [--repeat N] [--only NAME ...] [--no-hog |
--cpu-hog] [--profile STAGE ...] [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    compaction_throughput,
    compiled_limit,
    egress_throughput,
    ingress_throughput,
    latency,
    peers,
    profiles,
    relay,
    restore_throughput,
    s3_stand_in,
    scale,
    upload,
)
from replicator.core.logs import configure_logging

RESULTS = Path(__file__).parent / "results" / "latest.json"


@dataclass
class Figure:
    """One figure of one run, with what it is judged against."""

    name: str
    unit: str
    project: float
    baseline: float | None
    """The baseline's figure in the same run; None where the target is absolute."""
    target: str
    met: bool
    least_ratio: float | None = None
    """The target as the least ratio to the baseline (None: not a ratio target)."""
    most: float | None = None
    """The target as the most the figure may be (None: not a limit)."""
    most_ratio: float | None = None
    """The target as the most ratio to the baseline (None: not such a target)."""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None:
            return None
        return self.project / self.baseline if self.baseline else None


def _ratio_figure(name: str, unit: str, project: float, baseline: float, least: float) -> Figure:
    met = project >= least * baseline
    return Figure(name, unit, project, baseline, f"ratio >= {least}", met, least_ratio=least)


def _at_most_ratio_figure(
    name: str, unit: str, project: float, baseline: float, most: float
) -> Figure:
    met = project <= most * baseline
    return Figure(name, unit, project, baseline, f"ratio <= {most}", met, most_ratio=most)


def _limit_figure(name: str, unit: str, value: float, most: float) -> Figure:
    return Figure(name, unit, value, None, f"<= {most:g} {unit}", value <= most, most=most)


def _informative(name: str, unit: str, project: float, baseline: float | None = None) -> Figure:
    return Figure(name, unit, project, baseline, "-", True)


LATENCY_STAGES = {
    "batch": "of which egress's micro-batch",
    "to_destination_bucket": "copy to the destination bucket (local stand-in)",
    "notification": "S3 notification to segment event",
    "replay": "segment event to readable",
}


HOG = ", CPU hog on one core"
"""The suffix of the figures of the pass under a CPU hog (:mod:`bench.cpu_hog`)."""


def figures_from(raw: dict[str, dict[str, Any]]) -> list[Figure]:
    """The issue's figures from one run's raw measurements, each with its target. Pure."""
    found: list[Figure] = []
    if "egress" in raw:
        e = raw["egress"]
        found += [
            _ratio_figure(
                "egress records/s (whole run)",
                "rec/s",
                e["egress_records_per_s"],
                e["baseline_records_per_s"],
                0.8,
            ),
            _ratio_figure(
                "egress MB/s (whole run)",
                "MB/s",
                e["egress_mb_per_s"],
                e["baseline_mb_per_s"],
                0.8,
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
        base = i["baseline_records_per_s"]
        found += [
            _ratio_figure("ingress records/s", "rec/s", i["ingress_records_per_s"], base, 0.8),
            _ratio_figure(
                "ingress records/s (after the group join)",
                "rec/s",
                i["ingress_records_per_s_after_join"],
                base,
                0.8,
            ),
            _informative(
                "ingress records/s, one replay process",
                "rec/s",
                i["one_process_records_per_s"],
                base,
            ),
            _informative(
                "ingress records/s, one replay process (after the group join)",
                "rec/s",
                i["one_process_records_per_s_after_join"],
                base,
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
            _informative(
                "compaction MB/s (after Spark start)",
                "MB/s",
                c["compaction_mb_per_s_after_spark_start"],
                c["baseline_mb_per_s"],
            ),
            _informative("compaction Spark start", "s", c["spark_start_seconds"]),
            _informative(
                "compaction MB/s (inside merges)",
                "MB/s",
                c["compaction_mb_per_s_in_merges"],
                c["baseline_mb_per_s"],
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
        if "relay_process_peak_rss_mib" in r:  # results recorded before it was measured
            found += [
                _informative(
                    "relay records/s, as a process (start to exit)",
                    "rec/s",
                    r["relay_process_records_per_s"],
                ),
                _limit_figure(
                    "relay process peak RSS", "MiB", r["relay_process_peak_rss_mib"], 512
                ),
            ]
    if "restore" in raw:
        r = raw["restore"]
        found += [
            _informative(
                "restore records/s (whole run)",
                "rec/s",
                r["restore_records_per_s"],
                r["baseline_records_per_s"],
            ),
            _informative(
                "restore MB/s (whole run)", "MB/s", r["restore_mb_per_s"], r["baseline_mb_per_s"]
            ),
            _ratio_figure(
                "restore records/s (inside the tasks)",
                "rec/s",
                r["restore_records_per_s_in_tasks"],
                r["baseline_records_per_s"],
                0.8,
            ),
        ]
    if "relay" in raw and "mirror_maker" in raw["relay"]:
        found += _mirror_maker_figures(raw["relay"])
    found += _compiled_limit_figures(raw)
    for key, suffix in (("relay_latency", ""), ("relay_latency_hog", HOG)):
        if key in raw:
            found += _relay_latency_figures(raw[key], suffix)
    for key, suffix in (("latency", ""), ("latency_hog", HOG)):
        if key in raw:
            found += _latency_figures(raw[key], suffix)
    if "upload" in raw:
        u = raw["upload"]
        found.append(
            _informative(
                f"S3 upload of {u['object_mib']} MiB, {u['added_seconds_per_request']} s added "
                f"per request, {u['parts_in_flight']} parts in flight (baseline: one at a time)",
                "MB/s",
                u["mb_per_s_parts_in_flight"],
                u["mb_per_s_one_part_at_a_time"],
            )
        )
    if "s3_stand_in" in raw:
        s3 = raw["s3_stand_in"]
        found.append(
            _informative(
                f"S3 endpoint CPU storing {s3['object_mib']} MiB as one multipart upload "
                f"(baseline: as {s3['put_mib']} MiB PUTs, as the compiled-client limit does)",
                "ns/byte",
                s3["multipart"]["endpoint_cpu_ns_per_byte"],
                s3["single_puts"]["endpoint_cpu_ns_per_byte"],
            )
        )
    return found


def peer_failures(runs: Sequence[dict[str, dict[str, Any]]]) -> list[str]:
    """A line for each run whose peer failed on its own (its rows against the peer are left
    out of that run, so their medians are of fewer runs). Pure."""
    return [
        f"run {number} of {key}: no MirrorMaker 2 figures ({raw['mirror_maker_failed']})"
        for number, run in enumerate(runs, 1)
        for key, raw in run.items()
        if "mirror_maker_failed" in raw
    ]


def _relay_latency_figures(lat: dict[str, Any], suffix: str) -> list[Figure]:
    rate = f" at {lat.get('rate_records_per_s', 2_000):,} rec/s"
    found = [
        _informative(f"relay latency p50{rate}{suffix}", "s", lat["p50_seconds"]),
        _limit_figure(f"relay latency p99{rate}{suffix}", "s", lat["p99_seconds"], 0.5),
    ]
    peer = lat.get("mirror_maker")
    if peer is None:
        return found
    against = f"{rate}{suffix} against MirrorMaker 2 exactly-once"
    return [
        *found,
        _informative(f"relay latency p50{against}", "s", lat["p50_seconds"], peer["p50_seconds"]),
        _at_most_ratio_figure(
            f"relay latency p99{against}", "s", lat["p99_seconds"], peer["p99_seconds"], 1.0
        ),
        _informative(f"relay latency max{against}", "s", lat["max_seconds"], peer["max_seconds"]),
    ]


def _mirror_maker_figures(relay: dict[str, Any]) -> list[Figure]:
    """The relay's throughput against MirrorMaker 2's on the same records and clusters."""
    peer = relay["mirror_maker"]
    return [
        _ratio_figure(
            "relay records/s (whole run) against MirrorMaker 2 exactly-once (whole run)",
            "rec/s",
            relay["relay_records_per_s"],
            peer["records_per_s"],
            2.0,
        ),
        _informative(
            "relay records/s (after the group join) against MirrorMaker 2 exactly-once "
            "(after its first commit)",
            "rec/s",
            relay["relay_records_per_s_after_join"],
            peer["records_per_s_after_first_commit"],
        ),
        _informative(
            "relay CPU s per million records against MirrorMaker 2's",
            "s",
            relay["relay_cpu_seconds_per_million_records"],
            peer["cpu_seconds_per_million_records"],
        ),
    ]


def _compiled_limit_figures(raw: dict[str, dict[str, Any]]) -> list[Figure]:
    """The limit's own figures, and each archive stage's steady state against it (the
    issue's target: at least half of it). Pure."""
    limit = raw.get("compiled_limit")
    if limit is None:
        return []
    to_s3, from_s3 = limit["to_s3_records_per_s"], limit["from_s3_records_per_s"]
    found = [
        _informative("compiled-client limit Kafka -> S3 records/s", "rec/s", to_s3),
        _informative("compiled-client limit S3 -> Kafka records/s", "rec/s", from_s3),
    ]
    against = "against the compiled-client limit"
    stages = (
        ("egress", "egress records/s (inside batches)", "egress_records_per_s_in_batches", to_s3),
        (
            "ingress",
            "ingress records/s (after the group join)",
            "ingress_records_per_s_after_join",
            from_s3,
        ),
        (
            "restore",
            "restore records/s (inside the tasks)",
            "restore_records_per_s_in_tasks",
            from_s3,
        ),
    )
    for stage, name, field, rate in stages:
        if stage in raw:
            found.append(_ratio_figure(f"{name} {against}", "rec/s", raw[stage][field], rate, 0.5))
    return found


def _latency_figures(lat: dict[str, Any], suffix: str) -> list[Figure]:
    """End to end: its p99 is judged against the segment age plus 1 s; after a segment
    closes, the product's stages against 1 s."""
    age = lat.get("max_segment_age_seconds", 2)
    found = [
        _informative(f"end-to-end latency p50{suffix}", "s", lat["p50_seconds"]),
        _limit_figure(f"end-to-end latency p99{suffix}", "s", lat["p99_seconds"], age + 1),
    ]
    stages = lat.get("after_close", {})
    if "total" in stages:
        found.append(
            _informative(
                f"latency after a segment closes p99{suffix}", "s", stages["total"]["p99_seconds"]
            )
        )
    if "product" in stages:
        found.append(
            _limit_figure(
                f"  the product's stages (all but the copy between buckets) p99{suffix}",
                "s",
                stages["product"]["p99_seconds"],
                1,
            )
        )
    for stage, label in LATENCY_STAGES.items():
        if stage in stages:
            found.append(_informative(f"  {label} p99{suffix}", "s", stages[stage]["p99_seconds"]))
    return found


@dataclass
class Summary:
    """One figure over every run that measured it: each run's values, and the target
    judged on the median (of the figure, or of the same-run ratios for a ratio target)."""

    name: str
    unit: str
    target: str
    projects: list[float]
    baselines: list[float]
    """Empty where the figure has no baseline."""
    ratios: list[float]
    """Each run's ratio to its own run's baseline (not the ratio of the medians)."""
    least_ratio: float | None = None
    most: float | None = None
    most_ratio: float | None = None

    @property
    def met(self) -> bool | None:
        """The target judged on the median; None where the figure has no target."""
        return judge(self)


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(min, median, max) of ``values``: the median of an even count is the mean of the
    middle two. Pure."""
    if not values:
        raise ValueError("no values to summarise")
    return min(values), statistics.median(values), max(values)


def judge(summary: Summary) -> bool | None:
    """Whether the median meets the target: the median ratio at least ``least_ratio`` or
    at most ``most_ratio``, or the median figure at most ``most``; None where there is no
    target. Pure."""
    if summary.least_ratio is not None:
        return bool(summary.ratios) and spread(summary.ratios)[1] >= summary.least_ratio
    if summary.most_ratio is not None:
        return bool(summary.ratios) and spread(summary.ratios)[1] <= summary.most_ratio
    if summary.most is not None:
        return spread(summary.projects)[1] <= summary.most
    return None


def aggregate(runs: Sequence[Sequence[Figure]]) -> list[Summary]:
    """Each figure's values across ``runs`` (one list of figures per run), in the order
    figures first appear; a figure missing from a run (measured once only) has fewer
    values. Pure."""
    summaries: dict[str, Summary] = {}
    for figures in runs:
        for f in figures:
            summary = summaries.setdefault(
                f.name,
                Summary(f.name, f.unit, f.target, [], [], [], f.least_ratio, f.most, f.most_ratio),
            )
            summary.projects.append(f.project)
            if f.baseline is not None:
                summary.baselines.append(f.baseline)
            if f.ratio is not None:
                summary.ratios.append(f.ratio)
    return list(summaries.values())


def _spread_text(values: Sequence[float], digits: int, unit: str = "") -> str:
    """``median (min-max)``, or the value alone for one run. Pure."""
    if not values:
        return "-"
    low, middle, high = spread(values)
    text = f"{middle:,.{digits}f}"
    if len(values) > 1:
        text += f" ({low:,.{digits}f}-{high:,.{digits}f})"
    return f"{text} {unit}".rstrip()


def render(summaries: list[Summary]) -> str:
    """The table: each figure's median with (min-max), its baseline's, the ratio's, the
    target and whether the median meets it. Pure."""
    rows = [("figure", "project", "baseline", "ratio", "target", "met (median)")]
    for s in summaries:
        digits = 2 if s.unit == "s" else 1
        met = s.met
        rows.append(
            (
                s.name,
                _spread_text(s.projects, digits, s.unit),
                _spread_text(s.baselines, digits, s.unit),
                _spread_text(s.ratios, 2),
                s.target,
                "-" if met is None else "met" if met else "NOT MET",
            )
        )
    return _table(rows)


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


BENCHMARKS = [
    "egress",
    "ingress",
    "compaction",
    "restore",
    "latency",
    "relay",
    "relay_latency",
    "compiled_limit",
    "scale",
    "upload",
    "s3_stand_in",
]
ONCE = {"scale", "upload", "s3_stand_in"}
"""Measured once whatever ``--repeat`` says: no target is judged on them."""
LATENCY = ("latency", "relay_latency")
"""The benchmarks the CPU hog's pass repeats."""


def plan(wanted: Sequence[str], hog: str) -> list[tuple[str, bool]]:
    """(benchmark, under the hog) in the order they run: the normal pass, then the hog's
    pass of the latency benchmarks (``hog`` is ``both``, ``only`` — the latency
    benchmarks under the hog alone — or ``off``). Pure."""
    normal = [(name, False) for name in wanted if not (hog == "only" and name in LATENCY)]
    loaded = [(name, True) for name in wanted if name in LATENCY and hog != "off"]
    return normal + loaded


def result_key(name: str, hogged: bool) -> str:
    return f"{name}_hog" if hogged else name


def check_peers(wanted: list[str]) -> None:
    """Stop before the first benchmark, not after an hour of them, when a peer a wanted
    benchmark runs beside is not fetched (``make bench`` fetches them)."""
    if {"relay", "relay_latency"} & set(wanted):
        peers.mirror_maker_libs()
    if "compiled_limit" in wanted:
        peers.limit_classes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--egress-segment-bytes",
        default=egress_throughput.SEGMENT_BYTES,
        help="egress's max_segment_bytes (record bytes; the compiled-client limit writes "
        f"{compiled_limit.OBJECT_BYTES // 2**20} MiB objects)",
    )
    parser.add_argument("--latency-seconds", type=float, default=60.0)
    parser.add_argument("--latency-rate", type=int, default=2_000)
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each figure (the median is judged)"
    )
    hog = parser.add_mutually_exclusive_group()
    hog.add_argument(
        "--cpu-hog",
        dest="hog",
        action="store_const",
        const="only",
        default="both",
        help="run the latency benchmarks only under a CPU hog on one core",
    )
    hog.add_argument(
        "--no-hog",
        dest="hog",
        action="store_const",
        const="off",
        help="no second pass of the latency benchmarks under a CPU hog",
    )
    parser.add_argument(
        "--profile",
        nargs="+",
        default=[],
        choices=[b for b in BENCHMARKS if b not in ONCE],
        help="py-spy profiles of these stages' product phase into bench/results/profiles/",
    )
    parser.add_argument("--scale-records", type=int, default=256_000)
    parser.add_argument("--scale-partitions", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--scale-segments", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument(
        "--output",
        type=Path,
        help=f"results file (default: {RESULTS}, or with --profile beside the profiles)",
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    configure_logging("WARNING")
    # A profiled run is slowed by its sampler: its figures never go to latest.json.
    if args.output is None:
        profiled = "-".join(args.profile)
        args.output = profiles.PROFILES / f"{profiled}.json" if profiled else RESULTS
    if args.profile:
        profiles.enable(args.profile, args.output.parent)
    wanted = args.only or BENCHMARKS
    check_peers(wanted)
    repeat = args.repeat
    started = time.monotonic()

    def times(once: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
        return [once() for _ in range(repeat)]

    def fresh(name: str, once: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
        """The first run here, each further run in a process of its own."""
        common = ["--records", str(args.records), "--partitions", str(args.partitions)]
        common += ["--egress-segment-bytes", args.egress_segment_bytes]
        return [once()] + [in_fresh_process(name, common) for _ in range(repeat - 1)]

    steps: dict[str, Callable[[bool], list[dict[str, Any]]]] = {
        "egress": lambda _: fresh(
            "egress",
            lambda: egress_throughput.measure(
                args.records, args.partitions, args.egress_segment_bytes
            ),
        ),
        "ingress": lambda _: ingress_throughput.measure(args.records, args.partitions, repeat),
        "compaction": lambda _: fresh(
            "compaction", lambda: compaction_throughput.measure(args.records, args.partitions, 10)
        ),
        "restore": lambda _: restore_throughput.measure(args.records, args.partitions, repeat),
        "latency": lambda hogged: times(
            lambda: latency.measure(args.latency_rate, args.latency_seconds, hogged)
        ),
        "relay": lambda _: times(
            lambda: relay.measure_throughput(args.records // 2, args.partitions)
        ),
        "relay_latency": lambda hogged: times(
            lambda: relay.measure_latency(args.latency_rate, args.latency_seconds / 2, hogged)
        ),
        "compiled_limit": lambda _: times(
            lambda: compiled_limit.measure(args.records, args.partitions)
        ),
        "scale": lambda _: [
            scale.measure(args.scale_records, args.scale_partitions, args.scale_segments)
        ],
        "upload": lambda _: [upload.measure(64, 0.1)],
        "s3_stand_in": lambda _: [s3_stand_in.measure(256)],
    }
    runs: list[dict[str, dict[str, Any]]] = [{} for _ in range(repeat)]
    step_seconds: dict[str, float] = {}
    for name, hogged in plan(wanted, args.hog):
        key = result_key(name, hogged)
        count = 1 if name in ONCE else repeat
        under = " under a CPU hog on one core" if hogged else ""
        print(f"running the {name} benchmark{under}, {count} time(s) ...", flush=True)
        step_started = time.monotonic()
        for run, result in enumerate(steps[name](hogged)):
            runs[run][key] = result
        step_seconds[key] = round(time.monotonic() - step_started, 1)
    summaries = aggregate([figures_from(raw) for raw in runs])
    print()
    print(f"median of {repeat} run(s), (min-max) beside it; targets judged on the median")
    print(render(summaries))
    for failure in peer_failures(runs):
        print(failure)
    costs = cost_table(runs[0])
    if costs:
        print()
        print(costs)
    if "scale" in runs[0]:
        print()
        print(scale_tables(runs[0]["scale"]))
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
                "repeat": repeat,
                "cpu_hog": args.hog,
                "seconds": round(time.monotonic() - started, 1),
                "step_seconds": step_seconds,
                "figures": [summary_json(s) for s in summaries],
                "runs": [
                    {
                        "raw": raw,
                        "figures": [asdict(f) | {"ratio": f.ratio} for f in figures_from(raw)],
                    }
                    for raw in runs
                ],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwritten to {args.output}")


def in_fresh_process(name: str, options: list[str]) -> dict[str, Any]:
    """One run of benchmark ``name`` in a new Python process (``bench.run --only name
    --repeat 1``): a benchmark that runs Spark in the benchmark's process would otherwise
    find the JVM of the run before it up, and start its session in a fraction of a
    second (measured: compaction's Spark start 42 s in a first run, 0.28 s in a second in
    the same process)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-run-") as scratch:
        output = Path(scratch) / "run.json"
        command = [sys.executable, "-m", "bench.run", "--only", name, "--repeat", "1"]
        command += ["--no-hog", "--output", str(output), *options]
        # Its table is this run's business: its output is shown only if it fails.
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=3600)
        if done.returncode != 0:
            print(done.stdout)
            done.check_returncode()
        raw: dict[str, Any] = json.loads(output.read_text())["runs"][0]["raw"][name]
    return raw


def summary_json(summary: Summary) -> dict[str, Any]:
    """A figure in the results file: every run's values, and min / median / max of each.
    Pure."""
    out: dict[str, Any] = asdict(summary) | {"met": summary.met}
    for field in ("projects", "baselines", "ratios"):
        values = getattr(summary, field)
        if values:
            low, middle, high = spread(values)
            out[field.removesuffix("s")] = {
                "min": low,
                "median": middle,
                "max": high,
            }
    return out


if __name__ == "__main__":
    main()
