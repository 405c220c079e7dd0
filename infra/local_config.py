"""Configs for throw-away local stacks: the one builder behind the tests, the drill and
the benchmarks.

Every local stack has the same shape: one S3+SQS endpoint, a source region ``us-east-1``
and a destination region ``us-west-1`` (with its notification queue), each with its own
Kafka broker, all on free ports picked when the config is built. What differs between
users is only the names (so that stacks never share a bucket) and the job sections they
add after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.ports import free_port
from infra.stack import Stack, StackSpec
from replicator.core.config import Config, load_config

SOURCE_REGION = "us-east-1"
DESTINATION_REGION = "us-west-1"
LOCAL_PREFIX = "data"
"""The S3 key prefix of every local stack (the config's default, written out)."""


def local_regions(name: str, *, token: str = "") -> str:
    """``[s3]`` and both ``[regions.*]`` sections on fresh free ports.

    Buckets are ``{name}-{region}{-token}``, the queue ``{name}-us-west-1-events{-token}``,
    segments under the prefix ``data``; ``name`` is also the (local, meaningless) access
    key. Append the job sections.
    """
    suffix = f"-{token}" if token else ""
    return f"""\
[s3]
endpoint_url = "http://127.0.0.1:{free_port()}"
prefix = "{LOCAL_PREFIX}"
access_key_id = "{name}"
secret_access_key = "{name}"

[regions.{SOURCE_REGION}]
bucket = "{name}-{SOURCE_REGION}{suffix}"
kafka.bootstrap_servers = "127.0.0.1:{free_port()}"

[regions.{DESTINATION_REGION}]
bucket = "{name}-{DESTINATION_REGION}{suffix}"
sqs_queue = "{name}-{DESTINATION_REGION}-events{suffix}"
kafka.bootstrap_servers = "127.0.0.1:{free_port()}"

"""


@contextmanager
def running_stack(config_path: Path, toml: str, state_dir: Path) -> Iterator[Config]:
    """Write ``toml`` to ``config_path``, start the stack it describes (pid files and logs
    in ``state_dir``), yield the loaded config, and stop the stack whatever happens."""
    config_path.write_text(toml)
    config = load_config(config_path)
    stack = Stack(StackSpec.from_config(config, state_dir))
    stack.up()
    try:
        yield config
    finally:
        stack.down()
