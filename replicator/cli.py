"""The ``replicator`` command.

Subcommands are registered only when they work. User errors (a bad config, an unreachable
service) print one line naming the problem and exit non-zero, without a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from replicator import __version__
from replicator.core.config import Config, load_config, required
from replicator.core.errors import ConfigError, ReplicatorError
from replicator.core.logs import configure_logging, current_logging
from replicator.core.signals import stop_on_signals
from replicator.core.spark_environment import explain_executor_failure
from replicator.core.untrusted_text import escape

if TYPE_CHECKING:
    from infra.security import SecurityMaterial

log = logging.getLogger(__name__)

DEFAULT_STACK_CONFIG = "config.example.toml"
DEFAULT_STACK_DIR = ".replicator/stack"


def _load(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def _check_kafka(config: Config, *regions: str, timeout: float | None = None) -> None:
    """Stop before any work, with one clear error, when a region's cluster refuses this
    service's user or certificate (see ``check_access``); a cluster that does not answer
    is waited for ``timeout`` seconds (the check's default without one)."""
    from replicator.core.kafka.clients import check_access

    for region in dict.fromkeys(regions):
        if timeout is None:
            check_access(config.region(region).kafka, region)
        else:
            check_access(config.region(region).kafka, region, timeout)


def _stack(args: argparse.Namespace) -> int:
    from infra.stack import Stack, StackSpec

    stack = Stack(StackSpec.from_config(_load(args), args.state_dir, args.security))
    if args.action == "up":
        states = stack.up()
        print("local stack is up:")
        for state in states:
            print(f"  {state.service.name:<20} {state.service.endpoint:<22} {state.status}")
        print(f"logs and pid files: {stack.state_dir}")
        if stack.spec.material is not None:
            print(_secured_stack_help(stack.spec.material))
    elif args.action == "down":
        stopped = stack.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    else:
        states = stack.status()
        for state in states:
            print(f"{state.service.name:<20} {state.service.endpoint:<22} {state.status}")
        return 0 if all(s.running for s in states) else 3
    return 0


def _secured_stack_help(material: SecurityMaterial) -> str:
    """How to point the services at the secured stack (no password is printed)."""
    from infra.security import (
        BROKER_USER,
        PASSWORD_ENV,
        SASL_MECHANISM,
        SECURITY_PROTOCOL,
        SERVICE_USERS,
        USERNAME_ENV,
    )

    users = ", ".join(f"{service}={user}" for service, user in SERVICE_USERS.items())
    return (
        f"brokers demand {SECURITY_PROTOCOL} ({SASL_MECHANISM}) and enforce ACLs "
        "(none granted yet: docs/security.md lists each service's)\n"
        f"  CA to trust      {material.ca_file}\n"
        f"  users            {users}; {BROKER_USER} (the brokers' own, the only super user)\n"
        f"  passwords        {material.users_file} (mode 0600)\n"
        "  in each region's [regions.NAME.kafka]:\n"
        f'    security_protocol = "{SECURITY_PROTOCOL}"\n'
        f'    sasl_mechanism = "{SASL_MECHANISM}"\n'
        f'    sasl_username = "${{{USERNAME_ENV}}}"\n'
        f'    sasl_password = "${{{PASSWORD_ENV}}}"\n'
        f'    ssl_ca_location = "{material.ca_file}"\n'
        f"  and start each service with {USERNAME_ENV} and {PASSWORD_ENV} set to its own user"
    )


def _egress(args: argparse.Namespace) -> int:
    from egress.job import run_egress

    config = _load(args)
    _check_kafka(config, required(config, "egress").region)
    result = run_egress(config, stop_at_end=args.stop_at_end, master=args.master)
    print(f"egress done: {result.batches} batches, {result.records} records read")
    return 0


def _ingress(args: argparse.Namespace) -> int:
    from ingress.instance import run_ingress

    config = _load(args)
    _check_kafka(config, required(config, "ingress").region)
    return run_ingress(config, stop_at_end=args.stop_at_end)


def _relay(args: argparse.Namespace) -> int:
    from relay.service import run_relay

    config = _load(args)
    relay = required(config, "relay")
    _check_kafka(config, relay.destination, relay.sources[0])
    return run_relay(config, stop_at_end=args.stop_at_end)


def _partitions(text: str) -> list[int]:
    try:
        return sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected partition numbers like 0,3,7, got {text!r}"
        ) from None


