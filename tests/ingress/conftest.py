"""Ingress fixtures: per test a destination bucket wired to its own SQS queue, unique
topics and consumer group, and helpers to place segments as egress + replication would."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from infra.stack import connect_bucket_to_queue
from replicator.core.config import Config, load_config
from replicator.core.segments.key import SegmentKey, topic_descriptor_key
from replicator.core.segments.store import SegmentStore
from tests.conftest import DESTINATION, SOURCE, LocalStack


@dataclass
class IngressSetup:
    config: Config
    path: Path
    topic: str
    destination: str
    store: SegmentStore

    def put_segment(
        self, partition: int, start: int, end: int, batch: pa.RecordBatch | None, level: int = 0
    ) -> SegmentKey:
        key = SegmentKey(SOURCE, self.topic, partition, level, start, end)
        self.store.write_segment(key, batch if batch is not None else [])
        return key

    def put_descriptor(self, partitions: int, configs: dict[str, str] | None = None) -> None:
        self.store.put_json(
            topic_descriptor_key("data", SOURCE, self.topic),
            {
                "format_version": 1,
                "region": SOURCE,
                "topic": self.topic,
                "partitions": partitions,
                "configs": configs or {},
            },
        )


@pytest.fixture
def ingress_setup(
    local_stack: LocalStack, unique: Callable[[str], str], tmp_path: Path
) -> Callable[..., IngressSetup]:
    def make(**source_options: object) -> IngressSetup:
        bucket = local_stack.new_bucket(unique("dest"), DESTINATION)
        queue = unique("events")
        connect_bucket_to_queue(local_stack.s3(), local_stack.sqs(), bucket, queue)
        topic, destination = unique("src.topic"), unique("dst.topic")
        options = {
            "first_segment_delay": "0s",
            "late_segment_retries": 2,
            "lost_segment_timeout": "3s",
            **source_options,
        }
        text = f"""
[s3]
endpoint_url = "{local_stack.config.s3.endpoint_url}"
prefix = "data"
access_key_id = "test"
secret_access_key = "test"
[regions.{SOURCE}]
bucket = "{local_stack.config.region(SOURCE).bucket}"
kafka.bootstrap_servers = "{local_stack.bootstrap(SOURCE)}"
[regions.{DESTINATION}]
bucket = "{bucket}"
sqs_queue = "{queue}"
kafka.bootstrap_servers = "{local_stack.bootstrap(DESTINATION)}"
[ingress]
region = "{DESTINATION}"
group_id = "{unique("ingress")}"
segment_events_topic = "{unique("segevents")}"
segment_events_partitions = 4
checkpoint_topic = "{unique("checkpoints")}"
checkpoint_partitions = 2
relist_interval = "1s"
checkpoint_interval = "200ms"
[[ingress.sources]]
region = "{SOURCE}"
topic = "{topic}"
destination_topic = "{destination}"
""" + "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in options.items())
        path = tmp_path / f"ingress-{unique('cfg')}.toml"
        path.write_text(text)
        config = load_config(path)
        store = SegmentStore.for_region(config, DESTINATION)
        return IngressSetup(config, path, topic, destination, store)

    return make
