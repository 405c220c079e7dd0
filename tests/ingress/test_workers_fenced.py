"""A writer fenced while its partition is still owned (a transaction the coordinator
aborted after outliving its timeout, reported by librdkafka as fencing) fails the worker,
so that the supervisor re-opens the writer; the restarted worker resumes exactly."""

from __future__ import annotations

from dataclasses import dataclass

from replicator.core.kafka.errors import OwnershipLostError
from replicator.core.kafka.testing import MemoryWriter
from tests.fixtures.worker import MemorySegments, config, run_worker


@dataclass
class FencedOnce(MemoryWriter):
    """Fenced at its second commit, as a coordinator-aborted transaction is."""

    commits: int = 0
    fenced: bool = False

    def commit(self, next_source_offset: int) -> int:
        self.commits += 1
        if self.commits == 2 and not self.fenced:
            self.fenced = True
            self.abort()
            raise OwnershipLostError("transaction fenced (epoch bumped)", code=-144)
        return super().commit(next_source_offset)


def test_a_fenced_worker_fails_for_a_restart_and_the_restart_resumes_exactly():
    segments = MemorySegments([(0, 9), (10, 19), (20, 29)])
    writer = FencedOnce()
    first = run_worker(config("fail"), segments, writer)
    # "stopped" would never be restarted by the supervisor: the partition would stall.
    assert first.status.state == "failed" and "fenced" in first.status.reason
    assert writer.committed == list(range(10))
    second = run_worker(config("fail"), segments, writer)
    assert second.status.state == "done", second.status
    assert writer.committed == list(range(30))
