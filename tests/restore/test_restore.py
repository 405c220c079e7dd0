"""Restore from the archive on the local stack: every record shape into a new topic, into
the source region after the original was deleted, cut at an instant, planned, refused
for archived segments, and stopped before a lost segment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from egress.job import EgressJob
from replicator.core.config import load_config
from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.offsets_file import GroupOffsets, group_history_s3_key
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from replicator.core.kafka.clients import client_config
from replicator.core.kafka.provenance import SourcePartition
from replicator.core.kafka.writer import PartitionWriter
from restore.errors import ArchivedSegmentsError, RestoreError
from restore.job import RestoreJob, RestoreRequest
from tests.fixtures.egress import create_topic
from tests.fixtures.independent import group_member, read_partition, watermarks
from tests.fixtures.ingress import segment_batch
from tests.fixtures.records import plain, produce_every_shape, to_batch
from tests.fixtures.relay import create_topic as create_kafka_topic
from tests.fixtures.restore import Archive
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 3


def restored(bootstrap: str, topic: str, partition: int, origin_topic: str):
    """(source offset, timestamp, key, value, headers without provenance) per record."""
    named = provenance.SourcePartition(SOURCE, origin_topic, partition)
    return [
        (
            provenance.source_offset(list(r[5]), named),
            r[1],
            r[3],
            r[4],
            tuple(h for h in r[5] if h[0] != provenance.HEADER),
        )
        for r in read_partition(bootstrap, topic, partition)
    ]


def as_source(bootstrap: str, topic: str, partition: int):
    return [(r[0], r[1], r[3], r[4], r[5]) for r in read_partition(bootstrap, topic, partition)]


def exported_config(local_stack, tmp_path, unique, topic):
    path = tmp_path / "replicator.toml"
    path.write_text(
        local_stack.config_path.read_text().split("[ingress]")[0]
        + f"""
