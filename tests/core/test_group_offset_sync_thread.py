"""The group offset sync thread stops and can be joined: its stop event must not hide
``threading.Thread._stop``, which ``join`` calls (a service waiting for it on shutdown
would otherwise fail with a TypeError)."""

from __future__ import annotations

from replicator.core.groups.sync import GroupOffsetSync


class _Admin:
    def commit_forward(self, group, offsets):
        return offsets


def test_a_stopped_sync_thread_joins():
    sync = GroupOffsetSync(_Admin(), lambda: [], 0.05)  # type: ignore[arg-type]
    sync.start()
    sync.stop()
    sync.join(5)
    assert not sync.is_alive()
