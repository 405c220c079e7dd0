"""The worker pool: owned partitions get a worker, others lose theirs, failed workers come
back after the pause, halted ones do not. A member's share of the group is done only
while it holds one: between a revoke and the next assignment it owns nothing, and has
finished nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from replicator.core import workers
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.workers import GroupShare, WorkerPool


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


def test_a_partition_whose_workers_keep_failing_is_an_error_line_now_and_then(caplog, monkeypatch):
    """Each failure on a passing state is a warning; restart after restart for
    FAILING_ALERT is what an operator must hear of (a deleted destination topic fails
    like a paused broker), as an error, again as often while it lasts, and no more once
    a worker has run well."""
    clock = [1000.0]
    monkeypatch.setattr(workers.time, "monotonic", lambda: clock[0])
    made: list[FakeWorker] = []
    pool = WorkerPool(maker(made), restart_backoff=5)
    pool.own(sources(0))

    def fail_and_restart(reason: str) -> None:
        made[-1].end("failed", reason)
        pool.supervise()
        clock[0] += 5
        pool.supervise()

    def errors() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]

    for _ in range(59):  # 59 restarts, 295 s
        fail_and_restart("a broker did not answer")
    assert errors() == []
    fail_and_restart("the topic is gone")
    assert errors() == [
        "the workers of us-east-1/orders partition 0 have kept failing for 300 s, each restarted; "
        "the last: the topic is gone"
    ]
    for _ in range(60):
        fail_and_restart("the topic is gone")
    assert len(errors()) == 2  # every FAILING_ALERT
    clock[0] += workers.HEALTHY_RUN  # the last restarted worker runs well
    pool.supervise()
    for _ in range(59):
        fail_and_restart("a broker did not answer")
    assert len(errors()) == 2  # counted afresh


def test_a_share_is_done_only_while_held_and_every_worker_of_it_is_done():
    made: list[FakeWorker] = []
    pool = WorkerPool(maker(made))
    share = GroupShare()
    assert not share.done(pool) and not share.ever_assigned  # no share yet
    pool.own(sources(0, 1))
    share.assigned()
    assert share.ever_assigned and not share.done(pool)
    made[0].end("done")
    assert not share.done(pool)
    # A rebalance: the whole share revoked, its workers stopped; owning nothing now is
    # not having finished.
    share.revoked()
    pool.own([])
    assert not share.done(pool) and share.ever_assigned
    # The new share: one of the old partitions, resumed by a new worker.
    pool.own(sources(1))
    share.assigned()
    assert not share.done(pool)
    made[-1].end("halted", "lost segment")
    assert share.done(pool)


def test_an_assignment_of_nothing_is_a_share_with_nothing_to_do():
    pool = WorkerPool(maker([]))
    share = GroupShare()
    share.assigned()
    assert share.done(pool)


def test_a_share_is_final_only_once_it_stood_longer_than_a_group_session():
    now = [100.0]
    pool: WorkerPool[FakeWorker] = WorkerPool(lambda source: FakeWorker(source))
    share = GroupShare(settle=8.0, clock=lambda: now[0])
    share.assigned()  # an empty share: nothing to do, but a dead member may hold more
    assert not share.done(pool)
    now[0] += 7.9
    assert not share.done(pool)
    now[0] += 0.2
    assert share.done(pool)
    share.assigned()  # a rebalance (a dead member's session expired): the clock restarts
    assert not share.done(pool)


def test_a_share_of_the_whole_topic_is_final_at_once():
    """Every partition of the group's topic: no other member, dead or alive, holds a share
    that could come to this one, so there is nothing to wait for."""
    now = [100.0]
    pool: WorkerPool[FakeWorker] = WorkerPool(lambda source: FakeWorker(source))
    share = GroupShare(settle=8.0, clock=lambda: now[0])
    share.assigned(whole=True)
    assert share.done(pool)
    share.revoked()  # a member joined: the whole share taken back
    assert not share.done(pool)
    share.assigned(whole=False)  # part of it now: the settle applies again
    assert not share.done(pool)
    now[0] += 8.1
    assert share.done(pool)
