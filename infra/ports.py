"""Free ports for local services."""

from __future__ import annotations

import random
import socket

from infra.errors import StackError

LISTEN_PORTS = (20_000, 32_000)
"""Where local services listen: below the kernel's ephemeral range (32768 and up on Linux),
so that no client connection can take a port between the moment it is chosen and the
moment its server binds it (seen: moto failing with "Address already in use" while other
tests held many connections)."""


def free_port() -> int:
    """A TCP port nobody listens on right now, for stacks that must not collide."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(*LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise StackError(f"no free port between {LISTEN_PORTS[0]} and {LISTEN_PORTS[1]}")


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (within half a second)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
