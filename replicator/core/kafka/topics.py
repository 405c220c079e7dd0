"""Destination topics: created like their source, kept like it, or checked against it.

A destination gets the source's partition count and the configs that describe its data
(retention, compaction, message size); configs that describe the source cluster's
hardware or placement are not copied. Two are adapted rather than copied
(:func:`destination_configs`): ``message.timestamp.type`` is always CreateTime (a
LogAppendTime destination would overwrite every source timestamp with the time of the
replay), and ``max.message.bytes`` leaves room for records the source held compressed,
which the writer produces uncompressed, and for the provenance header.

While the replicator runs, copied configs follow changes at the source
(:func:`sync_configs`), and a destination the replicator already writes grows with its
source's partitions. A destination that exists with fewer partitions and holds nothing of
this source is refused before anything is produced: adding partitions to someone else's
topic would move their keys.

Configs come from a topic descriptor, which anyone who can write to the bucket can write:
a change that would delete data of an existing destination sooner (a lower
``retention.ms``, ``retention.bytes``, ``delete.retention.ms``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms`` or ``min.cleanable.dirty.ratio``; another ``cleanup.policy``)
is never made automatically (:func:`unsafe_changes`): it is logged as a WARNING naming the
config and left to an operator. Raising them, and every other copied config, still follows
the source.

A destination created from a descriptor gets the same floors (:func:`new_topic_configs`):
it is created as if it existed with Kafka's defaults (:data:`NEW_TOPIC_FLOORS`), which a
descriptor may raise but never lower; a refused ``cleanup.policy`` (compaction) makes the
topic keep everything instead (unlimited retention: a superset of what compaction keeps).
Each refusal is a WARNING naming the topic and the config; an operator who means it sets
it by hand. (The relay copies configs from the source cluster itself, not from a bucket,
and takes them as they are.)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from replicator.core.kafka.clients import await_leaders, ensure_topic, refuse_if_unauthorized
from replicator.core.kafka.errors import BrokerError, DestinationTopicError

log = logging.getLogger(__name__)

COPIED_CONFIGS = (
    # An allow-list, where MirrorMaker 2 copies every config but an exclusion list
    # (DefaultConfigPropertyFilter: min.insync.replicas, unclean.leader.election.enable,
    # the replication throttles, message.timestamp.type and its difference limit). MM2 reads
    # configs from the source cluster, which it trusts; these come from a topic descriptor,
    # which anyone who can write to the bucket can forge. An exclusion list would let a
    # forger set every config it misses, and each one a broker version adds (segment.ms=1,
    # local.retention.ms, remote.storage.enable, file.delete.delay.ms, placement and quota
    # configs). MM2's exclusions themselves describe the source cluster (durability,
    # elections, throttles), not the data, and are left out here as well. What is copied:
    # the configs that describe the data, each value checked
    # (replicator.core.segments.descriptor) and the ones that delete data kept to floors.
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "max.message.bytes",
    "message.timestamp.type",
    "compression.type",
)


ADMIN_TIMEOUT = 30.0
DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
"""Kafka's default ``max.message.bytes``."""
UNCOMPRESSED_RATIO = 8
"""Room for records compressed up to 8:1 in the source (the writer does not compress)."""
PROVENANCE_ROOM = 1024**2
"""Room for the provenance headers of a batch."""
MAX_DESTINATION_MESSAGE_BYTES = 64 * 1024**2
"""Never more: brokers refuse requests over ``socket.request.max.bytes`` (100 MiB)."""


def copied_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """The configs a destination inherits from its source (the allow-list above)."""
    return {k: str(configs[k]) for k in COPIED_CONFIGS if k in configs}


