"""JSON objects read out of the bucket (topic descriptors, group offsets) are a bucket
writer's to forge: one nested too deep, not JSON or not an object is an error naming its
S3 object key, never a ``RecursionError`` that ends the process. Each reader (ingress and
restore through ``read_descriptor``, egress's generations and export starts, the group
offsets reader) keeps it to the topic or group it belongs to."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from egress import topic_descriptor
from egress.catalog import SourceCatalog
from egress.generations import TopicGenerations
from egress.topic_descriptor import DescriptorPublisher
from replicator.core.aws.errors import StorageError
from replicator.core.groups.stored import _read as read_group_objects
from replicator.core.segments.descriptor import describe, read_descriptor
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.key import SegmentKey, topic_descriptor_s3_key
from replicator.core.segments.store import SegmentStore
from replicator.core.untrusted_json import json_object
from tests.fixtures.egress import unreachable_egress_config

DEEP = b"[" * 100_000 + b"]" * 100_000
"""200 kB: far below the size cap, far deeper than the parser's recursion allows."""
DEEP_OBJECT = b'{"partitions": ' + DEEP + b"}"


class Objects:
    """The ``get_object`` of an S3 client over a dict of object bodies."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.bodies:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        body = self.bodies[Key]
        return {"ContentLength": len(body), "Body": io.BytesIO(body)}


def store_of(bodies: dict[str, bytes]) -> SegmentStore:
    return SegmentStore(cast(Any, Objects(bodies)), "archive", "data")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (DEEP, "nested too deep"),
        (DEEP_OBJECT, "nested too deep"),
        (b"{not json", "unusable JSON: Expecting property name"),
        (b"[1, 2]", "not an object"),
        (b'"text"', "not an object"),
    ],
)
def test_get_json_refuses_what_is_no_usable_object_naming_its_key(body, reason):
    store = store_of({"data/r/t/_topic.json": body})
    with pytest.raises(StorageError, match=reason) as raised:
        store.get_json("data/r/t/_topic.json")
    assert raised.value.operation == "parse"
    assert "s3://archive/data/r/t/_topic.json" in str(raised.value)


def test_get_json_still_reads_an_object():
    store = store_of({"data/r/t/_topic.json": b'{"partitions": 3, "configs": {}}'})
    assert store.get_json("data/r/t/_topic.json") == {"partitions": 3, "configs": {}}


def test_the_bounded_parser_refuses_deep_nesting_as_a_value_error():
    with pytest.raises(ValueError, match="nested too deep"):
        json_object(DEEP_OBJECT, max_bytes=1024**2)


def test_a_deeply_nested_descriptor_is_a_descriptor_error_naming_its_key():
    """What ingress (start, refresh, export start) and restore read descriptors with."""
    key = topic_descriptor_s3_key("data", "east", "orders")
    store = store_of({key: DEEP})
    with pytest.raises(DescriptorError, match=rf"{key}.*nested too deep"):
        read_descriptor(store, "east", "orders")


class _Ids:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def topic_ids(self, topics: list[str]) -> dict[str, str | None]:
        return {t: self.ids.get(t) for t in topics}


def test_egress_generations_skip_only_the_topic_of_an_unreadable_descriptor(caplog):
    """The other topic's re-creation is still noticed; the bad one is named."""
    bad = topic_descriptor_s3_key("data", "east", "bad")
    good = topic_descriptor_s3_key("data", "east", "orders")
    store = store_of({bad: DEEP, good: b'{"topic_id": "exported"}'})
    ids = _Ids({"bad": "b1", "orders": "recreated"})
    generations = TopicGenerations(unreachable_egress_config(), cast(SourceCatalog, ids), store)
    with caplog.at_level(logging.WARNING):
        assert generations.check(["bad", "orders"], force=True) == {"orders"}
    assert any(bad in r.getMessage() for r in caplog.records), caplog.text


class _Bucket:
    """Egress's view of the bucket: a descriptor read through the real ``get_json``, the
    segments listed, the descriptors written."""

    def __init__(self, bodies: dict[str, bytes], segments: dict[int, list[int]]) -> None:
        self.store = store_of(bodies)
        self.keys = self.store.keys
        self.segments = segments
        self.written: list[dict[str, Any]] = []

    def get_json(self, key: str) -> Any:
        return self.store.get_json(key)

    def list_segments(self, region: str, topic: str, partition: int) -> list[Any]:
        return [
            SimpleNamespace(segment_key=SegmentKey(region, topic, partition, 0, s, s + 9))
            for s in self.segments.get(partition, [])
        ]

    def put_json(self, key: str, value: dict[str, Any]) -> None:
        self.written.append(value)


class _Catalog:
    def partitions(self) -> list[tuple[str, int]]:
        return [("orders", 0), ("orders", 1)]

    def topic_configs(self, topic: str) -> dict[str, str]:
        return {}


class _Generations:
    def __init__(self, *_: object) -> None:
        pass

    def check(self, topics: list[str]) -> set[str]:
        return set()

    def topic_id(self, topic: str) -> str | None:
        return None


def test_egress_rewrites_an_unreadable_descriptor_from_the_listed_segments(monkeypatch, caplog):
    key = topic_descriptor_s3_key("data", "east", "orders")
    bucket = _Bucket({key: DEEP}, {0: [0, 10], 1: [5]})
    monkeypatch.setattr(topic_descriptor.SegmentStore, "for_region", lambda *_: bucket)
    monkeypatch.setattr(topic_descriptor, "TopicGenerations", _Generations)
    publisher = DescriptorPublisher(unreachable_egress_config(), _Catalog())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        publisher.publish()
    assert bucket.written and bucket.written[-1]["export_start"] == {"0": 0, "1": 5}
    assert any(key in r.getMessage() for r in caplog.records), caplog.text


def test_a_deeply_nested_group_offsets_object_is_skipped_naming_its_key(caplog):
    key = "data/east/orders/_groups/billing.json"
    store = store_of({key: DEEP})
    with caplog.at_level(logging.WARNING):
        assert read_group_objects(store, "east", "orders", [(key, len(DEEP), "billing")]) == []
    assert any(key in r.getMessage() for r in caplog.records), caplog.text


def test_a_good_descriptor_beside_is_read():
    key = topic_descriptor_s3_key("data", "east", "orders")
    store = store_of({key: json.dumps(describe("orders", 2, {}, "east", {0: 0})).encode()})
    found = read_descriptor(store, "east", "orders")
    assert found is not None and found.partitions == 2 and found.export_start == {0: 0}
