"""Export starts a run finds by listing: a listing that fails once is made again.

Each egress run keeps its own statistics (egress.driver_state), so the segments an earlier
run wrote are known to a new run only by listing its partitions once at its start. That
listing failing (a bucket's 503, a moment of the endpoint) must not leave those partitions
without an export start for the rest of the run: ingress would halt them as lost."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from egress import topic_descriptor
from egress.topic_descriptor import DescriptorPublisher
from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import UNSIGNED
from tests.fixtures.egress import unreachable_egress_config


class Bucket:
    """Segments by partition; the first listing of ``failing`` fails. A deployment that
    does not sign (``keys``)."""

    keys = UNSIGNED

    def __init__(self, segments: dict[int, list[int]], failing: int) -> None:
        self.segments = segments
        self.failing: int | None = failing
        self.written: list[dict[str, Any]] = []

    def list_segments(self, region: str, topic: str, partition: int) -> list[Any]:
        if partition == self.failing:
            self.failing = None
            raise StorageError("list", "archive", f"{topic}/{partition}", "503 Slow Down")
        return [
            SimpleNamespace(segment_key=SegmentKey(region, topic, partition, 0, s, s + 9))
            for s in self.segments.get(partition, [])
        ]

    def get_json(self, key: str) -> Any:
        raise ObjectNotFoundError("get", "archive", key, "no such key")

    def put_json(self, key: str, value: dict[str, Any]) -> None:
        self.written.append(value)


class Catalog:
    def partitions(self) -> list[tuple[str, int]]:
        return [("orders", p) for p in range(3)]

    def topic_configs(self, topic: str) -> dict[str, str]:
        return {}


class Generations:
    def __init__(self, *_: object) -> None:
        pass

    def check(self, topics: list[str]) -> set[str]:
        return set()

    def topic_id(self, topic: str) -> str | None:
        return None


@pytest.mark.parametrize("failing", [0, 1, 2])
def test_a_listing_that_failed_at_the_start_of_a_run_is_made_again(monkeypatch, failing):
    # An earlier run wrote partitions 0 and 1 and was killed before their starts were
    # published; this run's own statistics will never mention them.
    bucket = Bucket({0: [0, 10], 1: [5]}, failing)
    monkeypatch.setattr(topic_descriptor.SegmentStore, "for_region", lambda *_: bucket)
    monkeypatch.setattr(topic_descriptor, "TopicGenerations", Generations)
    publisher = DescriptorPublisher(unreachable_egress_config(), Catalog())  # type: ignore[arg-type]

    publisher.publish()  # the listing fails: a warning, nothing lost
    publisher.publish()  # the next refresh lists again
    assert bucket.written[-1]["export_start"] == {"0": 0, "1": 5}