def destination_configs(source_configs: Mapping[str, object]) -> dict[str, str]:
    """The configs a destination topic gets from its source's (see the module docstring).
    Pure."""
    configs = copied_configs(source_configs)
    configs["message.timestamp.type"] = "CreateTime"
    try:
        source_limit = int(configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
    except ValueError:
        source_limit = DEFAULT_MAX_MESSAGE_BYTES
    configs["max.message.bytes"] = str(
        min(MAX_DESTINATION_MESSAGE_BYTES, source_limit * UNCOMPRESSED_RATIO + PROVENANCE_ROOM)
    )
    return configs


def config_changes(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The ``wanted`` configs whose value differs from ``current``. Pure."""
    return {k: v for k, v in sorted(wanted.items()) if current.get(k) != v}


NEVER_LOWERED = (
    "retention.ms",
    "retention.bytes",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
)
"""Lowering any of these deletes data (or tombstones, or records a key's later record
replaces) sooner; -1 is unlimited where Kafka allows it."""
NEVER_CHANGED = ("cleanup.policy",)
"""``delete`` to ``compact`` removes every record but a key's last; the other way round
lets retention delete what compaction kept."""


def unsafe_changes(current: Mapping[str, str | None], changes: Mapping[str, str]) -> list[str]:
    """The names of ``changes`` that an existing topic must not get automatically (see the
    module docstring); a current value that cannot be read counts as unsafe. Pure."""
    return sorted(
        name
        for name, value in changes.items()
        if name in NEVER_CHANGED
        or (name in NEVER_LOWERED and not _at_least(value, current.get(name)))
    )


def _at_least(new: str, old: str | None) -> bool:
    """Whether limit ``new`` keeps at least what ``old`` keeps (-1: unlimited)."""
    new_value, old_value = _number(new), _number(old or "")
    if new_value is None or old_value is None:
        return False
    if old_value < 0:
        return new_value < 0
    return new_value < 0 or new_value >= old_value


def _number(text: str) -> int | float | None:
    """A config's value as a number (an integer exactly; a ratio as a float); None when
    it is none or not finite."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


NEW_TOPIC_FLOORS = {
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "delete.retention.ms": "86400000",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
}
"""Kafka's defaults of the configs that delete data: what a destination created from a
descriptor is treated as having, so that :func:`unsafe_changes` refuses lowering them as
it does for an existing topic (7 days' retention, no size limit, tombstones kept a day)."""
KEEP_EVERYTHING = {"retention.ms": "-1", "retention.bytes": "-1"}
"""Instead of a refused ``cleanup.policy``: compaction keeps a subset of everything."""


def new_topic_configs(source_configs: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """The configs to create a destination with from a descriptor's ``source_configs``
    (see the module docstring), and the names of those refused. Pure."""
    wanted = destination_configs(source_configs)
    refused = unsafe_changes(NEW_TOPIC_FLOORS, config_changes(NEW_TOPIC_FLOORS, wanted))
    configs = {**wanted, **{name: NEW_TOPIC_FLOORS[name] for name in refused}}
    if "cleanup.policy" in refused:
        configs.update(KEEP_EVERYTHING)
    return configs, refused


def prepare_destination(
    admin: AdminClient,
    topic: str,
    partitions: int,
    configs: Mapping[str, object],
    source: str,
    *,
    may_grow: Callable[[int], bool] = lambda _have: False,
    growth_limit: Callable[[], int] | None = None,
    floors: bool = False,
    created: Callable[[], None] = lambda: None,
) -> int:
    """Create ``topic`` with ``partitions`` and the destination configs of the source's
    ``configs`` when missing (with ``floors``, configs from a descriptor: no lower than
    :func:`new_topic_configs` allows; ``created()`` is called once it is). When it exists
    with fewer partitions: add them if ``may_grow(partitions it has)`` (the replicator
    already writes it), else raise :class:`DestinationTopicError`; growth stops at
    ``growth_limit()`` when given (the partitions the bucket holds segments of: a
    descriptor alone does not grow a live topic). ``source`` names where the records come
    from. Returns how many of the source's partitions the destination takes now."""
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT)
    existing = metadata.topics.get(topic)
    refuse_if_unauthorized(existing, topic)
    if existing is not None and existing.error is None:
        have = len(existing.partitions)
        if have >= partitions:
            return partitions
        if not may_grow(have):
            raise DestinationTopicError(
                f"destination topic {topic} has {have} partitions but "
                f"{source} needs {partitions}; add partitions to the destination "
                "(nothing was produced)"
            )
        target = partitions
        if growth_limit is not None and (limit := growth_limit()) < partitions:
            log.warning(
                "destination topic %s: the descriptor of %s names %d partitions, the bucket "
                "holds segments of %d; growing to those only (more as their segments arrive)",
                topic,
                source,
                partitions,
                limit,
            )
            target = limit
        if target > have:
            grow(admin, topic, have, target, source)
        return max(have, target)
    kept, refused = new_topic_configs(configs) if floors else (destination_configs(configs), [])
    if ensure_topic(admin, topic, partitions, kept):
        for name in refused:
            log.warning(
                "destination topic %s is created without %s = %s that the descriptor of %s "
                "asks for (it would delete data sooner); with %s = %s instead%s (set it by "
                "hand if meant)",
                topic,
                name,
                str(configs.get(name))[:40],
                source,
                name,
                kept[name],
                " and unlimited retention" if name == "cleanup.policy" else "",
            )
        log.info(
            "created destination topic %s for %s: %d partitions, configs %s",
            topic,
            source,
            partitions,
            kept,
        )
        created()
    return partitions


def grow(admin: AdminClient, topic: str, have: int, partitions: int, source: str) -> None:
    """Add partitions to ``topic`` so that it has ``partitions``."""
    futures = admin.create_partitions(
        [NewPartitions(topic, partitions)], request_timeout=ADMIN_TIMEOUT
    )
    try:
        futures[topic].result(timeout=ADMIN_TIMEOUT)
    except KafkaException as exc:
        error = exc.args[0]
        raise DestinationTopicError(
            f"destination topic {topic} has {have} partitions but {source} now has "
            f"{partitions}, and adding partitions failed: {error.str()}",
            code=error.code(),
        ) from None
    await_leaders(admin, topic, partitions, ADMIN_TIMEOUT)
    log.info(
        "destination topic %s grew from %d to %d partitions with %s",
        topic,
        have,
        partitions,
        source,
    )


def sync_configs(
    admin: AdminClient,
    topic: str,
    source_configs: Mapping[str, object],
    refused: Callable[[str], None] = lambda _name: None,
) -> dict[str, str]:
    """Set the destination configs of ``source_configs`` that ``topic`` does not have yet,
    except :func:`unsafe_changes` (each logged and passed to ``refused``); the configs
    changed."""
    resource = ConfigResource("topic", topic)
    try:
        described = admin.describe_configs([resource], request_timeout=ADMIN_TIMEOUT)[
            resource
        ].result(timeout=ADMIN_TIMEOUT)
    except KafkaException as exc:
        raise BrokerError.from_kafka(f"describing configs of {topic}", exc.args[0]) from None
    current = {name: entry.value for name, entry in described.items()}
    changes = config_changes(current, destination_configs(source_configs))
    for name in unsafe_changes(current, changes):
        log.warning(
            "destination topic %s keeps %s = %s: its source's descriptor asks for %s, which "
            "would delete data sooner; not changed automatically (set it by hand if meant)",
            topic,
            name,
            current.get(name),
            changes.pop(name)[:40],
        )
        refused(name)
    if not changes:
        return {}
    update = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in changes.items()
        ],
    )
    try:
        admin.incremental_alter_configs([update], request_timeout=ADMIN_TIMEOUT)[update].result(
            timeout=ADMIN_TIMEOUT
        )
    except KafkaException as exc:
        raise BrokerError.from_kafka(f"changing configs of {topic}", exc.args[0]) from None
    log.info("destination topic %s follows its source's configs: %s", topic, changes)
    return changes
