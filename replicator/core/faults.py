"""Crash points, for tests that must kill a process at an exact step.

``REPLICATOR_CRASH_POINT=name[:n]`` makes the n-th (default first) arrival at the
named point SIGKILL every process of the caller's session, as a power cut would: a Spark
driver, its JVM and its Python workers (which PySpark puts in a process group of their
own) die together. Start the process in a session of its own. Unset, a crash point costs one
environment look-up; it is placed only on per-transaction paths, never per record.
"""

from __future__ import annotations

import os
import signal

WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT = "writer-after-produce-before-checkpoint"
"""Records of a transaction are flushed; its checkpoint and commit are not done."""
COMPACTION_DURING_MERGE = "compaction-during-merge"
"""A merged segment is being written (reached after each input segment)."""
COMPACTION_AFTER_OUTPUT = "compaction-after-output"
"""A merged segment is complete in S3; its inputs are all still there."""
COMPACTION_DURING_DELETES = "compaction-during-deletes"
"""Some of a merge's inputs are deleted, others not (reached before each delete)."""
CRASH_POINTS = frozenset(
    {
        WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT,
        COMPACTION_DURING_MERGE,
        COMPACTION_AFTER_OUTPUT,
        COMPACTION_DURING_DELETES,
    }
)

_arrivals: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die here if ``REPLICATOR_CRASH_POINT`` names this point (one of :data:`CRASH_POINTS`)."""
    spec = os.environ.get("REPLICATOR_CRASH_POINT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _arrivals[name] = _arrivals.get(name, 0) + 1
    if _arrivals[name] >= int(nth or 1):
        session = os.getsid(0)
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                if os.getsid(int(entry)) == session:
                    os.kill(int(entry), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
        os.kill(os.getpid(), signal.SIGKILL)