[egress]
region = "{SOURCE}"
checkpoint_location = "{tmp_path / "checkpoint"}"
state_dir = "{tmp_path / "state"}"
group_id = "{unique("egress")}"
[egress.topics."{topic}"]
max_segment_messages = 7
"""
    )
    return load_config(path), path


def test_every_record_shape_restores_identically_into_a_new_topic_and_the_source_region(
    local_stack, unique, spark, tmp_path
):
    topic, copy = unique("ledger"), unique("ledger.restored")
    config, path = exported_config(local_stack, tmp_path, unique, topic)
    create_topic(local_stack, topic, PARTITIONS)  # not compacted: some shapes have no key
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    produce_every_shape(producer, topic, PARTITIONS, 6, lambda _r, n: 1_700_000_000_000 + n)
    producer.flush(30)
    EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()
    source = {p: as_source(local_stack.bootstrap(SOURCE), topic, p) for p in range(PARTITIONS)}
    ends = [source[p][-1][0] + 1 for p in range(PARTITIONS)]
    deadline = time.monotonic() + 60
    while [
        local_stack.store(DESTINATION).exported_end(SOURCE, topic, p) for p in range(PARTITIONS)
    ] != ends:
        assert time.monotonic() < deadline, "segments were not replicated"
        time.sleep(0.3)

    # Into a new topic of the destination region, from its replicated copy.
    job = RestoreJob(
        config,
        RestoreRequest([topic], into_region=DESTINATION, into_topic=copy),
        spark=spark,
    )
    results = job.run(job.plan())
    assert [r.status for r in results] == ["complete"] * PARTITIONS
    assert sum(r.records for r in results) == sum(len(v) for v in source.values())
    for p in range(PARTITIONS):
        assert restored(local_stack.bootstrap(DESTINATION), copy, p, topic) == source[p]
    described = local_stack.admin(DESTINATION).list_topics(timeout=10).topics[copy]
    assert len(described.partitions) == PARTITIONS

    # Into the source region after the original topic was deleted by mistake.
    admin = local_stack.admin(SOURCE)
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    # By the command line; then again (in this process): the second run duplicates nothing.
    result = run_cli(
        "restore",
        "--config",
        str(path),
        "--topic",
        topic,
        "--into-region",
        SOURCE,
        "--master",
        "local[2]",
        "--json",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout[result.stdout.index('{\n  "seconds"') :])
    assert [p["status"] for p in report["partitions"]] == ["complete"] * PARTITIONS
    assert sum(p["records"] for p in report["partitions"]) == sum(map(len, source.values()))
    again = RestoreJob(config, RestoreRequest([topic], into_region=SOURCE), spark=spark)
    results = again.run(again.plan())
    assert [(r.status, r.records) for r in results] == [("complete", 0)] * PARTITIONS
    for p in range(PARTITIONS):
        assert restored(local_stack.bootstrap(SOURCE), topic, p, topic) == source[p]


def test_until_cuts_every_partition_at_the_first_later_record(archive, spark, local_stack, unique):
    store = archive()
    base = 1_700_000_000_000
    # Partition 0: timestamps in order; partition 1: out of order, so a record earlier than
    # the cut follows the first later one and must not be restored.
    in_order = to_batch(
        [dict(r, timestamp=base + 10 * i, timestamp_type=1) for i, r in enumerate(rows(0, 10))]
    )
    shuffled_stamps = [0, 10, 20, 70, 30, 40, 80, 50, 90, 95]
    out_of_order = to_batch(
        [
            dict(r, timestamp=base + shuffled_stamps[i], timestamp_type=1)
            for i, r in enumerate(rows(0, 10))
        ]
    )
    store.put(0, in_order, 0, 9)
    store.put(1, out_of_order, 0, 9)
    store.describe(2, {0: 0, 1: 0})
    until = base + 55  # between 50 and 60 in partition 0
    copy = unique("cut")
    plan = subprocess.run(
        restore_command(store, copy, "--until", str(until), "--plan"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr
    assert "partition 0: offsets 0..9 (1 segments" in plan.stdout
    assert (
        "partition 0: offsets 0..9 (1 segments, " in plan.stdout
        and "cut at offset 6" in plan.stdout
    )
    assert "cut at offset 3" in plan.stdout, plan.stdout
    assert copy not in local_stack.admin(DESTINATION).list_topics(timeout=10).topics

    results = store.restore(spark, copy, until_ms=until)
    assert [(r.status, r.next_offset) for r in results] == [("cut", 6), ("cut", 3)]
    offsets = [
        [o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)]
        for p in range(2)
    ]
    assert offsets == [[0, 1, 2, 3, 4, 5], [0, 1, 2]]
    # The same cut again restores nothing more.
    assert [r.records for r in store.restore(spark, copy, until_ms=until)] == [0, 0]

    # --groups: a group's offsets as they were at the cut, in the restored topic.
    group = unique("audit")
    for stamp, group_offsets in ((base + 30, {0: 2, 1: 1}), (base + 80, {0: 8, 1: 9})):
        exported = GroupOffsets(SOURCE, store.topic, group, group_offsets, stamp / 1000)
        store.store.put_json(
            group_history_s3_key("data", SOURCE, store.topic, group, stamp), exported.to_json()
        )
    job = RestoreJob(
        store.config,
        RestoreRequest([store.topic], SOURCE, DESTINATION, copy, until_ms=until, groups=True),
        spark=spark,
    )
    translated = job.restore_groups(job.plan())
    assert [(r.target.destination_partition, r.translation.exact) for r in translated] == [
        (0, True),
        (1, True),
    ]
    assert job.groups_moved == {group: 2}
    kafka = client_config(store.config.region(DESTINATION).kafka)
    committed = GroupAdmin(kafka, DESTINATION).committed(group)
    sources = {
        p: [o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)]
        for p in range(2)
    }
    # The destination offsets of source offsets 2 and 1: the group reads on from there.
    firsts = {p: read_partition(local_stack.bootstrap(DESTINATION), copy, p) for p in range(2)}
    assert [firsts[0][i][0] for i, o in enumerate(sources[0]) if o == 2] == [committed[(copy, 0)]]
    assert [firsts[1][i][0] for i, o in enumerate(sources[1]) if o == 1] == [committed[(copy, 1)]]


def rows(start: int, count: int) -> list[dict]:
    return segment_batch(start, count).to_pylist()


def test_archived_segments_are_refused_before_anything_is_written(
    archive, spark, local_stack, unique
):
    store = archive()
    store.put(0, segment_batch(0, 10), 0, 9)
    frozen = store.put(0, segment_batch(10, 10), 10, 19)
    s3_key = frozen.to_s3_key("data")
    local_stack.s3().copy_object(
        Bucket=store.store.bucket,
        Key=s3_key,
        CopySource={"Bucket": store.store.bucket, "Key": s3_key},
        StorageClass="GLACIER",
    )
    store.describe(1, {0: 0})
    copy = unique("frozen")
    with pytest.raises(ArchivedSegmentsError, match=s3_key):
        store.restore(spark, copy)
    assert copy not in local_stack.admin(DESTINATION).list_topics(timeout=10).topics


def test_a_lost_segment_stops_its_partition_before_the_gap_and_the_others_finish(
    archive, spark, local_stack, unique
):
    store = archive()
    for start in (0, 10, 20):
        store.put(0, segment_batch(start, 10), start, start + 9)
        if start != 10:
            store.put(1, segment_batch(start, 10), start, start + 9)
    store.describe(2, {0: 0, 1: 0})
    copy = unique("gap")
    results = store.restore(spark, copy)
    assert [(r.partition, r.status) for r in results] == [(0, "complete"), (1, "gap")]
    assert "offsets 10..19 are missing" in results[1].message
    offsets = [
        [o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)]
        for p in range(2)
    ]
    assert offsets == [list(range(30)), list(range(10))]


def five_records(archive) -> Archive:
    """An archive of one partition holding offsets 0-4 in one segment."""
    store = archive()
    store.put(0, segment_batch(0, 5), 0, 4)
    store.describe(1, {0: 0})
    return store


def test_a_topic_holding_other_records_is_refused_unless_appending(
    archive, spark, local_stack, unique
):
    store = five_records(archive)
    copy = unique("busy")
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(DESTINATION)})
    from confluent_kafka.admin import NewTopic

    admin = local_stack.admin(DESTINATION)  # alive until the future resolves
    admin.create_topics([NewTopic(copy, 1)])[copy].result(timeout=30)
    producer.produce(copy, b"someone else's", partition=0)
    producer.flush(10)
    with pytest.raises(RestoreError, match="already holds records"):
        store.restore(spark, copy)
    results = store.restore(spark, copy, append=True)
    assert results[0].records == 5
    values = [r[4] for r in read_partition(local_stack.bootstrap(DESTINATION), copy, 0)]
    assert values[0] == b"someone else's" and len(values) == 6


def test_a_partition_holding_only_aborted_records_is_restored_without_append(
    archive, spark, local_stack, unique
):
    # What a restore killed mid-transaction leaves once the broker aborted its
    # transaction: records no read_committed reader sees, and the abort marker after them.
    store = five_records(archive)
    copy = unique("aborted")
    bootstrap = local_stack.bootstrap(DESTINATION)
    create_kafka_topic(bootstrap, copy, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("killed")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for n in range(3):
        producer.produce(copy, f"aborted {n}".encode(), partition=0)
    producer.flush(10)
    producer.abort_transaction(30)
    # The abort marker is written after abort_transaction returns: wait until it is in.
    deadline = time.monotonic() + 30
    while watermarks(bootstrap, copy, 0)[1] < 4:
        assert time.monotonic() < deadline, watermarks(bootstrap, copy, 0)
        time.sleep(0.1)
    results = store.restore(spark, copy)
    assert results[0].records == 5
    assert [r[0] for r in restored(bootstrap, copy, 0, store.topic)] == list(range(5))


def add_ingress(store: Archive, group: str, checkpoints: str, sources: str = "") -> None:
    """An ``[ingress]`` section writing into the restore's default region, in the
    archive's config (reloaded)."""
    store.path.write_text(
        store.path.read_text()
        + f"""
[ingress]
region = "{DESTINATION}"
group_id = "{group}"
checkpoint_topic = "{checkpoints}"
checkpoint_partitions = 2
{sources}"""
    )
    store.config = load_config(store.path)


