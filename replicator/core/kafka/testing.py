"""A writer for tests of replication loops without Kafka.

:class:`MemoryWriter` keeps the :class:`~replicator.core.kafka.writer.RecordWriter`
contract in memory: records become visible only at :meth:`commit`, an abort drops the open
transaction, and :meth:`open` resumes after the last committed source offset or the last
checkpoint, whichever is further, as the real writer does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from replicator.core.kafka.checkpoints import ResumePoint


@dataclass
class MemoryWriter:
    committed: list[int] = field(default_factory=list)
    """Source offsets of the committed records, in the order written."""
    checkpoints: list[int] = field(default_factory=list)
    """The next source offset of every commit, in order."""
    halted: str = ""
    opened: int = 0
    closed: bool = False
    _pending: list[int] = field(default_factory=list)

    def open(self) -> ResumePoint:
        self.opened += 1
        candidates = [o + 1 for o in self.committed[-1:]] + self.checkpoints[-1:]
        if not candidates:
            return ResumePoint(None, -1)
        return ResumePoint(max(candidates), len(self.committed) - 1)

    def write(self, table: pa.Table) -> None:
        self._pending += table.column("offset").to_pylist()

    def commit(self, next_source_offset: int) -> int:
        self.committed += self._pending
        self._pending = []
        self.checkpoints.append(next_source_offset)
        return len(self.committed) - 1

    def abort(self) -> None:
        self._pending = []

    def record_halt(self, next_source_offset: int, reason: str) -> None:
        self.checkpoints.append(next_source_offset)
        self.halted = reason

    def close(self) -> None:
        self.abort()
        self.closed = True
