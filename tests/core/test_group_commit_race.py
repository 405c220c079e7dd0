"""A group that gains members between the check that it has none and the commit of its
translated offsets: the broker refuses the commit, and that group is reported as not
moved while the other groups are committed (it used to end the whole round, and
``failover --apply`` with it)."""

from __future__ import annotations

from confluent_kafka import Producer

from replicator.core.groups.admin import GroupAdmin
from replicator.core.groups.plan import GroupPartition, commit_groups
from replicator.core.groups.translation import Translation
from replicator.core.kafka.checkpoints import WriteTarget
from replicator.core.kafka.provenance import SourcePartition
from tests.fixtures.independent import group_member
from tests.fixtures.relay import create_topic
from tests.fixtures.stack import DESTINATION


class CheckedTooEarly(GroupAdmin):
    """Every group looked empty when checked: members joined after the look."""

    def is_active(self, group: str) -> bool:
        return False


def row(group: str, topic: str) -> GroupPartition:
    target = WriteTarget(SourcePartition("us-east-1", topic, 0), topic, 0)
    return GroupPartition(group, target, Translation(5, 5, True, 10))


def test_a_group_that_gained_members_is_not_moved_and_the_others_are(local_stack, unique):
    bootstrap = local_stack.bootstrap(DESTINATION)
    topic, busy, idle = unique("t"), unique("busy"), unique("idle")
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce(topic, b"%d" % i, partition=0)
    producer.flush(30)
    member = group_member(bootstrap, busy, topic)
    try:
        admin = CheckedTooEarly({"bootstrap.servers": bootstrap}, DESTINATION)
        moved = commit_groups(admin, [row(busy, topic), row(idle, topic)])
    finally:
        member.close()
    assert moved == {busy: None, idle: 1}
    assert GroupAdmin({"bootstrap.servers": bootstrap}, DESTINATION).committed(
        idle, [(topic, 0)]
    ) == {(topic, 0): 5}
