"""Restore in a deployment that signs segments refuses a segment it did not sign: the
partition halts after the records before it, naming the S3 object key and why.

The tasks run in this process (the entry point Spark calls, without Spark): the key is
a ``${NAME}`` reference resolved from this process's environment, as an executor does."""

from __future__ import annotations

import dataclasses

from replicator.core.kafka import provenance
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import SigningKeys
from replicator.core.segments.store import SegmentStore
from restore.job import RestoreJob, RestoreRequest
from restore.task import run_task
from tests.fixtures.independent import read_partition
from tests.fixtures.ingress import segment_batch
from tests.fixtures.signing import ATTACKER_KEY, signed_config, store_with
from tests.fixtures.stack import DESTINATION, SOURCE


def test_restore_refuses_a_segment_the_deployment_did_not_sign(
    archive, local_stack, unique, monkeypatch
):
    plain = archive()
    config = signed_config(plain.path, monkeypatch)
    signed = dataclasses.replace(
        plain, config=config, store=SegmentStore.for_region(config, DESTINATION)
    )
    for partition in range(2):
        signed.put(partition, segment_batch(0, 10), 0, 9)
    signed.put(0, segment_batch(10, 10), 10, 19)
    forged = store_with(signed.store, SigningKeys(ATTACKER_KEY))
    bad = SegmentKey(SOURCE, signed.topic, 1, 0, 10, 19)
    forged.write_segment(bad, segment_batch(10, 10))
    signed.describe(2, {0: 0, 1: 0})
    into = unique("signed")
    job = RestoreJob(
        config,
        RestoreRequest(
            topics=[signed.topic], from_region=SOURCE, into_region=DESTINATION, into_topic=into
        ),
    )
    plans = job.plan()
    job.check_archived(plans)
    job.prepare_destination(plans)

    results = [run_task(job._task(topic, plan)) for topic in plans for plan in topic.plans]

    assert [(r.partition, r.status) for r in results] == [(0, "complete"), (1, "halted")]
    assert bad.to_s3_key("data") in results[1].message
    assert "matches none of the configured keys" in results[1].message
    offsets = [
        [
            provenance.source_offset(
                list(r[5]), provenance.SourcePartition(SOURCE, signed.topic, p)
            )
            for r in read_partition(local_stack.bootstrap(DESTINATION), into, p)
        ]
        for p in range(2)
    ]
    assert offsets == [list(range(20)), list(range(10))]