def _compact(args: argparse.Namespace) -> int:
    import threading

    from compaction.job import CompactionJob, export
    from compaction.schedule import run_on_schedule

    config = _load(args)
    compaction = required(config, "compaction")
    if (args.from_level is None) != (args.to_level is None):
        raise ConfigError(args.config, [("", "--from-level and --to-level go together")])
    job = CompactionJob(
        config,
        topics=args.topic,
        partitions=args.partitions,
        from_level=args.from_level,
        to_level=args.to_level,
        master=args.master,
    )
    if args.plan:
        for line in job.describe(job.plan()):
            print(line)
        return 0
    stop = threading.Event()

    failed: list[str] = []

    def run() -> None:
        report = job.run_once()
        export(report, config)
        print(report.summary(), flush=True)
        failed[:] = report.failed

    with stop_on_signals(stop, job.stop, then="stopping between merges"):
        if args.once or args.from_level is not None:
            run()
            return 1 if failed else 0
        run_on_schedule(compaction.schedule, run, stop)
    return 0


def _status(args: argparse.Namespace) -> int:
    import json
    import time

    from replicator.status import render
    from replicator.status_relay import collect_everything, render_relay

    rows, relayed = collect_everything(_load(args))
    now = time.time()
    if args.json:
        found = [row.to_dict(now) for row in rows] + [row.to_dict(now) for row in relayed]
        print(json.dumps(found, indent=2))
        return 0
    tables = [render(rows, now)] if rows or not relayed else []
    if relayed:
        tables.append(render_relay(relayed, now))
    print("\n\n".join(tables))
    return 0


def _config(args: argparse.Namespace) -> int:
    import json

    if args.action == "schema":
        from replicator.core.config.docstrings import documented

        print(json.dumps(documented().model_json_schema(), indent=2))
        return 0
    from replicator.config_check import check, render

    if not args.config:
        raise ConfigError("replicator config check", [("--config", "required")])
    result = check(Path(args.config), connect_to=args.connect, write_probe=args.write_probe)
    print(json.dumps(result.to_dict(), indent=2) if args.json else render(result))
    return 0 if result.ok else 1


def _spark_archive(args: argparse.Namespace) -> int:
    from replicator.core.config import SparkConfig
    from replicator.core.spark_class_archive import build

    settings = _load(args).spark if args.config else SparkConfig()
    result = build(settings)
    if result.recorded:
        print(f"recorded the Spark driver's class archive in {result.seconds:.0f} s: {result.path}")
    else:
        print(f"the Spark driver's class archive is in place: {result.path}")
    return 0


