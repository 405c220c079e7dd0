"""Ports for local services: chosen free, and never the same for two stacks starting at
once (a port is bound seconds after it is chosen, when the service's JVM has started)."""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
from pathlib import Path

from infra import ports


def choose_two(reservations: str, queue: multiprocessing.Queue) -> None:
    """In another process: two ports from a range of 24, held unbound like a stack does
    between choosing a port and its service binding it."""
    ports.LISTEN_PORTS = (25_000, 25_024)
    queue.put([ports.free_port(Path(reservations)) for _ in range(2)])


def test_stacks_choosing_at_once_never_get_the_same_port(tmp_path):
    """Ten processes choose two ports each from 24 at the same moment: without the
    reservations, twenty random choices of 24 collide almost always (1 - 24!/4!/24^20)."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    processes = [context.Process(target=choose_two, args=(str(tmp_path), queue)) for _ in range(10)]
    for process in processes:
        process.start()
    chosen = [port for _ in processes for port in queue.get(timeout=30)]
    for process in processes:
        process.join(30)
    assert len(chosen) == 20
    assert len(set(chosen)) == 20, sorted(chosen)


def test_a_port_another_process_reserved_is_passed_over(tmp_path, monkeypatch):
    assert ports.reserve(25_100, tmp_path)
    picks = iter([25_100, 25_100, 25_101])
    monkeypatch.setattr(ports.random.SystemRandom, "randrange", lambda *_: next(picks))
    assert ports.free_port(tmp_path) == 25_101
    assert not ports.reserve(25_100, tmp_path)


def test_a_stale_reservation_is_taken_anew(tmp_path):
    assert ports.reserve(25_200, tmp_path)
    old = time.time() - ports.RESERVED_FOR - 1
    os.utime(tmp_path / "25200", (old, old))
    assert ports.reserve(25_200, tmp_path)
    assert not ports.reserve(25_200, tmp_path)  # fresh again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["25200"]


def test_a_port_someone_listens_on_is_not_chosen(tmp_path, monkeypatch):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        busy = listening.getsockname()[1]
        picks = iter([busy, 25_300])
        monkeypatch.setattr(ports.random.SystemRandom, "randrange", lambda *_: next(picks))
        assert ports.free_port(tmp_path) == 25_300
