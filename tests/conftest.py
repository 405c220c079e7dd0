"""Session fixtures: the local stack (two Kafka brokers, one S3+SQS endpoint, replication),
started once on free ports with the product's own stack code, and unique names per test.

Integration tests use real services only; nothing here mocks Kafka, S3 or SQS.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from infra.stack import Stack, StackSpec, create_bucket, free_port
from replicator.core.config import Config, load_config
from replicator.core.segments.store import SegmentStore

SOURCE = "us-east-1"
DESTINATION = "us-west-1"

CONFIG_TEMPLATE = """
[s3]
endpoint_url = "http://127.0.0.1:{s3}"
prefix = "data"
access_key_id = "test"
secret_access_key = "test"

[regions.{source}]
bucket = "{source_bucket}"
kafka.bootstrap_servers = "127.0.0.1:{source_port}"

[regions.{destination}]
bucket = "{destination_bucket}"
sqs_queue = "{queue}"
kafka.bootstrap_servers = "127.0.0.1:{destination_port}"

[ingress]
region = "{destination}"

[[ingress.sources]]
region = "{source}"
topic = "sensor.events"
"""


def write_stack_config(path: Path, token: str = "") -> Path:
    """A config for a stack on fresh free ports; ``token`` makes its names unique."""
    suffix = f"-{token}" if token else ""
    path.write_text(
        CONFIG_TEMPLATE.format(
            s3=free_port(),
            source=SOURCE,
            destination=DESTINATION,
            source_port=free_port(),
            destination_port=free_port(),
            source_bucket=f"replicator-{SOURCE}{suffix}",
            destination_bucket=f"replicator-{DESTINATION}{suffix}",
            queue=f"replicator-{DESTINATION}-events{suffix}",
        )
    )
    return path


@dataclass
class LocalStack:
    config: Config
    config_path: Path
    stack: Stack

    def bootstrap(self, region: str) -> str:
        return self.config.region(region).kafka.bootstrap_servers

    def admin(self, region: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap(region)})

    def s3(self):  # type: ignore[no-untyped-def]
        return self.stack.s3_client()

    def sqs(self, region: str = DESTINATION):  # type: ignore[no-untyped-def]
        """SQS of ``region`` (queues are regional): the destination's by default."""
        return self.stack.sqs_client(self.config.region(region).aws_region or region)

    def store(self, region: str, bucket: str | None = None, **kwargs) -> SegmentStore:  # type: ignore[no-untyped-def]
        store = SegmentStore.for_region(self.config, region)
        if bucket is None and not kwargs:
            return store
        return SegmentStore(
            store.client,
            bucket or store.bucket,
            self.config.s3.prefix,
            **{"part_size": self.config.s3.multipart_part_size, **kwargs},
        )

    def new_bucket(self, name: str, region: str = SOURCE) -> str:
        create_bucket(self.s3(), name, self.config.region(region).aws_region or region)
        return name


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    root = tmp_path_factory.mktemp("stack")
    config_path = write_stack_config(root / "replicator.toml")
    config = load_config(config_path)
    stack = Stack(StackSpec.from_config(config, root / "state"))
    try:
        stack.up()
        yield LocalStack(config, config_path, stack)
    finally:
        stack.down()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One in-process Spark session for the tests that need no process of their own."""
    from replicator.core.spark import spark_session

    session = spark_session("local[2]", "replicator-tests", {})
    yield session
    session.stop()


_counter = itertools.count()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """``unique("orders")`` -> a lowercase name no other test uses (valid topic and bucket)."""
    token = uuid.uuid4().hex[:8]

    def make(kind: str) -> str:
        return f"{kind}-{token}-{next(_counter)}"

    return make


@pytest.fixture
def bucket(local_stack: LocalStack, unique: Callable[[str], str]) -> str:
    return local_stack.new_bucket(unique("bucket"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the stack are integration tests (``make unit`` skips them)."""
    for item in items:
        if "local_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