def test_a_restore_beside_ingress_is_refused_and_append_waits_for_ingress_to_stop(
    archive, spark, local_stack, unique
):
    # Ingress replays the topic into its destination in the region restore defaults to.
    store = archive()
    store.put(0, segment_batch(0, 10), 0, 9)
    store.describe(1, {0: 0})
    group, checkpoints = unique("ingress"), unique("checkpoints")
    add_ingress(store, group, checkpoints)
    kafka = {"bootstrap.servers": local_stack.bootstrap(DESTINATION)}
    create_kafka_topic(kafka["bootstrap.servers"], checkpoints, 2)
    create_kafka_topic(kafka["bootstrap.servers"], store.topic, 1)
    target = WriteTarget(SourcePartition(SOURCE, store.topic, 0), store.topic, 0)
    writer = PartitionWriter(
        kafka, group, target, CheckpointStore(kafka, checkpoints, 2), kind="ingress"
    )
    writer.open()
    writer.write(pa.Table.from_batches([segment_batch(0, 5)]))
    writer.commit(5)
    writer.close()

    # The refusal docs/operations/restore.md describes, with restore's defaults (the same
    # topic name).
    with pytest.raises(RestoreError, match=r"that no restore of .* wrote, written by ingress"):
        store.restore(spark, store.topic)

    # --append while ingress runs (its group has a member): refused, nothing written.
    member = group_member(kafka["bootstrap.servers"], group, checkpoints)
    try:
        with pytest.raises(RestoreError, match=f"being written by ingress \\(group '{group}'"):
            store.restore(spark, store.topic, append=True)
    finally:
        member.close()
    assert len(read_partition(kafka["bootstrap.servers"], store.topic, 0)) == 5

    # Ingress stopped: --append continues after what ingress wrote, nothing twice.
    results = store.restore(spark, store.topic, append=True)
    assert results[0].records == 5
    offsets = [
        provenance.source_offset(list(r[5]), target.source)
        for r in read_partition(kafka["bootstrap.servers"], store.topic, 0)
    ]
    assert offsets == list(range(10))


