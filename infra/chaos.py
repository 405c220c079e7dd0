"""The chaos soak behind ``make chaos``: the drill's pipeline under random faults.

Egress, the replication stand-in and ingress — and the relay, straight from Kafka to
Kafka — stream the drill's workload (every record shape: keys, tombstones, empty values,
headers with null values) from us-east-1 to us-west-1 for ``--seconds`` while one fault
at a time is injected at random moments, every kind in turn (shuffled; a kind not
injected by the time production ends is injected while the destination catches up, so
every kind is injected at least once): kill -9 of egress, ingress or the relay and a
restart, kill -9 of a region's broker and its restart on the data it kept on disk,
SIGSTOP of a broker or of the S3/SQS endpoint for up to ``--max-pause`` seconds then
SIGCONT, a compaction run next to the streaming services, duplicated S3 notifications
and malformed SQS messages. Then production stops, the destination catches up, a restore
of one topic from the archive into a new topic is killed with SIGKILL midway and run
again, and every copy (ingress's, the relay's, the restore's) is compared partition by
partition with its source. It prints a table: faults by kind, records produced and
replayed, lost and duplicated (both must be 0), the longest stall. Exit status 1 when
anything was lost or duplicated or the destination did not catch up.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from infra.drill import (
    ACCOUNTS,
    CLICKS,
    DESTINATION,
    JOB_SECTIONS,
    PLAIN,
    SOURCE,
    STARTED_LINE,
    TOPICS,
    DestinationTail,
    DrillOptions,
    Service,
    Workload,
    _with_source_offset,
    create_workload_topics,
    read_partition,
    settings,
    source_ends,
)
from infra.errors import DrillFailedError
from infra.freeze import freeze, thaw
from infra.local_config import local_regions, running_stack
from infra.ports import free_port
from infra.stack import Stack, StackSpec
from replicator.core.aws.clients import sqs_client
from replicator.core.config import Config, required
from replicator.core.segments.store import SegmentStore

RELAYED = "demo.clicks.relayed"
RESTORED = "demo.accounts.restored"
RELAY_SECTION = f"""
[relay]
sources = ["{SOURCE}"]
destination = "{DESTINATION}"
checkpoint_interval = "500ms"

[[relay.topics]]
source_topic = "{CLICKS}"
destination_topic = "{RELAYED}"
"""
FAULTS = (
    "kill egress",
    "kill ingress",
    "kill relay",
    f"pause kafka-{SOURCE}",
    f"pause kafka-{DESTINATION}",
    f"kill kafka-{SOURCE}",
    f"kill kafka-{DESTINATION}",
    "pause s3+sqs",
    "compaction run",
    "duplicated notifications",
    "malformed SQS messages",
)
MALFORMED = ['{"Records": ["x"]}', '{"Records": [{"s3": 5}]}', "[" * 50_000, "not json"]


@dataclass(frozen=True)
class ChaosOptions:
    workdir: Path
    seconds: float = 300.0
    """How long the workload is produced, and faults injected."""
    rate: float = 2_000.0
    """Records produced per second, over both topics."""
    max_pause: float = 20.0
    gap: tuple[float, float] = (4.0, 12.0)
    """Seconds between one fault's end and the next one's start (uniform)."""
    partitions: int = 4
    seed: int = 20261122
    drain_timeout: float = 300.0


@dataclass
class ChaosResult:
    faults: Counter[str] = field(default_factory=Counter)
    produced: int = 0
    replayed: int = 0
    lost: int = 0
    duplicated: int = 0
    longest_stall: float = 0.0
    copies: dict[str, int] = field(default_factory=dict)
    """Records read back per copy: ingress's per topic, the relay's, the restore's."""
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.problems and self.lost == 0 and self.duplicated == 0

    def table(self) -> str:
        rows = [(kind, str(self.faults.get(kind, 0))) for kind in (*FAULTS, "kill restore")]
        rows += [
            ("records produced", f"{self.produced:,}"),
            *((f"records in {name}", f"{n:,}") for name, n in sorted(self.copies.items())),
            ("records read back", f"{self.replayed:,}"),
            ("lost", str(self.lost)),
            ("duplicated", str(self.duplicated)),
            ("longest stall", f"{self.longest_stall:.1f}s"),
        ]
        width = max(len(k) for k, _ in rows)
        lines = [f"{'fault / figure'.ljust(width)}  value", f"{'-' * width}  -----"]
        lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
        return "\n".join(lines)


