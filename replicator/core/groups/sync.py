"""A thread that keeps translated group offsets committed in a destination cluster.

Each round: translate (the caller says from where: exported objects for ingress, the
upstream cluster for relay), then commit per group, forward only, groups with members
left alone. A failed round is logged and the next one retries; the data path never waits
for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from replicator.core.errors import ReplicatorError
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.plan import GroupPartition, commit_groups
from replicator.core.untrusted_text import escape

log = logging.getLogger(__name__)

SyncResult = dict[str, tuple[int | None, int]]
"""Per group: (partitions moved, or None when it has members; partitions behind)."""


def summarize(rows: list[GroupPartition], moved: dict[str, int | None]) -> SyncResult:
    """Pure: per group, what moved and how many partitions are behind."""
    behind: dict[str, int] = {}
    for row in rows:
        behind[row.group] = behind.get(row.group, 0) + (not row.translation.exact)
    return {group: (count, behind.get(group, 0)) for group, count in moved.items()}


class GroupOffsetSync(threading.Thread):
    def __init__(
        self,
        admin: GroupAdmin,
        translate: Callable[[], list[GroupPartition]],
        interval: float,
        *,
        leading: Callable[[], bool] = lambda: True,
        observe: Callable[[SyncResult], None] = lambda _result: None,
    ) -> None:
        """``leading``: whether this instance is the one that syncs now; ``observe``:
        receives each round's result (metrics)."""
        super().__init__(name="group-offset-sync", daemon=True)
        self._admin = admin
        self._translate = translate
        self._interval = interval
        self._leading = leading
        self._observe = observe
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        while not self._stopping.wait(self._interval):
            if not self._leading():
                continue
            try:
                self._observe(self.sync_once())
            except ReplicatorError as exc:
                log.warning("consumer group offset sync failed, retrying later: %s", exc)
            except Exception:
                log.exception("consumer group offset sync failed, retrying later")

    def sync_once(self) -> SyncResult:
        rows = self._translate()
        result = summarize(rows, commit_groups(self._admin, rows))
        for group, (moved, behind) in result.items():
            if moved is None:
                log.debug("group %s has members in the destination: not moved", escape(group))
            elif moved:
                log.info(
                    "moved offsets of group %s forward on %d partitions (%d behind)",
                    escape(group),
                    moved,
                    behind,
                )
        return result
