"""What a forged topic descriptor can no longer do to a live destination: lower its
retention or change its cleanup policy, grow it past the partitions the bucket holds
segments of (or past ``[ingress] max_partitions``), or start a new partition past the
segments listed."""

from __future__ import annotations

import logging

import pytest

from ingress.service import IngressService
from replicator.core.config import load_config
from replicator.core.kafka.topics import unsafe_changes
from tests.fixtures.ingress import destination_configs_now, provenance_offsets, segment_batch

WEEK_MS = str(7 * 86_400_000)
CENTURY_MS = str(100 * 365 * 86_400_000)


@pytest.mark.parametrize(
    ("current", "changes", "unsafe"),
    [
        ({"retention.ms": WEEK_MS}, {"retention.ms": "1"}, ["retention.ms"]),
        ({"retention.ms": WEEK_MS}, {"retention.ms": CENTURY_MS}, []),
        ({"retention.ms": WEEK_MS}, {"retention.ms": "-1"}, []),  # unlimited: more
        ({"retention.ms": "-1"}, {"retention.ms": CENTURY_MS}, ["retention.ms"]),
        ({"retention.bytes": "-1"}, {"retention.bytes": "0"}, ["retention.bytes"]),
        (
            {"delete.retention.ms": "86400000"},
            {"delete.retention.ms": "0"},
            ["delete.retention.ms"],
        ),
        (
            {"min.compaction.lag.ms": "60000"},
            {"min.compaction.lag.ms": "0"},
            ["min.compaction.lag.ms"],
        ),
        ({"cleanup.policy": "delete"}, {"cleanup.policy": "compact"}, ["cleanup.policy"]),
        ({"cleanup.policy": "compact"}, {"cleanup.policy": "compact,delete"}, ["cleanup.policy"]),
        ({}, {"retention.ms": "5"}, ["retention.ms"]),  # current unknown: not lowered blindly
        ({"max.message.bytes": "9"}, {"max.message.bytes": "1"}, []),  # deletes nothing
    ],
)
def test_changes_that_delete_data_sooner_are_unsafe(current, changes, unsafe):
    assert unsafe_changes(current, changes) == unsafe


def test_a_descriptor_cannot_lower_an_existing_destination_s_retention(
    local_stack, ingress_setup, caplog
):
    setup = ingress_setup()
    setup.put_descriptor(1, {"retention.ms": CENTURY_MS}, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    assert destination_configs_now(local_stack, setup.destination)["retention.ms"] == CENTURY_MS

    forged = {"retention.ms": "1", "retention.bytes": "0", "cleanup.policy": "compact"}
    setup.put_descriptor(1, forged, export_start={0: 0})
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    with caplog.at_level(logging.WARNING):
        assert service.run() == 0
    now = destination_configs_now(local_stack, setup.destination)
    assert (now["retention.ms"], now["retention.bytes"], now["cleanup.policy"]) == (
        CENTURY_MS,
        "-1",
        "delete",
    )
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for name in forged:
        assert any(f"keeps {name} = " in m for m in warned), warned
    refused = service.metrics.configs_refused
    assert refused.labels("us-east-1", setup.topic, "retention.ms")._value.get() == 1
    assert provenance_offsets(local_stack, setup, 0) == list(range(10))


def test_a_descriptor_grows_the_destination_only_to_partitions_with_segments(
    local_stack, ingress_setup, caplog
):
    setup = ingress_setup()
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0

    setup.put_descriptor(5_000, export_start={0: 0, 1: 0})  # the source has 2 in fact
    setup.put_segment(1, 0, 4, segment_batch(0, 5))
    with caplog.at_level(logging.WARNING):
        assert IngressService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    metadata = local_stack.admin("us-west-1").list_topics(setup.destination, timeout=30)
    assert len(metadata.topics[setup.destination].partitions) == 2
    assert provenance_offsets(local_stack, setup, 1) == list(range(5))
    assert any("5000 partitions" in r.getMessage() for r in caplog.records)

    # Past [ingress] max_partitions the source is not replayed at all.
    setup.put_descriptor(20_000, export_start={0: 0, 1: 0})
    setup.put_segment(0, 10, 19, segment_batch(10, 10))
    with caplog.at_level(logging.ERROR):
        IngressService(setup.config, stop_at_end=True, handle_signals=False).run()
    assert any(
        "20000 partitions" in r.getMessage() and "max_partitions" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]
    assert len(provenance_offsets(local_stack, setup, 0)) == 10


@pytest.mark.parametrize("on_lost", ["fail", "skip"])
def test_an_export_start_past_the_listed_segments_is_not_taken(
    local_stack, ingress_setup, caplog, on_lost
):
    setup = ingress_setup()
    text = setup.path.read_text().replace(
        "[[ingress.sources]]", f'on_lost_segment = "{on_lost}"\n[[ingress.sources]]', 1
    )
    setup.path.write_text(text)
    setup.config = load_config(setup.path)
    setup.put_descriptor(1, export_start={0: 5})  # forged: the export began at 0
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    with caplog.at_level(logging.ERROR):
        code = IngressService(setup.config, stop_at_end=True, handle_signals=False).run()
    if on_lost == "fail":
        assert code == 1 and provenance_offsets(local_stack, setup, 0) == []
    else:  # nothing skipped: every segment listed is replayed
        assert code == 0 and provenance_offsets(local_stack, setup, 0) == list(range(10))
    messages = [r.getMessage() for r in caplog.records]
    assert any("export began at offset 5" in m and "from offset 0" in m for m in messages), messages
