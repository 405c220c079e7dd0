"""A throw-away local stack for one benchmark, on free ports."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.stack import Stack, StackSpec, free_port
from replicator.core.config import Config, load_config

STACK_TEMPLATE = """
[s3]
endpoint_url = "http://127.0.0.1:{s3}"
access_key_id = "bench"
secret_access_key = "bench"
[regions.us-east-1]
bucket = "bench-us-east-1"
kafka.bootstrap_servers = "127.0.0.1:{east}"
[regions.us-west-1]
bucket = "bench-us-west-1"
sqs_queue = "bench-us-west-1-events"
kafka.bootstrap_servers = "127.0.0.1:{west}"
"""
"""Both regions of every benchmark; each adds the sections of the job it measures."""


@contextmanager
def bench_stack(template: str, prefix: str) -> Iterator[tuple[Config, Path]]:
    """Format ``template`` with free ports ``{s3}``, ``{east}``, ``{west}`` and a scratch
    directory ``{root}``, start the stack it describes, yield (config, root), stop it."""
    root = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
    path = root / "bench.toml"
    path.write_text(template.format(s3=free_port(), east=free_port(), west=free_port(), root=root))
    config = load_config(path)
    stack = Stack(StackSpec.from_config(config, root / "stack"))
    stack.up()
    try:
        yield config, root
    finally:
        stack.down()
