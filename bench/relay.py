"""Relay: records/s next to a plain confluent-kafka consume-then-produce loop in one
process (no transactions, no provenance header), and end-to-end latency at a steady rate
with ``checkpoint_interval = "200ms"``; each beside MirrorMaker 2 with exactly-once
delivery (:mod:`bench.mirror_maker`), the relay's peer, measured in the same run.

Usage: python -m bench.relay [--records N] [--partitions P] [--rate R] [--seconds S]
Each measurement starts its own local stack. Throughput: the fixed workload relayed with
``replicator relay --stop-at-end`` logic in this process (whole run, the consumer-group
join included, and from the first record on); then, for its memory, the same records
relayed again into another topic by ``replicator relay --stop-at-end`` as a process of its
own, whose peak RSS is the relay's alone. Latency: ``replicator relay`` as a process,
from the source timestamp to the moment a read_committed consumer of the destination
reads the record.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench import mirror_maker
from bench.latency import PARTITIONS as LATENCY_PARTITIONS
from bench.latency import lag_figures, loaded, steady_load
from bench.local_stack import bench_stack
from bench.memory import PeakRss
from bench.profiles import profiled
from bench.workload import produce_workload
from infra.drill import DestinationTail, Service
from relay.service import RelayService
from relay.worker import RelayWorker
from replicator.core.kafka.clients import BULK_READER
from replicator.core.logs import configure_logging

CONFIG = """
[relay]
sources = ["us-east-1"]
destination = "us-west-1"
checkpoint_interval = "200ms"
assignment_partitions = 8
[[relay.topics]]
source_topic = "bench"
destination_topic = "bench.copy"
"""
PROCESS_CONFIG = CONFIG.replace(
    "[relay]\n",
    "[relay]\n"
    'group_id = "bench-relay-process"\n'
    'checkpoint_topic = "bench.relay-process.checkpoints"\n'
    'assignment_topic = "bench.relay-process.assignments"\n',
).replace('"bench.copy"', '"bench.process"')
"""The relay run as a process of its own (:func:`measure_process`): a relay of its own
(group, checkpoints, assignments) into a topic of its own, beside the in-process run's."""
log = logging.getLogger(__name__)

STARTED = "relaying"
"""What the relay logs once it owns its partitions."""


