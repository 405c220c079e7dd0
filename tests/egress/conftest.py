"""Egress fixtures: one in-process Spark session for the tests that need no process of
their own, per-test configs (unique bucket, consumer group, directories), producers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from replicator.core.config import Config, load_config
from tests.conftest import SOURCE, LocalStack


def egress_toml(
    stack: LocalStack, bucket: str, root: Path, topics: dict[str, dict], **egress: object
) -> str:
    s3 = stack.config.s3
    lines = [
        "[s3]",
        f'endpoint_url = "{s3.endpoint_url}"',
        'prefix = "data"',
        'access_key_id = "test"',
        'secret_access_key = "test"',
        f"[regions.{SOURCE}]",
        f'bucket = "{bucket}"',
        f'kafka.bootstrap_servers = "{stack.bootstrap(SOURCE)}"',
        "[egress]",
    ]
    settings: dict[str, object] = {
        "region": SOURCE,
        "checkpoint_location": str(root / "checkpoint"),
        "state_dir": str(root / "state"),
        "group_id": f"egress-{bucket}",
        "trigger_interval": "250ms",
        **egress,
    }
    lines.extend(f"{key} = {_toml(value)}" for key, value in settings.items())
    for topic, limits in topics.items():
        lines.append(f'[egress.topics."{topic}"]')
        lines.extend(f"{k} = {_toml(v)}" for k, v in limits.items())
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.fixture
def egress_config(
    local_stack: LocalStack, bucket: str, tmp_path: Path
) -> Callable[..., tuple[Config, Path]]:
    """``egress_config({"topic": {limits}}, **egress_keys)`` -> (config, its file)."""

    def make(topics: dict[str, dict], **egress: object) -> tuple[Config, Path]:
        path = tmp_path / "egress.toml"
        path.write_text(egress_toml(local_stack, bucket, tmp_path, topics, **egress))
        return load_config(path), path

    return make


def create_topic(stack: LocalStack, topic: str, partitions: int, **configs: str) -> None:
    admin = stack.admin(SOURCE)  # keep the client alive until the future resolves
    futures = admin.create_topics([NewTopic(topic, partitions, config=configs)])
    futures[topic].result(timeout=30)


def finish_bursts(producer: Producer, topic: str, partitions: range | list[int]) -> None:
    """End each partition with a single-record batch: the local broker reports a high
    watermark at the last batch's base offset + 1, hiding a multi-record last batch."""
    producer.flush(30)
    for partition in partitions:
        producer.produce(topic, key=b"end", value=b"end", partition=partition)
        producer.flush(30)
