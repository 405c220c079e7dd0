"""Noticing that this process stalled long enough to lose its partitions, so that a
"zombie" writer stops by itself.

Why: a service instance owns its partitions through a consumer group. The group's
coordinator removes a member it has heard no heartbeat from for the session timeout
(:data:`GROUP_SESSION_SECONDS`) and gives its partitions to another instance, which
resumes from the destination and writes on. A process frozen that long (SIGSTOP, a paused
virtual machine, a swap storm) is not told: when it thaws, every thread carries on from
where it stopped, the writers too, before the consumer hears of the revocation. On Kafka
the new owner's ``init_transactions`` has fenced the old writer and its next
transactional call fails; this watch is a second defence, which needs no successor, and
keeps a thawed process from starting work it may no longer own.

So a writer asks, before it begins and before it commits a transaction, whether the
process stalled too long since the writer was opened (:meth:`FreezeWatch.frozen_since`),
and refuses (``OwnershipLostError``) if it did: its worker fails, and is restarted only if
the group still gives the partition to this instance, re-opening the writer, which
resumes from the destination.

What counts: a thread of its own ticks every :data:`TICK` seconds. A gap between two ticks
longer than :data:`LATE` (two heartbeat intervals) is late: CPU starvation, however long,
delays ticks less (measured, below). A *stall* runs from the last tick before a late gap
to the end of the last late gap after which the process ran without one for
:data:`STEADY` (the heartbeat interval) again (late gaps with shorter runs between them
chain into one stall: a run too short to be sure a heartbeat went out proves nothing). A
stall longer than :data:`FREEZE_LIMIT` is a freeze. The check also sees a stall in
progress (the ticker not yet run since the thaw), whichever thread runs first.

The limit, and why it is safe (the invariant: a writer never begins or commits after the
group could have moved its partition, as far as this process can see):

- While the process runs, librdkafka heartbeats every :data:`HEARTBEAT_SECONDS`, so the
  coordinator's last heartbeat came at most that long before a stall began; it removes
  the member no sooner than :data:`GROUP_SESSION_SECONDS` after it.
- A check passes only while the stall so far is at most the limit; the begin or commit it
  guards then reaches the broker within :data:`COMMIT_MARGIN` (a round trip, the
  coordinator's clock), unless the process stalls again meanwhile (below).
- So ``FREEZE_LIMIT + HEARTBEAT_SECONDS + COMMIT_MARGIN <= GROUP_SESSION_SECONDS``
  (:func:`freeze_limit`): 4 s of a 6 s session. The successor writes later still: only
  after the coordinator noticed the expiry, the group rebalanced and it fenced the
  partition's producer and read where to resume.
- Ticks stalled is an upper bound of heartbeats stopped: a thread holding the interpreter
  (a long collection) stops the ticker but not librdkafka's threads. Counting it anyway
  keeps the rule safe without telling the causes apart.

The transaction timeout needs no limit of its own: the coordinator aborts a transaction
open longer and bumps the producer's epoch, so the writer's next call is refused by the
broker itself (``is now written by another instance``), however short the stall was by
this measure (``tests/core/test_freeze_limit.py``).

Measured (2 cores, Python 3.11): a CPU hog (``bench/cpu_hog.py``) delays ticks by at
most 0.6 s, even with two or four hogs and a busy main thread; a full collection holds
the interpreter 0.7-1.3 s with 7 M tracked objects, 1.6-2.4 s with 20 M and 6-9 s with
40 M (automatic collections while such a heap grows: up to 12 s). The former limit (2 s,
a third of the session) took the 20 M heap's collections for freezes; a stall recurring
faster than a transaction completes then kept every writer refusing.

What it cannot cover: records already handed to the client when the stall began are
sent when it ends, and a stall that begins after the check, before its begin or commit
reaches the broker; heartbeats delayed by the network. Kafka's fencing covers all three
(the new owner's ``init_transactions``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

GROUP_SESSION_SECONDS = 6.0
"""The consumer-group session of the services whose writers this watch guards
(``session.timeout.ms``; 6 s is also the broker's least, ``group.min.session.timeout.ms``)."""
HEARTBEAT_SECONDS = 0.5
"""The services' ``heartbeat.interval.ms``: the longest a running member goes without
sending a heartbeat."""
COMMIT_MARGIN = 1.5
"""Time allowed between a passed check and its begin or commit reaching the broker."""
TICK = 0.1
STEADY = HEARTBEAT_SECONDS
"""After a stall, the process must tick on time this long before a new late gap starts a
new stall rather than extending it."""
LATE = 2 * HEARTBEAT_SECONDS
"""A gap between ticks longer than this is late: two heartbeat intervals. CPU starvation
delays ticks by at most 0.6 s (measured, below) while librdkafka's threads go on
heartbeating; a gap that short, however often it recurs, is no stall."""


def freeze_limit(
    session: float, heartbeat: float = HEARTBEAT_SECONDS, margin: float = COMMIT_MARGIN
) -> float:
    """The longest stall that cannot have cost a member of a group with session
    ``session`` its partitions before a write the check lets through reaches the broker
    (see the module docstring)."""
    limit = session - heartbeat - margin
    if limit <= STEADY:
        raise ValueError(
            f"a group session of {session:g} s leaves no room for a freeze limit "
            f"(heartbeat {heartbeat:g} s, margin {margin:g} s)"
        )
    return limit


FREEZE_LIMIT = freeze_limit(GROUP_SESSION_SECONDS)
"""A stall longer than this is a freeze: 4 s of the 6 s session."""


@dataclass(frozen=True)
class Freeze:
    ended_at: float
    """Monotonic time of the stall's last late tick (or now, for a stall in progress)."""
    seconds: float


@dataclass(frozen=True)
class Stall:
    """Ticks came late: from ``began`` (the last tick before the first late gap) to
    ``last_late`` (the tick that ended the latest late gap)."""

    began: float
    last_late: float

    @property
    def seconds(self) -> float:
        return self.last_late - self.began


def after_tick(
    stall: Stall | None, last_tick: float, now: float, steady: float, late: float = LATE
) -> Stall | None:
    """The stall after a tick at ``now``, the one before at ``last_tick``: extended by a
    gap longer than ``late``, over once the process ticked without one for ``steady``
    since its last late gap, else unchanged. Pure."""
    if now - last_tick > late:
        return Stall(stall.began if stall is not None else last_tick, now)
    if stall is not None and now - stall.last_late >= steady:
        return None
    return stall


def freeze_since(
    since: float,
    now: float,
    last_tick: float,
    last_freeze: Freeze | None,
    limit: float,
    stall: Stall | None = None,
    late: float = LATE,
) -> Freeze | None:
    """The freeze that ended after ``since`` (monotonic), if any: the one in progress
    (a late gap up to ``now`` that makes the current stall longer than ``limit``) or the
    last one recorded. Only the last recorded freeze is needed: an earlier one ended
    earlier still. Pure."""
    if now - last_tick > late:
        began = stall.began if stall is not None else last_tick
        if now - began > limit:
            return Freeze(now, now - began)
    if last_freeze is not None and last_freeze.ended_at > since:
        return last_freeze
    return None


class FreezeWatch:
    """One per process (:func:`process_freeze_watch`): a daemon thread that ticks and
    records the current stall and the last freeze it saw."""

    def __init__(
        self,
        limit: float = FREEZE_LIMIT,
        tick: float = TICK,
        steady: float = STEADY,
        late: float = LATE,
    ) -> None:
        if not tick < steady <= late < limit:
            raise ValueError(
                f"need tick < steady <= late < limit, not {tick:g}, {steady:g}, {late:g}, {limit:g}"
            )
        self._late = late
        self.limit = limit
        self._tick = tick
        self._steady = steady
        self._lock = threading.Lock()
        self._last_tick = time.monotonic()
        self._stall: Stall | None = None
        self._last_freeze: Freeze | None = None
        threading.Thread(target=self._run, name="freeze-watch", daemon=True).start()

    def frozen_since(self, since: float) -> Freeze | None:
        """The freeze of this process that ended after ``since`` (a ``time.monotonic()``
        value), if any."""
        with self._lock:
            return freeze_since(
                since,
                time.monotonic(),
                self._last_tick,
                self._last_freeze,
                self.limit,
                self._stall,
                self._late,
            )

    def _run(self) -> None:
        while True:
            time.sleep(self._tick)
            now = time.monotonic()
            with self._lock:
                gap = now - self._last_tick
                stall = after_tick(self._stall, self._last_tick, now, self._steady, self._late)
                self._stall, self._last_tick = stall, now
                if stall is None or stall.last_late != now:
                    continue
                if stall.seconds > self.limit:
                    self._last_freeze = Freeze(now, stall.seconds)
            if stall.seconds > self.limit:
                log.warning(
                    "this process stalled for %.1f s (stopped, or starved of CPU or of the "
                    "interpreter), longer than its group can be sure of it (%.1f s): its "
                    "writers opened before refuse to go on",
                    stall.seconds,
                    self.limit,
                )
            elif gap > 1.0:
                log.info(
                    "this process stalled for %.1f s (within the %.1f s its group outlives)",
                    stall.seconds,
                    self.limit,
                )


_watch: FreezeWatch | None = None
_watch_lock = threading.Lock()


FREEZE_WATCH_ENV = "REPLICATOR_FREEZE_WATCH"
"""``off`` runs the writers without this watch, so that a test can show what the broker's
fencing covers on its own (``tests/ingress/test_zombie.py``, ``tests/relay/test_zombie.py``).
Never needed in production: the watch costs one lock and one clock read per transaction."""


def process_freeze_watch() -> FreezeWatch | None:
    """The process's watch, started on first use; None with ``REPLICATOR_FREEZE_WATCH=off``."""
    global _watch
    if os.environ.get(FREEZE_WATCH_ENV, "").lower() == "off":
        log.warning("%s=off: writers do not check for freezes of this process", FREEZE_WATCH_ENV)
        return None
    with _watch_lock:
        if _watch is None:
            _watch = FreezeWatch()
        return _watch
