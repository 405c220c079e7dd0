"""Configs for throw-away local stacks: the one builder behind the tests, the drill and
the benchmarks.

Every local stack has the same shape: one S3+SQS endpoint, a source region ``us-east-1``
and a destination region ``us-west-1`` (with its notification queue), each with its own
Kafka broker, all on free ports picked when the config is built. What differs between
users is only the names (so that stacks never share a bucket) and the job sections they
add after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.ports import free_port
from infra.security import (
    PASSWORD_ENV,
    SASL_MECHANISM,
    SECURITY_PROTOCOL,
    USERNAME_ENV,
    SecurityMaterial,
    make_material,
)
from infra.stack import Stack, StackSpec
from replicator.core.config import Config, load_config

SOURCE_REGION = "us-east-1"
DESTINATION_REGION = "us-west-1"
LOCAL_PREFIX = "data"
"""The S3 key prefix of every local stack (the config's default, written out)."""


def secured_kafka(ca_location: Path) -> str:
    """The ``kafka.*`` keys of a region on the secured stack: SASL_SSL with SCRAM-SHA-512,
    the user and password as ``${NAME}`` references (each service process is started with
    its own user's values), the stack's CA."""
    return (
        f'kafka.security_protocol = "{SECURITY_PROTOCOL}"\n'
        f'kafka.sasl_mechanism = "{SASL_MECHANISM}"\n'
        f'kafka.sasl_username = "${{{USERNAME_ENV}}}"\n'
        f'kafka.sasl_password = "${{{PASSWORD_ENV}}}"\n'
        f'kafka.ssl_ca_location = "{ca_location}"\n'
    )


def local_regions(name: str, *, token: str = "", ca_location: Path | None = None) -> str:
    """``[s3]`` and both ``[regions.*]`` sections on fresh free ports.

    Buckets are ``{name}-{region}{-token}``, the queue ``{name}-us-west-1-events{-token}``,
    segments under the prefix ``data``; ``name`` is also the (local, meaningless) access
    key. With ``ca_location`` (the secured stack's CA) the regions' Kafka is reached over
    SASL_SSL (:func:`secured_kafka`). Append the job sections.
    """
    suffix = f"-{token}" if token else ""
    secured = secured_kafka(ca_location) if ca_location is not None else ""
    return f"""\
[s3]
endpoint_url = "http://127.0.0.1:{free_port()}"
prefix = "{LOCAL_PREFIX}"
access_key_id = "{name}"
secret_access_key = "{name}"

[regions.{SOURCE_REGION}]
bucket = "{name}-{SOURCE_REGION}{suffix}"
kafka.bootstrap_servers = "127.0.0.1:{free_port()}"
{secured}
[regions.{DESTINATION_REGION}]
bucket = "{name}-{DESTINATION_REGION}{suffix}"
sqs_queue = "{name}-{DESTINATION_REGION}-events{suffix}"
kafka.bootstrap_servers = "127.0.0.1:{free_port()}"
{secured}
"""


def security_material(state_dir: Path) -> SecurityMaterial:
    """Where the secured stack of ``state_dir`` keeps its CA, certificates and users."""
    return SecurityMaterial(state_dir / "security")


@contextmanager
def running_stack(
    config_path: Path, toml: str, state_dir: Path, *, secured: bool = False
) -> Iterator[Config]:
    """Write ``toml`` to ``config_path``, start the stack it describes (pid files and logs
    in ``state_dir``), yield the loaded config, and stop the stack whatever happens.

    ``secured``: the stack's CA and users are made first (under ``state_dir/security``),
    and the config is loaded as the ``failover`` user (the operator's status and failover
    commands) would load it."""
    config_path.write_text(toml)
    env: dict[str, str] = dict(os.environ)
    if secured:
        env.update(make_material(security_material(state_dir).directory).service_env("failover"))
    config = load_config(config_path, env)
    stack = Stack(StackSpec.from_config(config, state_dir))
    stack.up()
    try:
        yield config
    finally:
        stack.down()
