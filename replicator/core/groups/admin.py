"""Consumer groups of one cluster: which exist, their committed offsets, whether anyone is
in them, and committing translated offsets (I/O over the Kafka admin API).

Offsets are only ever moved forward, and only for groups without members: a running
consumer owns its position, and moving a group backwards would make it read records
twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from replicator.core.groups.errors import GroupActiveError
from replicator.core.kafka.clients import retry_while_moving
from replicator.core.kafka.errors import BrokerError

ADMIN_TIMEOUT = 30.0
NO_OFFSET = -1001
"""What the admin API reports for a partition without a committed offset."""
ACTIVE_STATES = frozenset(
    {
        ConsumerGroupState.STABLE,
        ConsumerGroupState.PREPARING_REBALANCING,
        ConsumerGroupState.COMPLETING_REBALANCING,
    }
)

TopicPartitionKey = tuple[str, int]
MEMBERS_JOINED = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.NON_EMPTY_GROUP,
    }
)
"""What a broker answers a commit made from outside a group that has members (they joined
after :meth:`GroupAdmin.is_active` looked): the group is active, not broken."""


def matching(groups: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """The groups whose whole id matches one of ``patterns``, sorted. Pure."""
    compiled = [re.compile(p) for p in patterns]
    return sorted(g for g in set(groups) if any(p.fullmatch(g) for p in compiled))


def forward_moves(
    current: dict[TopicPartitionKey, int], proposed: dict[TopicPartitionKey, int]
) -> dict[TopicPartitionKey, int]:
    """The proposed offsets that move a partition forward (or give it its first offset).
    Pure."""
    return {tp: o for tp, o in proposed.items() if current.get(tp, -1) < o}


class GroupAdmin:
    def __init__(self, kafka: dict[str, Any], where: str) -> None:
        """``where`` names the cluster in errors (its config name)."""
        self._admin = AdminClient(kafka)
        self._where = where

    def group_ids(self) -> list[str]:
        try:
            result = self._admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT).result(
                timeout=ADMIN_TIMEOUT
            )
        except KafkaException as exc:
            raise BrokerError.from_kafka(f"listing groups of {self._where}", exc.args[0]) from None
        return sorted(g.group_id for g in result.valid)

    def committed(
        self, group: str, partitions: Iterable[TopicPartitionKey] | None = None
    ) -> dict[TopicPartitionKey, int]:
        """``group``'s committed offsets (all of them, or of ``partitions``); partitions
        without one are left out."""
        request = ConsumerGroupTopicPartitions(
            group,
            None if partitions is None else [KafkaTopicPartition(t, p) for t, p in partitions],
        )

        def listed_offsets() -> list[Any]:
            future = self._admin.list_consumer_group_offsets(
                [request], request_timeout=ADMIN_TIMEOUT
            )[group]
            return future.result(timeout=ADMIN_TIMEOUT).topic_partitions or []

        try:
            listed = retry_while_moving(listed_offsets)
        except KafkaException as exc:
            raise BrokerError.from_kafka(
                f"reading offsets of group {group!r} on {self._where}", exc.args[0]
            ) from None
        except TimeoutError:  # the future's own wait: the cluster did not answer
            raise BrokerError(
                f"reading offsets of group {group!r} on {self._where}: no answer within "
                f"{ADMIN_TIMEOUT:.0f} s"
            ) from None
        return {(tp.topic, tp.partition): tp.offset for tp in listed if tp.offset >= 0}

    def is_active(self, group: str) -> bool:
        """Whether ``group`` has members (or is rebalancing)."""
        try:
            described = self._admin.describe_consumer_groups(
                [group], request_timeout=ADMIN_TIMEOUT
            )[group].result(timeout=ADMIN_TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False  # no such group here yet: nobody is in it
            raise BrokerError.from_kafka(
                f"describing group {group!r} on {self._where}", exc.args[0]
            ) from None
        return bool(described.members) or described.state in ACTIVE_STATES

    def _joined(self, group: str, error: Any) -> GroupActiveError:
        return GroupActiveError(
            f"group {group!r} gained members on {self._where} while its offsets were being "
            f"committed ({error.str()}): not moved (stop its consumers first)"
        )

    def commit_forward(
        self, group: str, offsets: dict[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int]:
        """Commit ``offsets`` for ``group`` where they move it forward; the offsets
        committed. Raises :class:`GroupActiveError` if the group has members."""
        if self.is_active(group):
            raise GroupActiveError(
                f"group {group!r} has active members on {self._where}: its offsets are "
                "not moved (stop its consumers first)"
            )
        moves = forward_moves(self.committed(group, offsets), offsets)
        if not moves:
            return {}
        request = ConsumerGroupTopicPartitions(
            group, [KafkaTopicPartition(t, p, o) for (t, p), o in sorted(moves.items())]
        )
        try:
            result = self._admin.alter_consumer_group_offsets(
                [request], request_timeout=ADMIN_TIMEOUT
            )[group].result(timeout=ADMIN_TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() in MEMBERS_JOINED:
                raise self._joined(group, exc.args[0]) from None
            raise BrokerError.from_kafka(
                f"committing offsets of group {group!r} on {self._where}", exc.args[0]
            ) from None
        for tp in result.topic_partitions or []:
            if tp.error is not None and tp.error.code() in MEMBERS_JOINED:
                raise self._joined(group, tp.error)
            if tp.error is not None:
                raise BrokerError.from_kafka(
                    f"committing {tp.topic} partition {tp.partition} of group {group!r} "
                    f"on {self._where}",
                    tp.error,
                )
        return moves
