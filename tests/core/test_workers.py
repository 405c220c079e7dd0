"""The worker pool: owned partitions get a worker, others lose theirs, failed workers come
back after the pause, halted ones do not."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from replicator.core.kafka.provenance import SourcePartition
from replicator.core.workers import WorkerPool


@dataclass
class Status:
    state: str = "starting"
    reason: str = ""


@dataclass
class FakeWorker:
    source: SourcePartition
    status: Status = field(default_factory=Status)
    stopped: bool = False
    alive: bool = False

    def start(self) -> None:
        self.alive = True

    def stop(self) -> None:
        self.stopped = True

    def join(self, timeout: float | None = None) -> None:
        self.alive = False

    def is_alive(self) -> bool:
        return self.alive

    def end(self, state: str, reason: str = "") -> None:
        self.status = Status(state, reason)
        self.alive = False


def sources(*partitions: int) -> list[SourcePartition]:
    return [SourcePartition("us-east-1", "orders", p) for p in partitions]


def maker(made: list[FakeWorker]) -> Callable[[SourcePartition], FakeWorker]:
    def make(source: SourcePartition) -> FakeWorker:
        made.append(FakeWorker(source))
        return made[-1]

    return make


def test_owning_starts_and_stops_exactly_the_owned_workers():
    made: list[FakeWorker] = []
    pool = WorkerPool(maker(made))
    pool.own(sources(0, 1, 2))
    assert list(pool.workers) == sources(0, 1, 2) and all(w.alive for w in made)
    pool.own(sources(1, 2, 3))
    assert list(pool.workers) == sources(1, 2, 3)
    assert made[0].stopped and not made[1].stopped and len(made) == 4


def test_failed_workers_restart_after_the_pause_and_halted_ones_stay():
    made: list[FakeWorker] = []
    pool = WorkerPool(maker(made), restart_backoff=0.05)
    pool.own(sources(0, 1))
    made[0].end("failed", "broker down")
    made[1].end("halted", "lost segment")
    pool.supervise()
    assert len(made) == 2  # not before the pause
    threading.Event().wait(0.06)
    pool.supervise()
    assert len(made) == 3 and made[2].source == sources(0)[0] and made[2].alive
    assert pool.halted() == ["lost segment"]
    assert not pool.finished()
    made[2].end("done")
    assert pool.finished()
    pool.stop()
    assert len(pool) == 0
