"""A throw-away local stack for one benchmark, on free ports."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from infra.local_config import local_regions, running_stack
from replicator.core.config import Config
from replicator.core.kafka.clients import client_config

log = logging.getLogger(__name__)

WARM_TIMEOUT = 60.0
LOADING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


@contextmanager
def bench_stack(sections: str, prefix: str) -> Iterator[tuple[Config, Path]]:
    """Both local regions on free ports plus ``sections`` (the measured job's, formatted
    with ``{root}``, a scratch directory); start the stack, yield (config, root), stop it.

    The scratch directory holds the brokers' logs and the S3 endpoint's data — gigabytes
    for the larger workloads (10,000,000 records: 2.3 GB of topic alone) — so it is removed
    once the stack has stopped; a benchmark that fails leaves it for its logs, and says
    where."""
    root = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
    toml = local_regions("bench") + sections.format(root=root)
    try:
        with running_stack(root / "bench.toml", toml, root / "stack") as config:
            for name in config.regions:
                warm_internal_topics(client_config(config.region(name).kafka))
            yield config, root
    except BaseException:
        log.error("benchmark stack failed; its logs and data are kept in %s", root)
        raise
    shutil.rmtree(root, ignore_errors=True)


def warm_internal_topics(kafka: dict[str, object]) -> None:
    """Have the broker create and load its consumer-offsets and transaction-state topics,
    as an operator's brokers had long before: a fresh broker makes them on the first
    group and the first transactional producer, and that first use took 2-3 s of the
    measured stage (measured: ingress with two processes owned its partitions 3.3 s after
    it created its topic, with one process run after it 0.24 s)."""
    # Quiet: the broker answers "not coordinator" while it loads them, which librdkafka
    # retries and would log as warnings.
    kafka = {**kafka, "log_level": 3}
    producer = Producer({**kafka, "transactional.id": f"bench-warm-{uuid.uuid4()}"})
    producer.init_transactions(WARM_TIMEOUT)
    producer.begin_transaction()
    producer.commit_transaction(WARM_TIMEOUT)
    consumer = Consumer({**kafka, "group.id": f"bench-warm-{uuid.uuid4()}"})
    try:
        # Asking for a group's offsets finds its coordinator, on the offsets topic; the
        # broker answers "not coordinator" while it creates and loads that topic.
        deadline = time.monotonic() + WARM_TIMEOUT
        while True:
            try:
                consumer.committed([TopicPartition("bench-warm", 0)], timeout=WARM_TIMEOUT)
                return
            except KafkaException as exc:
                if exc.args[0].code() not in LOADING or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()