class Chaos:
    def __init__(self, options: ChaosOptions, out: IO[str] | None = None) -> None:
        self.options = options
        self.out = out if out is not None else sys.stdout
        self.rng = random.Random(options.seed)
        self.started = time.monotonic()
        self.result = ChaosResult()

    def say(self, text: str) -> None:
        self.out.write(f"[{time.monotonic() - self.started:5.0f}s] {text}\n")
        self.out.flush()

    def run(self) -> ChaosResult:
        root = self.options.workdir.resolve()
        (root / "logs").mkdir(parents=True, exist_ok=True)
        config_path = root / "chaos.toml"
        toml = (
            local_regions("chaos")
            + JOB_SECTIONS.format(
                egress_metrics=free_port(), ingress_metrics=free_port(), root=root
            )
            + RELAY_SECTION
        )
        services: list[Service] = []
        with running_stack(config_path, toml, root / "stack") as config:
            stack = Stack(StackSpec.from_config(config, root / "stack"))
            try:
                self._soak(config, config_path, root, stack, services)
            except DrillFailedError as exc:
                self.result.problems.append(str(exc))
            finally:
                for service in services:
                    service.kill()
        return self.result

    # -- the soak -------------------------------------------------------------------------

    def _soak(
        self,
        config: Config,
        config_path: Path,
        root: Path,
        stack: Stack,
        services: list[Service],
    ) -> None:
        options = self.options
        east = config.region(SOURCE).kafka.bootstrap_servers
        west = config.region(DESTINATION).kafka.bootstrap_servers
        create_workload_topics(east, options.partitions)
        common = ["--config", str(config_path)]
        runs = Counter[str]()

        def service(name: str) -> Service:
            runs[name] += 1
            made = Service(name, [name, *common], root / "logs" / f"{name}-{runs[name]}.log")
            made.start()
            services.append(made)
            return made

        egress, ingress, relay = service("egress"), service("ingress"), service("relay")
        egress.wait_for_log(STARTED_LINE, 180)
        destinations = {s.topic: s.destination for s in required(config, "ingress").sources}
        tail = DestinationTail(west, destinations, options.partitions)
        tail.start()
        records = int(options.rate * options.seconds)
        workload = Workload(
            east,
            DrillOptions(
                workdir=root,
                records=records,
                seconds=options.seconds,
                partitions=options.partitions,
            ),
        )
        workload.start()
        self.say(f"producing {records:,} records over {options.seconds:.0f}s with faults")
        stall = StallMeter(lambda: tail.replayed(), lambda: workload.produced)
        kinds: list[str] = []
        try:
            while True:
                producing = None if workload.done.is_set() else workload
                self._wait(self.rng.uniform(*options.gap), producing, stall)
                kind = self._next_fault(kinds, workload.done.is_set())
                if kind is None:
                    break
                if kind == "kill relay":
                    relay.kill()
                    services.remove(relay)
                    relay = service("relay")
                    self.say(f"kill -9 relay; restarted (pid {relay.pid})")
                else:
                    egress, ingress = self._inject(
                        kind, config, stack, egress, ingress, service, services, common, root
                    )
                self.result.faults[kind] += 1
                stall.sample()
            if workload.error is not None:
                raise DrillFailedError(f"producing the workload failed: {workload.error}")
            self.say("production done, every kind injected; waiting for the destination")
            deadline = time.monotonic() + options.drain_timeout
            while True:
                ends = source_ends(east, options.partitions)
                if all(tail.counts.get(k, 0) >= n for k, n in ends.items()):
                    relayed = _ends(west, RELAYED, options.partitions)
                    if all(relayed[p] >= ends[(CLICKS, p)] for p in range(options.partitions)):
                        break
                if time.monotonic() > deadline:
                    self.result.problems.append(
                        f"the destination did not catch up within {options.drain_timeout:.0f}s"
                    )
                    break
                self._wait(1.0, None, stall)
        finally:
            tail.close()
        self.result.longest_stall = stall.longest
        self.result.produced = sum(source_ends(east, options.partitions).values())
        for running in (egress, ingress, relay):
            running.stop()
        self._restore(common, root, west)
        self._count(east, west, {**destinations, f"{CLICKS} (relay)": RELAYED})
        self._count(east, west, {f"{ACCOUNTS} (restore)": RESTORED})

    def _next_fault(self, kinds: list[str], production_done: bool) -> str | None:
        """The next kind of fault: every kind in turn (a shuffled round at a time) while
        production lasts; after it, only the kinds not injected yet, so that a short soak
        still injects every kind once; None when production is done and every kind was."""
        if production_done:
            missing = [kind for kind in FAULTS if not self.result.faults[kind]]
            kinds[:] = [kind for kind in kinds if kind in missing] or missing
            return kinds.pop() if kinds else None
        if not kinds:
            kinds.extend(FAULTS)
            self.rng.shuffle(kinds)
        return kinds.pop()

    def _wait(self, seconds: float, workload: Workload | None, stall: StallMeter) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if workload is not None and workload.done.is_set():
                return
            stall.sample()
            time.sleep(0.25)

    def _inject(
        self,
        kind: str,
        config: Config,
        stack: Stack,
        egress: Service,
        ingress: Service,
        service: Callable[[str], Service],
        services: list[Service],
        common: list[str],
        root: Path,
    ) -> tuple[Service, Service]:
        if kind == "kill egress":
            egress.kill()
            services.remove(egress)
            egress = service("egress")
            self.say(f"kill -9 egress; restarted (pid {egress.pid})")
        elif kind == "kill ingress":
            ingress.kill()
            services.remove(ingress)
            ingress = service("ingress")
            self.say(f"kill -9 ingress; restarted (pid {ingress.pid})")
        elif kind.startswith("pause "):
            name = "s3" if kind == "pause s3+sqs" else kind.removeprefix("pause ")
            seconds = self.rng.uniform(2.0, self.options.max_pause)
            pid = next(s.pid for s in stack.status() if s.service.name == name and s.pid)
            self.say(f"SIGSTOP {name} for {seconds:.0f}s")
            freeze(pid)
            try:
                time.sleep(seconds)
            finally:
                thaw(pid)
        elif kind.startswith("kill kafka-"):
            name = kind.removeprefix("kill ")
            down_for = self.rng.uniform(1.0, max(1.0, self.options.max_pause / 2))
            pid = next(s.pid for s in stack.status() if s.service.name == name and s.pid)
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            time.sleep(down_for)
            stack.up()  # starts what is not running: the broker, on its data directory
            self.say(f"kill -9 {name}; restarted after {down_for:.0f}s on its data")
        elif kind == "compaction run":
            log_path = root / "logs" / f"compaction-{self.result.faults[kind] + 1}.log"
            threading.Thread(
                target=_compact, args=(common, log_path), name="chaos-compaction", daemon=True
            ).start()
            self.say("a compaction run started next to the streaming services")
        elif kind == "duplicated notifications":
            sent = _duplicate_notifications(config, self.rng)
            self.say(f"sent {sent} duplicated S3 notifications")
        else:
            _send(config, MALFORMED)
            self.say(f"sent {len(MALFORMED)} malformed SQS messages")
        return egress, ingress

    def _restore(self, common: list[str], root: Path, west: str) -> None:
        """Restore one topic from the destination bucket into a new topic, killed with
        SIGKILL once midway (after its first records reach the topic: a kill at a fixed
        time could come before it starts writing or after it ends) and run again."""
        command = [sys.executable, "-m", "replicator", "restore", *common]
        command += ["--topic", ACCOUNTS, "--into-topic", RESTORED]
        victim = Service("restore", command[3:], root / "logs" / "restore-1.log")
        victim.start()
        deadline = time.monotonic() + RESTORE_WRITE_TIMEOUT
        while (written := _log_end(west, RESTORED, self.options.partitions)) == 0:
            if victim.exited() is not None or time.monotonic() > deadline:
                self.result.problems.append(
                    "the first restore wrote nothing before it "
                    + ("exited" if victim.exited() is not None else "timed out")
                )
                break
            time.sleep(0.1)
        victim.kill()
        self.result.faults["kill restore"] += 1
        self.say(f"kill -9 restore midway ({written:,} records in its topic); running it again")
        with (root / "logs" / "restore-2.log").open("wb") as sink:
            rerun = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, timeout=900)
        if rerun.returncode != 0:
            self.result.problems.append(f"restore exited with {rerun.returncode} on its rerun")

    def _count(self, east: str, west: str, destinations: dict[str, str]) -> None:
        """Compare each destination (by the source topic it copies) with its source."""
        for name, destination in destinations.items():
            topic = name.split(" (")[0]
            for partition in range(self.options.partitions):
                source = [r[0] for r in read_partition(east, topic, partition)]
                copied = [
                    _with_source_offset(r, SOURCE, topic, partition)[0]
                    for r in read_partition(west, destination, partition)
                ]
                self.result.replayed += len(copied)
                self.result.lost += len(set(source) - set(copied))
                self.result.duplicated += len(copied) - len(set(copied))
                self.result.copies[name] = self.result.copies.get(name, 0) + len(copied)
                if set(copied) - set(source) or copied != sorted(copied):
                    self.result.problems.append(f"{name}[{partition}]: out of order or foreign")


