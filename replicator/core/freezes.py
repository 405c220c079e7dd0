"""Noticing that this process was frozen, so that a "zombie" writer stops by itself.

Why: a service instance owns its partitions through a consumer group. Frozen longer than
its group session (SIGSTOP, a paused virtual machine, a swap storm), it loses them
without knowing it: the group gives them to another instance, which resumes from the
destination and writes on. When the frozen process thaws, every thread carries on from
where it stopped, the writers too, before the consumer hears of the revocation. On Kafka
the new owner's ``init_transactions`` has fenced the old writer: its next transactional
call fails. A broker that does not fence (the local one does not) would let it write and
commit records the new owner writes as well.

So a writer asks, before it begins and before it commits a transaction, whether the
process was frozen since the writer was opened (:meth:`FreezeWatch.frozen_since`), and
refuses (``OwnershipLostError``) if it was: its worker fails, and is restarted only if the
group still gives the partition to this instance, re-opening the writer, which resumes
from the destination. A thread of its own ticks every :data:`TICK` seconds; a gap between
two ticks longer than :data:`FREEZE_LIMIT` is a freeze. The check also sees a freeze in
progress (the ticker not yet run since the thaw), whichever thread runs first.

What it cannot cover: records already handed to the client when the freeze began are
sent when it ends, before any check runs (on Kafka they are fenced; on a broker that does
not fence, the new owner's resume may already be past them). A freeze shorter than the
limit is harmless: the group keeps a member :data:`GROUP_SESSION_SECONDS` without a
heartbeat.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

GROUP_SESSION_SECONDS = 6.0
"""The consumer-group session of the services whose writers this watch guards."""
FREEZE_LIMIT = GROUP_SESSION_SECONDS / 3
"""A gap longer than this between two ticks counts as a freeze: well inside the session,
with room for the heartbeat interval and a slow scheduler."""
TICK = 0.1


@dataclass(frozen=True)
class Freeze:
    ended_at: float
    """Monotonic time the process ran again (or now, for a freeze in progress)."""
    seconds: float


def freeze_since(
    since: float, now: float, last_tick: float, last_freeze: Freeze | None, limit: float
) -> Freeze | None:
    """The freeze that ended after ``since`` (monotonic), if any: the one in progress
    (nothing ticked for longer than ``limit`` up to ``now``) or the last one recorded.
    Only the last recorded freeze is needed: an earlier one ended earlier still."""
    if now - last_tick > limit:
        return Freeze(now, now - last_tick)
    if last_freeze is not None and last_freeze.ended_at > since:
        return last_freeze
    return None


class FreezeWatch:
    """One per process (:func:`process_freeze_watch`): a daemon thread that ticks and
    records the last freeze it saw."""

    def __init__(self, limit: float = FREEZE_LIMIT, tick: float = TICK) -> None:
        self.limit = limit
        self._tick = tick
        self._lock = threading.Lock()
        self._last_tick = time.monotonic()
        self._last_freeze: Freeze | None = None
        threading.Thread(target=self._run, name="freeze-watch", daemon=True).start()

    def frozen_since(self, since: float) -> Freeze | None:
        """The freeze of this process that ended after ``since`` (a ``time.monotonic()``
        value), if any."""
        with self._lock:
            return freeze_since(
                since, time.monotonic(), self._last_tick, self._last_freeze, self.limit
            )

    def _run(self) -> None:
        while True:
            time.sleep(self._tick)
            now = time.monotonic()
            with self._lock:
                gap = now - self._last_tick
                if gap > self.limit:
                    self._last_freeze = Freeze(now, gap)
                    log.warning("this process was frozen for %.1f s (or starved of CPU)", gap)
                self._last_tick = now


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
