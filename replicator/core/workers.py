"""The partition workers of one service instance: one thread per owned source partition.

Ingress and the relay run the same way: the instance owns the source partitions the
consumer group gives it, runs a worker thread for each, stops the ones it no longer owns
(before the new owner's writer fences them anyway), and restarts a worker that failed on
a passing error (a broker or bucket unreachable) after a pause. A worker that halted
stays halted: its reason is in its checkpoint and the service's exit status.

A worker failing on a cluster's passing state (a broker paused or restarting, a leader on
the move) reports it as one warning line (:func:`report_failure`): nothing is wrong that
the restart does not mend, and an error line, or a traceback, would call an operator.
What the restart does not mend is an operator's matter: a partition whose workers keep
failing, restart after restart, for :data:`FAILING_ALERT` (a deleted destination topic
answers like a paused broker) is reported as an error line then, and again every
:data:`FAILING_ALERT` while it lasts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from replicator.core.kafka.errors import transient_state
from replicator.core.kafka.provenance import SourcePartition

log = logging.getLogger(__name__)

RESTART_BACKOFF = 5.0
FAILING_ALERT = 300.0
"""How long a partition's workers may keep failing, each restarted, before the pool says
so as an error (and again as often while it lasts)."""
HEALTHY_RUN = 60.0
"""A worker alive this long has got past what made its predecessors fail."""
FINAL_STATES = ("done", "halted")


def report_failure(
    logger: logging.Logger | logging.LoggerAdapter[Any],
    name: str,
    error: BaseException,
    *,
    traceback: bool,
) -> None:
    """Log to ``logger`` the failure of worker ``name``, which its pool restarts after a
    pause: one warning line saying it will be retried when ``error`` is a cluster's
    passing state (:func:`~replicator.core.kafka.errors.transient_state`), else an error
    line, with the traceback when ``traceback`` (a failure the worker did not expect)."""
    state = transient_state(error)
    if state is not None:
        logger.warning("%s failed while %s; it will be retried: %s", name, state, error)
    else:
        logger.error("%s failed: %s", name, error, exc_info=traceback)


class WorkerStatus(Protocol):
    state: str
    reason: str


class Worker(Protocol):
    @property
    def status(self) -> WorkerStatus: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def join(self, timeout: float | None = None) -> None: ...

    def is_alive(self) -> bool: ...


W = TypeVar("W", bound=Worker)


STOP_AT_END_SETTLE = 8.0
"""Seconds an assignment stands before a ``--stop-at-end`` member may take its share for
final: longer than the services' 6 s group session (:class:`GroupShare`)."""