RESTORE_WRITE_TIMEOUT = 300.0


def _log_end(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of ``topic``'s log ends, records of open transactions included (0 while
    it does not exist)."""
    consumer = Consumer({**PLAIN, **settings(bootstrap), "group.id": "chaos-watch"})
    try:
        total = 0
        for partition in range(partitions):
            with contextlib.suppress(KafkaException):
                _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), 5)
                total += max(high, 0)  # negative: no offset known yet
        return total
    finally:
        consumer.close()


def _ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Committed records per partition of ``topic`` (0 while it does not exist yet)."""
    counts = {}
    for partition in range(partitions):
        try:
            counts[partition] = len(read_partition(bootstrap, topic, partition))
        except (DrillFailedError, KafkaException):
            counts[partition] = 0
    return counts


class StallMeter:
    """The longest time the destination did not grow while records were waiting."""

    def __init__(self, replayed: Callable[[], int], produced: Callable[[], int]) -> None:
        self._replayed = replayed
        self._produced = produced
        self._last = (replayed(), time.monotonic())
        self.longest = 0.0

    def sample(self) -> None:
        now, count = time.monotonic(), self._replayed()
        if count != self._last[0] or count >= self._produced():
            self._last = (count, now)
        self.longest = max(self.longest, now - self._last[1])