def _failover(args: argparse.Namespace) -> int:
    import json

    from replicator.failover import REACH_TIMEOUT, apply, collect, render

    config = _load(args)
    # A destination that does not answer is reported, not waited for: an operator runs
    # failover in an outage.
    if config.ingress is not None:
        _check_kafka(config, config.ingress.region, timeout=REACH_TIMEOUT)
    elif config.relay is not None:
        _check_kafka(config, config.relay.destination, timeout=REACH_TIMEOUT)
    report = collect(config, args.group or ())
    if args.apply:
        apply(config, report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(render(report))
    return 0 if report.ready else 1


def _failback(args: argparse.Namespace) -> int:
    from replicator.failback import apply, plan, render, write_reversed_config

    config = _load(args)
    text = Path(args.config).read_text(encoding="utf-8")
    report = plan(config, text, args.old_region)
    if args.write_config:
        write_reversed_config(report, Path(args.write_config))
    if args.apply:
        apply(config, report, args.group or ())
    print(render(report))
    if not args.write_config and not args.apply:
        print("\nThe reversed config:\n")
        print(report.reversed_config)
    return 0 if report.ok else 1


def _restore(args: argparse.Namespace) -> int:
    import json
    import time

    from restore.job import RestoreJob, RestoreRequest
    from restore.planning import parse_until
    from restore.report import describe, render
    from restore.task import as_dict

    config = _load(args)
    try:
        until = parse_until(args.until) if args.until is not None else None
    except ValueError as exc:
        raise ConfigError("--until", [("", str(exc))]) from None
    request = RestoreRequest(
        topics=args.topic,
        from_region=args.from_region,
        into_region=args.into_region,
        into_topic=args.into_topic,
        until_ms=until,
        partitions=args.partitions,
        append=args.append,
        groups=bool(args.groups or args.group),
        group_names=args.group,
    )
    job = RestoreJob(config, request, master=args.master, say=lambda line: print(line, flush=True))
    if job.into_region is not None:
        _check_kafka(config, job.into_region)
    plans = job.plan()
    if args.plan:
        job.preview_cuts(plans)
        for line in describe(plans, until):
            print(line)
        return 0
    started = time.monotonic()
    results = job.run(plans)
    seconds = time.monotonic() - started
    groups = job.restore_groups(plans) if request.groups else []
    committed = {g: n is not None for g, n in job.groups_moved.items()}
    if args.json:
        report = {
            "seconds": seconds,
            "tasks_seconds": job.tasks_seconds,
            "partitions": [as_dict(r) for r in results],
            "groups": [
                {
                    "group": g.group,
                    "topic": g.target.destination_topic,
                    "partition": g.target.destination_partition,
                    "source_offset": g.translation.source_offset,
                    "offset": g.translation.destination_offset,
                    "exact": g.translation.exact,
                    "committed": committed.get(g.group, False),
                }
                for g in groups
            ],
        }
        print(json.dumps(report, indent=2))
    else:
        print(render(results, seconds))
        for g in groups:
            state = "committed" if committed.get(g.group) else "has members: not moved"
            print(
                f"group {escape(g.group)} {g.target.destination_topic} partition "
                f"{g.target.destination_partition}: source offset {g.translation.source_offset}"
                f" -> {g.translation.destination_offset} ({state})"
            )
    return 0 if all(r.ok for r in results) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="Cross-region Kafka replication through S3.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("REPLICATOR_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
    )
    parser.add_argument(
        "--log-format",
        default=os.environ.get("REPLICATOR_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="one line per event; json for log shippers",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    stack = commands.add_parser(
        "stack", help="run the local two-region stack (Kafka x2, S3+SQS, replication)"
    )
    stack.add_argument("action", choices=["up", "down", "status"])
    stack.add_argument(
        "--config",
        default=DEFAULT_STACK_CONFIG,
        help=f"deployment config whose regions the stack serves (default {DEFAULT_STACK_CONFIG})",
    )
    stack.add_argument(
        "--state-dir",
        default=DEFAULT_STACK_DIR,
        help=f"pid files and logs (default {DEFAULT_STACK_DIR})",
    )
    stack.add_argument(
        "--security",
        choices=["plaintext", "sasl_ssl"],
        help="sasl_ssl: every broker listener SASL_SSL (SCRAM-SHA-512) with ACLs enforced, "
        "a CA and users made under the state directory (default: what the config's regions say)",
    )
    stack.set_defaults(handler=_stack)

    egress = commands.add_parser(
        "egress", help="stream the [egress] region's topics to level-0 segments (Spark)"
    )
    egress.add_argument("--config", required=True, help="deployment config (TOML)")
    egress.add_argument(
        "--stop-at-end",
        action="store_true",
        help="export everything up to the log ends seen at start, then exit",
    )
    egress.add_argument("--master", help="Spark master URL (default local[*])")
    egress.set_defaults(handler=_egress)

    ingress = commands.add_parser(
        "ingress", help="replay segments into the [ingress] region's Kafka (long-running)"
    )
    ingress.add_argument("--config", required=True, help="deployment config (TOML)")
    ingress.add_argument(
        "--stop-at-end",
        action="store_true",
        help="replay every segment present at start, write final checkpoints, exit",
    )
    ingress.set_defaults(handler=_ingress)

    relay = commands.add_parser(
        "relay", help="relay topics directly from Kafka to Kafka, exactly once (long-running)"
    )
    relay.add_argument("--config", required=True, help="deployment config (TOML)")
    relay.add_argument(
        "--stop-at-end",
        action="store_true",
        help="relay up to the upstream's log ends seen at start, commit, exit",
    )
    relay.set_defaults(handler=_relay)

    compact = commands.add_parser(
        "compact", help="merge segments into higher levels (on [compaction] schedule)"
    )
    compact.add_argument("--config", required=True, help="deployment config (TOML)")
    compact.add_argument("--once", action="store_true", help="one run now, then exit")
    compact.add_argument("--plan", action="store_true", help="print what a run would do")
    compact.add_argument("--topic", action="append", help="only this topic (repeatable)")
    compact.add_argument("--partitions", type=_partitions, help="only these, e.g. 0,3,7")
    compact.add_argument("--from-level", type=int, help="manual consolidation: input level")
    compact.add_argument("--to-level", type=int, help="manual consolidation: output level")
    compact.add_argument("--master", help="Spark master URL (default local[parallelism])")
    compact.set_defaults(handler=_compact)

    status = commands.add_parser(
        "status",
        help="where each partition stands: source, S3 segments, ingress, relay (read-only)",
    )
    status.add_argument("--config", required=True, help="deployment config (TOML)")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(handler=_status)
    restore = commands.add_parser(
        "restore", help="restore topics from the S3 archive into a cluster (Spark batch)"
    )
    restore.add_argument("--config", required=True, help="deployment config (TOML)")
    restore.add_argument("--topic", action="append", required=True, help="topic (repeatable)")
    restore.add_argument("--from-region", help="region that exported it (default: the config's)")
    restore.add_argument(
        "--into-region", help="cluster and bucket to restore from and into (default: ingress's)"
    )
    restore.add_argument("--into-topic", help="destination topic (default: the topic's name)")
    restore.add_argument(
        "--until", help="restore records up to this time: ISO-8601 with zone or epoch ms"
    )
    restore.add_argument("--partitions", type=_partitions, help="only these, e.g. 0,3,7")
    restore.add_argument(
        "--append", action="store_true", help="restore after records already in the topic"
    )
    restore.add_argument(
        "--groups",
        action="store_true",
        help="also commit exported consumer groups' offsets as they were at the cut "
        "(every group exported, unless --group names some)",
    )
    restore.add_argument(
        "--group",
        action="append",
        help="with --groups: only this consumer group (repeatable; implies --groups)",
    )
    restore.add_argument("--plan", action="store_true", help="print what would be restored")
    restore.add_argument("--json", action="store_true", help="the final report as JSON")
    restore.add_argument("--master", help="Spark master URL (default local)")
    restore.set_defaults(handler=_restore)

    config = commands.add_parser(
        "config", help="check a config file, or print the JSON Schema of config files"
    )
    config.add_argument("action", choices=["check", "schema"])
    config.add_argument("--config", help="the config file to check (TOML)")
    config.add_argument(
        "--connect",
        action="store_true",
        help="also ask each region's Kafka, bucket and queue whether they answer",
    )
    config.add_argument(
        "--write-probe",
        action="store_true",
        help="with --connect: write and delete a probe object under each bucket's prefix",
    )
    config.add_argument("--json", action="store_true", help="machine-readable output")
    config.set_defaults(handler=_config)

    spark_archive = commands.add_parser(
        "spark-archive",
        help="record the Spark driver JVM's class archive in the environment cache "
        "(once per install or image: Spark jobs then start in about half the time)",
    )
    spark_archive.add_argument(
        "--config", help="deployment config whose [spark] environment_cache to use"
    )
    spark_archive.set_defaults(handler=_spark_archive)

    failover = commands.add_parser(
        "failover",
        help="is the destination ready; translate and commit consumer group offsets there",
    )
    failover.add_argument("--config", required=True, help="deployment config (TOML)")
    failover.add_argument(
        "--group",
        action="append",
        help="consumer group to fail over (repeatable; default: those [ingress] "
        "consumer_groups or [relay] consumer_groups names)",
    )
    failover.add_argument(
        "--apply",
        action="store_true",
        help="commit the translated offsets of groups without members (forward only)",
    )
    failover.add_argument("--json", action="store_true", help="machine-readable output")
    failover.set_defaults(handler=_failover)

    failback = commands.add_parser(
        "failback",
        help="after a failover: the old region's divergent tail, the reversed config; "
        "with --apply archive the tail, reverse replication, move groups back",
    )
    failback.add_argument(
        "--config", required=True, help="the forward direction's config (as failover used)"
    )
    failback.add_argument(
        "--group",
        action="append",
        help="consumer group of the new region to move back (repeatable; default: those "
        "[relay] consumer_groups or [ingress] consumer_groups matches there)",
    )
    failback.add_argument(
        "--write-config", help="write the reversed direction's config (TOML) to this file"
    )
    failback.add_argument(
        "--old-region",
        help="the forward source region that comes back (default: the one the forward "
        "provenance names: the relay's origin, or ingress's only source region)",
    )
    failback.add_argument(
        "--apply",
        action="store_true",
        help="archive the divergent tail, seed and run the reversed relay to the new "
        "region's log ends, commit the groups' translated offsets (forward only)",
    )
    failback.set_defaults(handler=_failback)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        code = handler(args)
    except ConfigError as exc:
        _fail(f"config error: {exc}")
        code = 2
    except ReplicatorError as exc:
        _fail(str(exc))
        code = 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # a Spark job whose executors cannot start its Python
        explanation = explain_executor_failure(str(exc))
        if explanation is None:
            raise
        _fail(explanation)
        code = 1
    sys.exit(code)


def _fail(message: str) -> None:
    """Why the command failed, on stderr: a line of its own in text mode, a JSON line of
    the ``replicator`` logger in JSON mode (every line JSON)."""
    if current_logging()[1] == "json":
        logging.getLogger("replicator").error("%s", message)
    else:
        print(f"replicator: {message}", file=sys.stderr)