def test_a_restore_beside_the_relay_is_refused_even_into_a_partition_it_emptied(
    archive, spark, local_stack, unique
):
    """The relay writes the topic from another upstream topic (its checkpoint key is not
    restore's); retention (here DeleteRecords to the end) has emptied the partition. While
    the relay's group has members, a restore, with or without --append, is refused: it
    would write beside the relay under another transactional id. Once the relay stopped,
    the restore writes every archived offset once."""
    store = five_records(archive)
    group, checkpoints, upstream = unique("relay"), unique("checkpoints"), unique("upstream")
    store.path.write_text(
        store.path.read_text()
        + f"""
[relay]
sources = ["{SOURCE}"]
destination = "{DESTINATION}"
group_id = "{group}"
checkpoint_topic = "{checkpoints}"
checkpoint_partitions = 2
[[relay.topics]]
source_topic = "{upstream}"
destination_topic = "{store.topic}"
"""
    )
    store.config = load_config(store.path)
    bootstrap = local_stack.bootstrap(DESTINATION)
    kafka = {"bootstrap.servers": bootstrap}
    create_kafka_topic(bootstrap, checkpoints, 2)
    create_kafka_topic(bootstrap, store.topic, 1)
    relayed = WriteTarget(SourcePartition(SOURCE, upstream, 0), store.topic, 0)
    writer = PartitionWriter(
        kafka, group, relayed, CheckpointStore(kafka, checkpoints, 2), kind="relay"
    )
    writer.open()
    writer.write(pa.Table.from_batches([segment_batch(0, 3)]))
    writer.commit(3)
    writer.close()
    # Three records and the commit marker, which the coordinator writes after the commit
    # returned: DeleteRecords up to the end once it is there.
    deadline = time.monotonic() + 30
    while watermarks(bootstrap, store.topic, 0)[1] < 4:
        assert time.monotonic() < deadline, "the commit marker was not written"
        time.sleep(0.1)
    emptied = TopicPartition(store.topic, 0, 4)
    admin = local_stack.admin(DESTINATION)  # alive until the future resolves
    admin.delete_records([emptied])[emptied].result(timeout=30)
    low, high = watermarks(bootstrap, store.topic, 0)
    assert low == high == 4, (low, high)

    member = group_member(bootstrap, group, checkpoints)
    try:
        for append in (False, True):
            with pytest.raises(RestoreError, match=f"being written by relay \\(group '{group}'"):
                store.restore(spark, store.topic, append=append)
    finally:
        member.close()
    assert watermarks(bootstrap, store.topic, 0) == (low, high), "the restore wrote"

    assert store.restore(spark, store.topic)[0].records == 5
    restored_offsets = [
        provenance.source_offset(list(r[5]), SourcePartition(SOURCE, store.topic, 0))
        for r in read_partition(bootstrap, store.topic, 0)
    ]
    assert restored_offsets == list(range(5))


def test_a_restore_beside_ingress_is_refused_before_ingress_wrote_anything(
    archive, spark, local_stack, unique
):
    """Ingress replays the archived topic into the restore's destination and has not
    written it yet (no checkpoint, an empty topic): its group's members own the partition,
    and a restore beside them is refused."""
    store = five_records(archive)
    group, checkpoints = unique("ingress"), unique("checkpoints")
    add_ingress(
        store,
        group,
        checkpoints,
        f"""[[ingress.sources]]
region = "{SOURCE}"
topic_pattern = "{store.topic.rsplit("-", 1)[0]}-[0-9]+"
destination_topic = "{{topic}}"
""",
    )
    bootstrap = local_stack.bootstrap(DESTINATION)
    create_kafka_topic(bootstrap, checkpoints, 2)
    create_kafka_topic(bootstrap, store.topic, 1)
    member = group_member(bootstrap, group, checkpoints)
    try:
        with pytest.raises(RestoreError, match=f"being written by ingress \\(group '{group}'"):
            store.restore(spark, store.topic)
    finally:
        member.close()
    assert watermarks(bootstrap, store.topic, 0) == (0, 0), "the restore wrote"