def _compact(common: list[str], log_path: Path) -> None:
    with log_path.open("wb") as sink:
        subprocess.run(
            [sys.executable, "-m", "replicator", "compact", *common, "--once"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )


def _send(config: Config, bodies: Sequence[str]) -> None:
    region = required(config, "ingress").region
    sqs = sqs_client(config, region)
    queue = config.region(region).sqs_queue
    assert queue is not None
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)


def _duplicate_notifications(config: Config, rng: random.Random) -> int:
    """S3 notifications for segments already in the destination bucket, each twice."""
    store = SegmentStore.for_region(config, DESTINATION)
    keys = [
        s.s3_key
        for topic in TOPICS
        for partition in range(2)
        for s in store.list_segments(SOURCE, topic, partition)
    ]
    chosen = rng.sample(keys, min(3, len(keys)))
    bodies = [
        json.dumps(
            {
                "Records": [
                    {
                        "eventName": "ObjectCreated:Put",
                        "eventTime": "2026-11-22T00:00:00.000Z",
                        "s3": {"object": {"key": key, "size": 1}},
                    }
                ]
            }
        )
        for key in chosen
    ]
    _send(config, bodies + bodies)
    return len(bodies) * 2


def run_chaos(options: ChaosOptions, out: IO[str] | None = None) -> ChaosResult:
    chaos = Chaos(options, out)
    result = chaos.run()
    chaos.out.write(result.table() + "\n")
    for problem in result.problems:
        chaos.out.write(f"PROBLEM: {problem}\n")
    chaos.out.write(("PASSED" if result.passed else "FAILED") + "\n")
    return result


def main(argv: Sequence[str] | None = None, exit: Callable[[int], Any] = sys.exit) -> None:
    parser = argparse.ArgumentParser(prog="python -m infra.chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--rate", type=float, default=2_000.0)
    parser.add_argument("--max-pause", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--workdir", type=Path, default=Path(".replicator/chaos"))
    args = parser.parse_args(argv)
    options = ChaosOptions(
        workdir=args.workdir,
        seconds=args.seconds,
        rate=args.rate,
        max_pause=args.max_pause,
        seed=args.seed,
    )
    exit(0 if run_chaos(options).passed else 1)


if __name__ == "__main__":
    main()
