"""A throw-away local stack for one benchmark, on free ports."""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.stack import Stack, StackSpec
from replicator.config import Config, load_config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
