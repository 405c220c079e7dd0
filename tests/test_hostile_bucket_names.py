"""A bucket writer's names with digits ``int()`` refuses ('²'): every entry point that
reads them goes on, naming what it skipped, instead of dying on a plain ValueError.

(Ingress, where one such descriptor stops only its source, is in
``tests/ingress/test_bad_descriptor.py``.)"""

from __future__ import annotations

import logging

from compaction.job import CompactionJob
from ingress.service import IngressService
from replicator.core.groups.offsets_file import (
    GroupOffsets,
    group_history_s3_key,
    group_offsets_s3_key,
)
from replicator.failover import collect
from restore.job import RestoreJob, RestoreRequest
from tests.fixtures.ingress import segment_batch
from tests.fixtures.stack import DESTINATION, SOURCE

POISON = "\u00b2"  # SUPERSCRIPT TWO: str.isdigit() says yes, int() refuses it


def _poison(local_stack, store, topic: str, group: str) -> None:
    local_stack.s3().put_object(
        Bucket=store.bucket, Key=f"data/{SOURCE}/{topic}/{POISON}/x", Body=b"x"
    )
    bad = {**GroupOffsets(SOURCE, topic, group, {0: 1}, 1.0).to_json(), "offsets": {POISON: 1}}
    store.put_json(group_offsets_s3_key("data", SOURCE, topic, group), bad)
    store.put_json(group_history_s3_key("data", SOURCE, topic, group, 1000), bad)
    history = group_history_s3_key("data", SOURCE, topic, group, 2000)
    store.put_json(history.replace("0000000002000", POISON * 13), bad)


def test_failover_reports_past_a_poisoned_bucket(local_stack, ingress_setup, caplog):
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    _poison(local_stack, setup.store, setup.topic, "app")
    IngressService(setup.config, handle_signals=False).prepare()  # its checkpoint topic
    with caplog.at_level(logging.WARNING):
        report = collect(setup.config, ["app"])
    assert [row.source.partition for row in report.partitions] == [0]
    assert [(g.group, g.rows) for g in report.groups] == [("app", [])]  # not ready: no rows
    messages = [r.getMessage() for r in caplog.records]
    assert any("_groups/app.json" in m and "not a number" in m for m in messages), messages
    assert any(f"/{POISON}/" in m and "not a partition" in m for m in messages), messages


def test_restore_groups_past_a_poisoned_history(local_stack, archive, caplog):
    bucket = archive()
    bucket.put(0, segment_batch(0, 10), 0, 9)
    bucket.describe(1, {0: 0})
    _poison(local_stack, bucket.store, bucket.topic, "app")
    job = RestoreJob(
        bucket.config,
        RestoreRequest([bucket.topic], from_region=SOURCE, into_region=DESTINATION, groups=True),
    )
    plans = job.plan()
    assert [p.partition for p in plans[0].plans] == [0]
    with caplog.at_level(logging.WARNING):
        assert job.restore_groups(plans) == []
    messages = [r.getMessage() for r in caplog.records]
    assert any("not a history key" in m for m in messages), messages
    assert any("not a number" in m for m in messages), messages


def test_compaction_plans_past_a_poisoned_partition_directory(local_stack, compaction_setup):
    setup = compaction_setup()
    setup.fill(partitions=1, segments=3, per_segment=5)
    _poison(local_stack, setup.store, setup.topic, "app")
    plans = CompactionJob(setup.config).plan()
    assert sorted(plans) == [(SOURCE, setup.topic, 0)]
