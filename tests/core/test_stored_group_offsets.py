"""Group offsets objects read out of a bucket: a bad one is skipped with a warning naming
it, the others are read."""

from __future__ import annotations

import logging

from replicator.core.groups.offsets_file import (
    GroupOffsets,
    GroupSelection,
    group_history_s3_key,
    group_history_s3_prefix,
    group_offsets_s3_key,
)
from replicator.core.groups.stored import read_group_offsets, read_group_offsets_at
from tests.fixtures.stack import SOURCE


def _poisoned_bucket(local_stack, bucket):
    store = local_stack.store(SOURCE, bucket)
    good = GroupOffsets(SOURCE, "t", "good", {0: 5}, 1.0)
    store.put_json(group_offsets_s3_key("data", SOURCE, "t", "good"), good.to_json())
    store.put_json(group_history_s3_key("data", SOURCE, "t", "good", 1000), good.to_json())
    bad = {**GroupOffsets(SOURCE, "t", "bad", {0: 1}, 1.0).to_json(), "offsets": {"²": 1}}
    store.put_json(group_offsets_s3_key("data", SOURCE, "t", "bad"), bad)
    store.put_json(group_history_s3_key("data", SOURCE, "t", "bad", 1000), bad)
    head = group_history_s3_prefix("data", SOURCE, "t")
    store.put_json(f"{head}good/²²²²²²²²²²²²².json", good.to_json())
    return store, good


def test_a_bad_group_offsets_object_is_skipped_not_a_crash(local_stack, bucket, caplog):
    store, good = _poisoned_bucket(local_stack, bucket)
    with caplog.at_level(logging.WARNING):
        assert read_group_offsets(store, SOURCE, "t") == [good]
        assert read_group_offsets_at(store, SOURCE, "t", None) == [good]
    messages = [r.getMessage() for r in caplog.records]
    assert any("_groups/bad.json" in m and "partition '²'" in m for m in messages), messages
    assert any("_group_history/good/²²²" in m for m in messages), messages


def test_a_selection_reads_only_the_groups_it_takes(local_stack, bucket, caplog):
    store = local_stack.store(SOURCE, bucket)
    for group in ("a1", "a2", "a3", "b1"):
        offsets = GroupOffsets(SOURCE, "t", group, {0: 1}, 1.0).to_json()
        store.put_json(group_offsets_s3_key("data", SOURCE, "t", group), offsets)
        store.put_json(group_history_s3_key("data", SOURCE, "t", group, 1000), offsets)
    reads: list[str] = []
    real_get = store.get_json

    def counted(key: str) -> object:
        reads.append(key)
        return real_get(key)

    store.get_json = counted
    with caplog.at_level(logging.WARNING):
        limited = read_group_offsets(store, SOURCE, "t", GroupSelection(("a.*",), limit=2))
    assert [g.group for g in limited] == ["a1", "a2"]
    assert len(reads) == 2  # chosen from the keys: the others are not fetched
    assert any(
        "3 exported groups match, only the first 2" in r.getMessage() for r in caplog.records
    )
    named = GroupSelection(names=frozenset({"b1", "zz"}))
    assert [g.group for g in read_group_offsets_at(store, SOURCE, "t", None, named)] == ["b1"]
    assert read_group_offsets(store, SOURCE, "t", GroupSelection(patterns=())) == []