def test_a_restore_into_a_topic_deleted_and_created_again_restores_it_whole(
    archive, spark, local_stack, unique
):
    from tests.fixtures.relay import recreate_topic

    store = archive()
    store.put(0, segment_batch(0, 20), 0, 19)
    store.describe(1, {0: 0})
    copy = unique("copy")
    assert store.restore(spark, copy)[0].records == 20
    recreate_topic(local_stack.bootstrap(DESTINATION), copy, 1)  # deleted by mistake
    assert store.restore(spark, copy)[0].records == 20
    named = provenance.SourcePartition(SOURCE, store.topic, 0)
    copied = read_partition(local_stack.bootstrap(DESTINATION), copy, 0)
    assert [provenance.source_offset(list(r[5]), named) for r in copied] == list(range(20))


def restored_so_far(local_stack, topic: str, partitions: int) -> int:
    """The destination's high watermarks summed: a quick, rough count (0 while the topic
    is unknown)."""
    consumer = Consumer({"bootstrap.servers": local_stack.bootstrap(DESTINATION), "group.id": "w"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(partitions)
        )
    except KafkaException:
        return 0
    finally:
        consumer.close()


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator", *args], capture_output=True, text=True, timeout=timeout
    )


def restore_command(store, copy: str, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "replicator",
        "restore",
        "--config",
        str(store.path),
        "--topic",
        store.topic,
        "--from-region",
        SOURCE,
        "--into-region",
        DESTINATION,
        "--into-topic",
        copy,
        *args,
    ]


def test_a_restore_killed_midway_completes_exactly_when_run_again(
    archive, local_stack, unique, tmp_path
):
    store = archive()
    partitions, segments, per_segment = 4, 8, 5000
    for p in range(partitions):
        for s in range(segments):
            start = s * per_segment
            store.put(p, plain(per_segment, start, value_size=200), start, start + per_segment - 1)
    store.describe(partitions, {p: 0 for p in range(partitions)})
    copy = unique("killed")
    total = partitions * segments * per_segment
    log = tmp_path / "restore.log"
    process = subprocess.Popen(
        restore_command(store, copy, "--master", "local[2]"),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while restored_so_far(local_stack, copy, partitions) < total // 10:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        kill_group(process)
    killed_at = restored_so_far(local_stack, copy, partitions)
    assert killed_at < total, "the restore finished before it was killed"
    again = subprocess.run(
        restore_command(store, copy, "--master", "local[2]"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    for p in range(partitions):
        offsets = [
            o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)
        ]
        assert offsets == list(range(segments * per_segment)), f"partition {p}"
    # Progress: the rerun starts where the killed run left off and ends at 100%.
    lines = [line for line in again.stdout.splitlines() if line.startswith(f"{store.topic} [")]
    assert lines and "100% offsets 160,000/160,000" in lines[-1], again.stdout[-2000:]
    assert "  0%" not in lines[0], lines[0]
    assert f"{partitions}/{partitions} complete" in again.stdout


def test_restore_runs_on_a_standalone_cluster(
    archive, local_stack, unique, standalone_cluster, tmp_path
):
    store = archive()
    for p in range(2):
        store.put(p, segment_batch(0, 50), 0, 49)
    store.describe(2, {0: 0, 1: 0})
    copy = unique("cluster")
    result = subprocess.run(
        restore_command(store, copy, "--master", standalone_cluster),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "2/2 complete" in result.stdout
    for p in range(2):
        offsets = [
            o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)
        ]
        assert offsets == list(range(50))
    assert list((tmp_path / "work").glob("app-*/*/stderr")), "no executor ran on the worker"


def test_a_corrupt_segment_halts_its_partition_naming_the_key(archive, spark, local_stack, unique):
    store = archive()
    for p in range(2):
        store.put(p, segment_batch(0, 10), 0, 9)
    broken = store.put(1, segment_batch(10, 10), 10, 19).to_s3_key("data")
    local_stack.s3().put_object(Bucket=store.store.bucket, Key=broken, Body=b"not parquet" * 100)
    store.put(0, segment_batch(10, 10), 10, 19)
    store.describe(2, {0: 0, 1: 0})
    copy = unique("corrupt")
    results = store.restore(spark, copy)
    assert [(r.partition, r.status) for r in results] == [(0, "complete"), (1, "halted")]
    assert broken in results[1].message
    offsets = [
        [o for o, *_ in restored(local_stack.bootstrap(DESTINATION), copy, p, store.topic)]
        for p in range(2)
    ]
    assert offsets == [list(range(20)), list(range(10))]