def plain_relay(source: str, destination: str, partitions: int) -> tuple[int, float]:
    """Copy topic ``bench`` to ``bench.plain`` with one consumer and one producer in this
    process, key, value, timestamp and headers kept: (records, seconds)."""
    admin = AdminClient({"bootstrap.servers": destination})
    admin.create_topics([NewTopic("bench.plain", partitions)])["bench.plain"].result(timeout=30)
    consumer = Consumer(
        {
            **BULK_READER,  # as the relay's reader sets it
            "bootstrap.servers": source,
            "group.id": "bench-plain-relay",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": destination,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    consumer.assign([TopicPartition("bench", p, 0) for p in range(partitions)])
    done: set[int] = set()
    records = 0
    started = time.perf_counter()
    while len(done) < partitions:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(int(message.partition() or 0))
                continue
            while True:
                try:
                    producer.produce(
                        "bench.plain",
                        message.value(),
                        message.key(),
                        int(message.partition() or 0),
                        timestamp=message.timestamp()[1],
                        headers=message.headers(),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            records += 1
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    consumer.close()
    return records, elapsed


class _TimedRelay(RelayService):
    """Notes when the first worker starts, to report the rate without the group join."""

    first_worker: float | None = None

    def _start_worker(self, source: Any) -> RelayWorker:
        self.first_worker = self.first_worker or time.perf_counter()
        return super()._start_worker(source)


def measure_throughput(records: int, partitions: int) -> dict[str, Any]:
    with bench_stack(CONFIG, "relay") as (config, root):
        east = config.region("us-east-1").kafka.bootstrap_servers
        west = config.region("us-west-1").kafka.bootstrap_servers
        produce_workload(east, "bench", partitions, records)
        base_records, base_seconds = plain_relay(east, west, partitions)
        service = _TimedRelay(config, stop_at_end=True, handle_signals=False)
        cpu = _cpu_seconds()
        started = time.perf_counter()
        with profiled("relay"):
            code = service.run()
        seconds = time.perf_counter() - started
        cpu = _cpu_seconds() - cpu
        assert code == 0, "the relay run failed"
        working = seconds - ((service.first_worker or started) - started)
        # Its Kafka clients go before the brokers do: clients of a stopped broker keep
        # reconnecting and logging, which would disturb the benchmarks after this one.
        del service
        gc.collect()
        # The peer on the same records and the same two clusters, after the relay.
        peer = _peer(
            lambda: mirror_maker.measure_throughput(east, west, "bench", partitions, root / "mm2")
        )
        process = measure_process(root)
    return {
        "records": records,
        "partitions": partitions,
        "relay_seconds": seconds,
        "relay_records_per_s": records / seconds,
        "relay_records_per_s_after_join": records / working,
        "baseline_records": base_records,
        "baseline_seconds": base_seconds,
        "baseline_records_per_s": base_records / base_seconds,
        "relay_cpu_seconds": cpu,
        "relay_cpu_seconds_per_million_records": cpu / records * 1e6,
        **peer,
        "relay_process_seconds": process["seconds"],
        "relay_process_records_per_s": records / process["seconds"],
        "relay_process_peak_rss_mib": process["peak_rss_mib"],
    }


def measure_process(root: Path) -> dict[str, float]:
    """``replicator relay --stop-at-end`` as operators run it, a process of its own, on the
    stack's records into another topic: its peak RSS (the in-process run shares its process
    with the benchmark's own clients, so its memory is not the relay's alone) and its
    seconds from process start to exit."""
    path = root / "relay-process.toml"
    text = (root / "bench.toml").read_text()
    assert CONFIG in text, "the stack's configuration no longer holds the relay's section"
    path.write_text(text.replace(CONFIG, PROCESS_CONFIG))
    relay = Service(
        "relay", ["relay", "--config", str(path), "--stop-at-end"], root / "relay-process.log"
    )
    with PeakRss(lambda command: "--stop-at-end" in command, interval=0.1) as memory:
        started = time.perf_counter()
        relay.start()
        while relay.exited() is None:
            time.sleep(0.05)
        seconds = time.perf_counter() - started
    assert relay.exited() == 0, f"the relay process failed; see {relay.log_path}"
    return {"seconds": seconds, "peak_rss_mib": memory.largest()[0] / 2**20}


def _cpu_seconds() -> float:
    """User and system CPU seconds of this process so far (every thread's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure_latency(rate: int, seconds: float, hog: bool = False) -> dict[str, Any]:
    """The relay's latency at ``rate`` records/s for ``seconds``; with ``hog``, while a
    CPU hog spins on one core (:mod:`bench.cpu_hog`), from before the load starts to
    after its last record is read."""
    with bench_stack(CONFIG, "relay-latency") as (config, root):
        path = str(root / "bench.toml")
        east = config.region("us-east-1").kafka.bootstrap_servers
        west = config.region("us-west-1").kafka.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": east})
        admin.create_topics([NewTopic("bench", LATENCY_PARTITIONS)])["bench"].result(timeout=30)
        (root / "logs").mkdir()
        relay = Service("relay", ["relay", "--config", path], root / "logs" / "relay.log")
        relay.start()
        tail = DestinationTail(west, {"bench": "bench.copy"}, LATENCY_PARTITIONS)
        try:
            relay.wait_for_log(STARTED, timeout=120.0)
            with loaded(hog, seconds) as hogged, profiled("relay_latency"):
                steady_load(east, tail, rate, seconds)
        finally:
            tail.close()
            relay.stop()
    figures: dict[str, Any] = dict(lag_figures(tail.lags["bench"], rate, seconds)) | hogged
    # The clients of this stack go with it (see measure_throughput), before the peer's
    # is measured the same way, on a stack of its own.
    del tail, admin
    gc.collect()
    figures |= _peer(lambda: mirror_maker.measure_latency(rate, seconds, hog))
    return figures


def _peer(measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``{"mirror_maker": figures}``; or, when MirrorMaker 2 fails on its own (a task dies:
    :class:`~bench.mirror_maker.PeerFailedError`), ``{"mirror_maker_failed": why}``, so that
    the relay's figures of the run are kept and its rows against the peer are left out of
    the run (the medians are of the other runs)."""
    try:
        return {"mirror_maker": measure()}
    except mirror_maker.PeerFailedError as exc:
        log.warning("MirrorMaker 2 failed; this run has no figures of it: %s", exc)
        return {"mirror_maker_failed": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    configure_logging("WARNING")
    print(json.dumps(measure_throughput(args.records, args.partitions), indent=2))
    print(json.dumps(measure_latency(args.rate, args.seconds), indent=2))


if __name__ == "__main__":
    main()
