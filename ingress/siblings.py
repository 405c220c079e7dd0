"""What the replay processes of one instance tell each other: when to join the group, and
when to leave it at the end of a ``--stop-at-end`` run.

Why: the consumers use the eager protocol, so every rebalance stops every worker of every
member (each ends the row group it is producing and commits it) and starts the new share's
workers (each fences its partition's previous writer and reads its checkpoint). Measured
with two processes, 8 partitions and 2,000,000 records: the member that joined first took
all 8 partitions, replayed them for 4.5 s, and the second member's join then cost 5.5 s
of stopping and restarting before both replayed; at the end, the member that finished
first left the group, and the other was handed all 8 partitions again only to find them
done. Neither rebalance moves work anywhere useful.

- **Start together.** A member starts the workers of its first share once every member
  of the instance holds a share, so that the first shares are the ones they keep. The
  members join at the same moment (each once it is ready to), but a broker that ends a
  new group's first rebalance at once (``group.initial.rebalance.delay.ms = 0``; 3 s by
  default) gives everything to the first join and then rebalances; a member that has
  started nothing loses nothing to it. A member that never gets a share (it died first)
  delays the others by ``START_TOGETHER_TIMEOUT`` at most; a member restarted later starts
  at once.
- **Leave together.** With ``--stop-at-end`` a member whose share is done stays in the
  group until every member's is, then all leave. Whether a share is done is still each
  member's own decision (:class:`~replicator.core.workers.GroupShare`), so this changes
  only when they leave, never whether a partition is replayed: a member that left early
  starts the rebalance the group would have had anyway, and whoever is handed its share
  finishes it. The parent keeps the flags true to who is there: a member that exited for
  good (finished, failed, stopped alone) is counted done — the others must not wait for
  it, its share moves to them through the group — and one about to be restarted is
  counted not done until it says so itself.
"""

from __future__ import annotations

import threading
import time
from multiprocessing.context import BaseContext
from typing import Any

START_TOGETHER_TIMEOUT = 20.0
"""Seconds a member waits for the others to be ready, and then to hold a share, before it
goes on alone."""
_TICK = 0.02


class InstanceMembers:
    """Shared by the ``count`` members of one instance (made by the parent, handed to each
    member when it is spawned)."""

    def __init__(self, context: BaseContext, count: int) -> None:
        self.count = count
        self._ready: Any = context.Value("i", 0)
        self._assigned: Any = context.Array("b", count)
        self._finished: Any = context.Array("b", count)

    def join_together(self, stop: threading.Event, timeout: float = START_TOGETHER_TIMEOUT) -> bool:
        """Count this member ready and wait until every member is (or ``stop``, or
        ``timeout``); whether all were."""
        with self._ready.get_lock():
            self._ready.value += 1
        deadline = time.monotonic() + timeout
        while self._ready.value < self.count:
            if stop.wait(_TICK) or time.monotonic() >= deadline:
                return False
        return True

    def all_assigned(self, index: int) -> bool:
        """Record that member ``index`` holds a share; whether every member does."""
        self._assigned[index] = 1
        return all(self._assigned[:])

    def all_finished(self, index: int, finished: bool) -> bool:
        """Record whether member ``index``'s share is done now; whether every member's is."""
        self._finished[index] = int(finished)
        return finished and all(self._finished[:])

    def exited(self, index: int, *, restarting: bool) -> None:
        """The parent's word on member ``index``, which exited: gone for good (nothing of
        it to wait for), or ``restarting`` (wait for the new process to finish its share)."""
        self._finished[index] = 0 if restarting else 1
