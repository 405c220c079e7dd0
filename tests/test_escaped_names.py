"""Group ids and names from a bucket reach the operator's terminal and text logs escaped:
a group id holding ``%0A`` (a newline once decoded) or a terminal escape sequence can
neither forge a line nor rewrite the screen."""

from __future__ import annotations

import logging

from replicator.core.groups.plan import GroupPartition
from replicator.core.groups.sync import GroupOffsetSync
from replicator.core.groups.translation import Translation
from replicator.core.kafka.checkpoints import WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from replicator.failover import FailoverReport, GroupReadiness, PartitionReadiness
from replicator.failover import render as render_failover
from replicator.status import PartitionStatus
from replicator.status import render as render_status

EVIL = "app\n2026-01-01 00:00:00 INFO all groups ready\x1b[2J\x1b]0;pwned\x07"
SHOWN = "app\\n2026-01-01 00:00:00 INFO all groups ready\\x1b[2J\\x1b]0;pwned\\x07"


def _row(group: str) -> GroupPartition:
    source = SourcePartition("east", "orders", 0)
    return GroupPartition(
        group, WriteTarget(source, "orders", 0), Translation(5, 5, True, replayed_until=9)
    )


def test_failover_report_escapes_group_ids_and_reasons():
    report = FailoverReport(
        "west",
        [PartitionReadiness(SourcePartition("east", "orders", 0), "orders", halted=EVIL)],
        [GroupReadiness(EVIL, [_row(EVIL)]), GroupReadiness(EVIL + "2")],
        unreachable=[f"whether group {EVIL} has members"],
    )
    text = render_failover(report)
    assert SHOWN in text
    assert "\x1b" not in text and "\x07" not in text
    assert not any(line.startswith("2026-01-01") for line in text.splitlines())


def test_status_escapes_topic_names_and_halt_reasons():
    row = PartitionStatus("east", EVIL, 0, halted=EVIL)
    text = render_status([row])
    assert SHOWN in text
    assert "\x1b" not in text and len(text.splitlines()) == 2


class _Admin:
    def commit_forward(self, group, offsets):
        return offsets


def test_group_sync_logs_group_ids_escaped(caplog):
    sync = GroupOffsetSync(_Admin(), lambda: [_row(EVIL)], 1.0)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="replicator.core.groups.sync"):
        sync.sync_once()
    messages = [r.getMessage() for r in caplog.records]
    assert any(SHOWN in m for m in messages), messages
    assert not any("\n" in m or "\x1b" in m for m in messages), messages
