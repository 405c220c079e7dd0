"""Translating and committing whole groups: what ingress's offset sync, relay and
``replicator failover`` share.

Order: translate every (group, partition) first — one resume-point read per destination
partition however many groups commit there — then commit per group, forward only, and
only where the group has no members (checked again by the commit itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.destination import OffsetTranslator
from replicator.core.groups.errors import GroupActiveError
from replicator.core.groups.translation import Translation, replayed_from
from replicator.core.kafka.checkpoints import WriteTarget
from replicator.core.kafka.provenance import SourcePartition


@dataclass(frozen=True)
class GroupPartition:
    """One group's position on one partition, in the source and in the destination."""

    group: str
    target: WriteTarget
    translation: Translation


Targets = Callable[[SourcePartition], "WriteTarget | None"]
"""Where a source partition is written (None: not replicated, or not translatable)."""


def translate_groups(
    translator: OffsetTranslator,
    committed: Iterable[tuple[str, SourcePartition, int]],
    targets: Targets,
) -> list[GroupPartition]:
    """``committed``: (group, source partition, committed source offset)."""
    wanted: dict[WriteTarget, list[tuple[str, int]]] = {}
    for group, source, offset in committed:
        target = targets(source)
        if target is not None:
            wanted.setdefault(target, []).append((group, offset))
    rows = []
    for target, entries in sorted(wanted.items(), key=lambda item: _order(item[0])):
        translations = translator.translate(target, [offset for _, offset in entries])
        rows += [
            GroupPartition(group, target, translation)
            for (group, _), translation in zip(entries, translations, strict=True)
        ]
    return sorted(rows, key=lambda r: (r.group, *_order(r.target)))


def with_replay_starts(
    rows: Iterable[GroupPartition], starts: Callable[[WriteTarget], int | None]
) -> list[GroupPartition]:
    """``rows`` knowing the source offset each target's replay began at (None: not
    known): a group committed where no record preceded the first one replicated is exact
    (:func:`~replicator.core.groups.translation.replayed_from`)."""
    return [
        replace(row, translation=replayed_from(row.translation, starts(row.target))) for row in rows
    ]


def destination_offsets(rows: Iterable[GroupPartition]) -> dict[tuple[str, int], int]:
    """The offsets to commit for one group's rows, by destination topic and partition."""
    return {
        (r.target.destination_topic, r.target.destination_partition): (
            r.translation.destination_offset
        )
        for r in rows
    }


def commit_groups(admin: GroupAdmin, rows: Iterable[GroupPartition]) -> dict[str, int | None]:
    """Commit each group's translated offsets, forward only. Per group: the number of
    partitions moved, or None when the group has members (nothing of it is moved)."""
    per_group: dict[str, list[GroupPartition]] = {}
    for row in rows:
        per_group.setdefault(row.group, []).append(row)
    moved: dict[str, int | None] = {}
    for group, group_rows in sorted(per_group.items()):
        try:
            moved[group] = len(admin.commit_forward(group, destination_offsets(group_rows)))
        except GroupActiveError:
            moved[group] = None
    return moved


def _order(target: WriteTarget) -> tuple[str, int, str]:
    return (target.destination_topic, target.destination_partition, target.source.topic)
