"""The fixed benchmark workload: 16-byte keys, 200-byte values, one header per record."""

from __future__ import annotations

import os
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

KEY_BYTES = 16
VALUE_BYTES = 200
RECORD_BYTES = KEY_BYTES + VALUE_BYTES + len("seq") + 8


def produce_workload(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Create ``topic`` and fill it; returns seconds taken."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "compression.type": "none",
        }
    )
    started = time.perf_counter()
    for i in range(records):
        key = b"%016d" % i
        while True:
            try:
                producer.produce(
                    topic,
                    key=key,
                    value=os.urandom(VALUE_BYTES),
                    partition=i % partitions,
                    headers=[("seq", b"%08d" % i)],
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50_000 == 0:
            producer.poll(0)
    producer.flush(120)
    return time.perf_counter() - started