class GroupShare:
    """The share of a consumer group's partitions this member holds, as ``--stop-at-end``
    must see it.

    The services' consumers use the eager protocol: a rebalance revokes a member's whole
    share before it assigns the new one, and between the two the member owns no worker.
    Owning none then is not having finished: a member that took it for the end would
    exit with its share half replayed and hand nothing over (the group gives its share to
    the others only at the next rebalance, which its leaving starts after they have
    ended too). So a member is done only while it holds an assignment and every worker
    of that assignment is done; an assignment of nothing is a share with nothing to do.

    And only once that assignment has stood for ``settle`` seconds (longer than the
    group session): a member killed without leaving keeps its share, in the group's
    eyes, until its session expires, and the rebalance that follows gives that share to
    the members still there. A member that ended before it would leave those partitions
    to nobody (seen on Apache Kafka: a new instance finished its own share 4 s after
    joining, beside the killed instance's members, and exited with a partition never
    replayed). A member whose share is the whole (every partition of the group's topic)
    need not wait: no other member, dead or alive, holds a share that could come to it.
    """

    def __init__(self, settle: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._assigned_once = threading.Event()
        self._holding = threading.Event()
        self._settle = settle
        self._clock = clock
        self._assigned_at = 0.0
        self._whole = False

    def assigned(self, whole: bool = False) -> None:
        """The group gave this member its share (the assign callback ran); ``whole``: the
        share is every partition of the group's topic."""
        self._assigned_at = self._clock()
        self._whole = whole
        self._holding.set()
        self._assigned_once.set()

    def revoked(self) -> None:
        """The group took the share back; a new one follows when the rebalance ends."""
        self._holding.clear()

    @property
    def ever_assigned(self) -> bool:
        """Whether the group has given this member a share yet (for readiness, which must
        not flicker at every rebalance)."""
        return self._assigned_once.is_set()

    def done(self, pool: WorkerPool[Any]) -> bool:
        """``--stop-at-end``: every worker of a share this member holds now, and has held
        for ``settle`` seconds or holds whole, is done."""
        settled = self._whole or self._clock() - self._assigned_at >= self._settle
        return self._holding.is_set() and settled and pool.finished()


class WorkerPool(Generic[W]):
    """Workers by source partition, made by ``make`` when a partition becomes owned."""

    def __init__(
        self, make: Callable[[SourcePartition], W], restart_backoff: float = RESTART_BACKOFF
    ) -> None:
        self._make = make
        self._restart_backoff = restart_backoff
        self.workers: dict[SourcePartition, W] = {}
        self._restart_at: dict[SourcePartition, float] = {}
        self._started_at: dict[SourcePartition, float] = {}
        self._failing: dict[SourcePartition, tuple[float, float]] = {}
        """Per source whose workers keep failing: (first failure, last error line)."""

    def __len__(self) -> int:
        return len(self.workers)

    def get(self, source: SourcePartition) -> W | None:
        return self.workers.get(source)

    def own(self, sources: Iterable[SourcePartition]) -> None:
        """Run a worker for every source in ``sources`` and for no other."""
        owned = list(sources)
        self.stop([s for s in self.workers if s not in owned])
        for source in owned:
            if source not in self.workers:
                self._start(source)

    def stop(self, sources: Iterable[SourcePartition] | None = None) -> None:
        """Stop the workers of ``sources`` (all by default) and wait for them."""
        chosen = list(self.workers if sources is None else sources)
        for source in chosen:
            self.workers[source].stop()
        for source in chosen:
            self.workers.pop(source).join(60)
            self._restart_at.pop(source, None)
            self._failing.pop(source, None)

    def supervise(self) -> None:
        """Restart workers that failed, each after the restart pause."""
        now = time.monotonic()
        for source, worker in list(self.workers.items()):
            if worker.is_alive() or worker.status.state != "failed":
                if now - self._started_at.get(source, now) >= HEALTHY_RUN:
                    self._failing.pop(source, None)
                continue
            due = self._restart_at.setdefault(source, now + self._restart_backoff)
            if now >= due:
                del self._restart_at[source]
                self._report_failing(source, worker.status.reason, due - self._restart_backoff, now)
                log.info("restarting the worker of %s", source)
                self.workers.pop(source)
                self._start(source)

    def _report_failing(
        self, source: SourcePartition, reason: str, failed_at: float, now: float
    ) -> None:
        """An error line when ``source``'s workers have kept failing for
        :data:`FAILING_ALERT` since the first of them (``failed_at``), and again as often
        while they do."""
        since, said = self._failing.setdefault(source, (failed_at, failed_at))
        if now - said >= FAILING_ALERT:
            self._failing[source] = (since, now)
            log.error(
                "the workers of %s have kept failing for %.0f s, each restarted; the last: %s",
                source,
                now - since,
                reason,
            )

    def finished(self) -> bool:
        """Every worker is done or halted (with ``--stop-at-end``)."""
        return all(w.status.state in FINAL_STATES for w in self.workers.values())

    def halted(self) -> list[str]:
        """The reasons of the workers that halted."""
        return [w.status.reason for w in self.workers.values() if w.status.state == "halted"]

    def _start(self, source: SourcePartition) -> None:
        worker = self._make(source)
        self.workers[source] = worker
        self._started_at[source] = time.monotonic()
        worker.start()


class WriterSlots:
    """At most ``limit`` exactly-once writers open at once in one process.

    Each open writer is a transactional producer with its own threads and buffers (a few
    MiB), so the number of partitions a process owns must not decide its memory. A worker
    takes a slot before it opens its writer and gives it back when it closes it: when it
    has been caught up for a while, or at once when another worker of the process waits
    for a slot (:meth:`wanted`)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = limit
        self._waiting = 0
        self._changed = threading.Condition()

    def acquire(self, stopping: threading.Event) -> bool:
        """Wait for a slot; False if ``stopping`` was set first."""
        with self._changed:
            self._waiting += 1
            try:
                while self._free == 0:
                    if stopping.is_set():
                        return False
                    self._changed.wait(0.25)
                self._free -= 1
                return True
            finally:
                self._waiting -= 1

    def release(self) -> None:
        with self._changed:
            self._free += 1
            self._changed.notify()

    def wanted(self) -> bool:
        """Another worker waits for a slot."""
        return self._waiting > 0

    def in_use(self) -> int:
        return self.limit - self._free
