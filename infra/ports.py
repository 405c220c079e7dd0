"""Free ports for local services."""

from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

from infra.errors import StackError

LISTEN_PORTS = (20_000, 32_000)
"""Where local services listen: below the kernel's ephemeral range (32768 and up on Linux),
so that no client connection can take a port between the moment it is chosen and the
moment its server binds it (seen: moto failing with "Address already in use" while other
tests held many connections)."""


RESERVATIONS = Path(tempfile.gettempdir()) / f"replicator-port-reservations-{os.getuid()}"
RESERVED_FOR = 180.0
"""Seconds a chosen port stays reserved for its chooser: longer than any service here
takes from being given its port to binding it (a broker's JVM start on a busy machine)."""


def free_port(reservations: Path = RESERVATIONS) -> int:
    """A TCP port nobody listens on right now and no other process on this machine chose
    in the last :data:`RESERVED_FOR` seconds, for stacks that must not collide.

    Why the reservation: a port is chosen free, then given to a service that binds it
    seconds later (a broker's JVM starts first); two stacks starting at once (the tests
    run several) could choose the same port in that window, and the second broker to bind
    it exited with "Address already in use" (seen in a CI run's drill). Each choice leaves
    a file named by the port; a choice passes over ports with a fresh one."""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(*LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if reserve(port, reservations):
            return port
    raise StackError(f"no free port between {LISTEN_PORTS[0]} and {LISTEN_PORTS[1]}")


def reserve(port: int, reservations: Path = RESERVATIONS, now: float | None = None) -> bool:
    """Reserve ``port`` for this process unless another process did within
    :data:`RESERVED_FOR` seconds. A stale reservation is moved aside (a rename: of two
    processes finding it stale, one moves it) before the port is taken anew."""
    reservations.mkdir(mode=0o700, exist_ok=True)
    path = reservations / str(port)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            pass
        try:
            age = (time.time() if now is None else now) - path.stat().st_mtime
            if age < RESERVED_FOR:
                return False
            path.rename(reservations / f".stale-{port}-{os.getpid()}-{time.monotonic_ns()}")
        except FileNotFoundError:
            continue  # released or moved meanwhile: try to take it
        for stale in reservations.glob(f".stale-{port}-*"):
            stale.unlink(missing_ok=True)
    return False


def port_open(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (within half a second)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
