"""Baselines: what one plain confluent-kafka client does on this machine."""

from __future__ import annotations

import time
from typing import cast

from confluent_kafka import Consumer, KafkaError, TopicPartition


def plain_consume(bootstrap: str, topic: str, partitions: int) -> tuple[int, int, float]:
    """Read every record of ``topic`` in one process: (records, bytes, seconds)."""
    consumer = Consumer(
        {
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
