"""Baselines: what plain clients do on this machine, without the product's guarantees.

- :func:`plain_consume`: one confluent-kafka consumer reading a topic (egress's baseline).
- :func:`plain_replay`: ingress's and restore's baseline. The same segments read from the
  same S3 endpoint with pyarrow and every record produced with a plain producer (no
  transactions, no idempotence, no provenance header, no checkpoints), one process per
  core as ingress runs by default. What the product spends above it is what its
  exactly-once writers, checkpoints and bookkeeping cost; a producer sending records held
  in memory (the baseline before) left the S3 reads and the Parquet decoding out and so
  charged them to the guarantees.

Both time only the work: the loop's processes connect and list nothing before a barrier
that all of them and the parent cross, and the clock starts there.
"""

from __future__ import annotations

import io
import multiprocessing
import time
import traceback
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replicator.core.config import load_config
from replicator.core.kafka.clients import BULK_READER
from replicator.core.segments.store import SegmentStore

REPLAY_TIMEOUT = 1800.0
"""Seconds the replay loop may take before the benchmark gives up on it."""


def plain_consume(bootstrap: str, topic: str, partitions: int) -> tuple[int, int, float]:
    """Read every record of ``topic`` in one process: (records, bytes, seconds)."""
    consumer = Consumer(
        {
            **BULK_READER,  # the raw client at its best, as egress's reader sets it
            "bootstrap.servers": bootstrap,
            "group.id": "bench-baseline",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    done: set[int] = set()
    records = size = 0
    started = time.perf_counter()
    while len(done) < partitions:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(int(message.partition() or 0))
                continue
            records += 1
            size += len(message.key() or b"") + len(message.value() or b"")
            headers = cast(list[tuple[str, bytes | None]], message.headers() or [])
            size += sum(len(k) + len(v or b"") for k, v in headers)
    elapsed = time.perf_counter() - started
    consumer.close()
    return records, size, elapsed


def share_of(partitions: int, processes: int, index: int) -> list[int]:
    """The partitions process ``index`` (0-based) of ``processes`` replays: every
    ``processes``-th one, so that shares differ by at most one partition. Pure."""
    return list(range(index, partitions, processes))


def plain_replay(
    config_path: Path,
    bucket_region: str,
    source: tuple[str, str],
    partitions: int,
    destination_topic: str,
    processes: int,
) -> tuple[int, int, float]:
    """Produce every record of the segments of ``source`` (region, topic) in
    ``bucket_region``'s bucket into ``destination_topic`` (created here with
    ``partitions`` partitions, on ``bucket_region``'s cluster), partition for partition,
    with ``processes`` processes: (records, key and value bytes, seconds)."""
    config = load_config(config_path)
    bootstrap = config.region(bucket_region).kafka.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(destination_topic, partitions)])[destination_topic].result(
        timeout=30
    )
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    results: Queue[tuple[int, int] | str] = context.Queue()
    workers = [
        context.Process(
            target=_replay_share,
            args=(
                str(config_path),
                bucket_region,
                source,
                share_of(partitions, processes, index),
                destination_topic,
                barrier,
                results,
            ),
            name=f"plain-replay-{index}",
        )
        for index in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(timeout=300)
        started = time.perf_counter()
        shares = [results.get(timeout=REPLAY_TIMEOUT) for _ in workers]
        seconds = time.perf_counter() - started
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
                worker.join()
    failed = [s for s in shares if isinstance(s, str)]
    if failed:
        raise RuntimeError(f"the plain replay loop failed:\n{failed[0]}")
    counted = cast(list[tuple[int, int]], shares)
    return sum(r for r, _ in counted), sum(b for _, b in counted), seconds


def _replay_share(
    config_path: str,
    bucket_region: str,
    source: tuple[str, str],
    partitions: list[int],
    destination_topic: str,
    barrier: Barrier,
    results: Queue[tuple[int, int] | str],
) -> None:
    """One process of :func:`plain_replay`: its share of the partitions, segment after
    segment in offset order; puts (records, bytes) or the traceback on ``results``."""
    try:
        config = load_config(config_path)
        store = SegmentStore.for_region(config, bucket_region)
        producer = Producer(
            {
                "bootstrap.servers": config.region(bucket_region).kafka.bootstrap_servers,
                "enable.idempotence": False,
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 500_000,
            }
        )
        barrier.wait(timeout=300)
        records = size = 0
        for partition in partitions:
            for segment in store.list_segments(source[0], source[1], partition):
                body = store.client.get_object(Bucket=store.bucket, Key=segment.s3_key)["Body"]
                parquet = pq.ParquetFile(io.BytesIO(body.read()))
                for batch in parquet.iter_batches(columns=["timestamp", "key", "value", "headers"]):
                    sent, payload = _produce_batch(producer, destination_topic, partition, batch)
                    records += sent
                    size += payload
        producer.flush(REPLAY_TIMEOUT)
        results.put((records, size))
    except BaseException:
        barrier.abort()
        results.put(traceback.format_exc())


def _produce_batch(
    producer: Producer, topic: str, partition: int, batch: pa.RecordBatch
) -> tuple[int, int]:
    """Produce one Arrow record batch's rows: (records, key and value bytes)."""
    keys = batch.column("key").to_pylist()
    values = batch.column("value").to_pylist()
    headers = batch.column("headers").to_pylist()
    stamps = batch.column("timestamp").cast(pa.int64()).to_pylist()
    size = 0
    for key, value, header, stamp in zip(keys, values, headers, stamps, strict=True):
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=value,
                    partition=partition,
                    headers=[(h["key"], h["value"]) for h in header],
                    timestamp=stamp,
                )
                break
            except BufferError:
                producer.poll(0.05)
        size += len(key or b"") + len(value or b"")
    producer.poll(0)
    return len(keys), size
