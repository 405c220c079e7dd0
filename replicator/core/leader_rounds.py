"""Background work that runs in rounds on one instance of a service: the one leading.

Why a class of its own: ingress and the relay each keep a destination's ACLs copied
(``[ingress] sync_acls`` through the bucket, ``[relay] sync_acls`` from the upstream), and
both follow the same rules, which belong in one place:

- Only the instance that leads (owns segment-events partition 0, or the relay's slot 0)
  runs rounds; the others look every :data:`LEADERSHIP_POLL` seconds whether they have
  become the one, so a new leader starts its first round at once.
- A round runs every ``interval`` seconds while leading. A failed round is logged (a
  :class:`~replicator.core.errors.ReplicatorError` as a WARNING with its message, anything
  else with its traceback) and the next one retries: the data path never waits for a
  round, and a round never ends the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from replicator.core.errors import ReplicatorError

log = logging.getLogger(__name__)

LEADERSHIP_POLL = 1.0
"""How often an instance that does not lead looks whether it has become the one."""


class LeaderRounds(threading.Thread):
    """Calls :meth:`round` every ``interval`` seconds while ``leading()``; ``what`` names
    the work in the log ("ACL sync")."""

    def __init__(self, name: str, what: str, interval: float, leading: Callable[[], bool]) -> None:
        super().__init__(name=name, daemon=True)
        self._what = what
        self._interval = interval
        self._leading = leading
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        due = time.monotonic()  # the first round as soon as this instance leads
        poll = min(LEADERSHIP_POLL, self._interval)
        while not self._stopping.wait(poll):
            if not self._leading() or time.monotonic() < due:
                continue
            due = time.monotonic() + self._interval
            try:
                self.round()
            except ReplicatorError as exc:
                log.warning("%s failed, retrying later: %s", self._what, exc)
            except Exception:
                log.exception("%s failed, retrying later", self._what)

    def round(self) -> None:
        """One round of the work (subclasses)."""
        raise NotImplementedError
