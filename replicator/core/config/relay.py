"""The direct Kafka-to-Kafka relay (``[relay]``): its upstreams (one, or identical ones
it fails over between), its destination, the topics it relays (``[[relay.topics]]``,
each with its destination and filters), its checkpoint and assignment topics, and the
consumer groups and ACLs it copies.

That every cluster it names is defined, that no topic is relayed into itself and that
no two topics share a destination are checked at load
(:mod:`replicator.core.config.loader`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, PositiveInt, model_validator

from replicator.core.config._common import (
    AS_DURATION,
    RegionName,
    TopicName,
    _host,
    _Model,
    _regex,
)
from replicator.core.config.filters import FilterSpec


class RelayTopic(_Model):
    source_topic: TopicName
    """The upstream topic to relay."""
    destination_topic: TopicName | None = None
    """Defaults to the source topic's name (not allowed where a source is the destination)."""
    destination_partition: Annotated[int, Field(ge=0)] | None = None
    """Every source partition into this one (order kept per source partition); by default
    each source partition into the destination partition of the same number."""
    filters: list[FilterSpec] = Field(default_factory=list)
    """Record filters, applied in order, before records are relayed."""

    @property
    def destination(self) -> str:
        return self.destination_topic or self.source_topic


class RelayConfig(_Model):
    mode: Literal["single", "failover"] = "single"
    """``single``: the first source only; ``failover``: identical upstreams, switched between."""
    sources: list[RegionName] = Field(min_length=1)
    """Upstream clusters, in order of preference; ``single`` uses the first. In
    ``failover`` they must be identical: the same records at the same offsets."""
    destination: RegionName
    """The cluster the relay writes into."""
    lag_threshold: PositiveInt = 10_000
    """Records the current upstream may trail the most advanced healthy one by."""
    health_check_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 1.0
    """How often each upstream is asked for metadata and end offsets."""
    checkpoint_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 0.2
    """Longest a transaction (records plus their checkpoint) stays open."""
    group_id: str = Field(default="replicator-relay", min_length=1)
    """Consumer group of the relay instances; also the writers' transactional id prefix."""
    checkpoint_topic: TopicName = "replicator.checkpoint.relay"
    """The compacted topic of the relay's checkpoints (and its identity): its own, which
    only the relay's user may write. The default was ``replicator.checkpoint`` before
    checkpoint topics were per service: see docs/operations/deploying.md, upgrading."""
    checkpoint_partitions: PositiveInt = 8
    """Partitions of ``checkpoint_topic`` (must not change once created)."""
    assignment_topic: TopicName = "replicator.relay.assignments"
    """The topic whose partitions the group assigns: the units of work placement."""
    assignment_partitions: PositiveInt = 16
    """Units of work placement, as ingress's events topic: each instance relays the source
    partitions hashed to the partitions of this topic the group assigns it."""
    start_from: Literal["earliest", "latest"] = "earliest"
    """Where a partition never relayed before starts."""
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Port of the Prometheus endpoint (and ``/healthz``, ``/readyz``); none when unset."""
    metrics_host: Annotated[str, AfterValidator(_host)] = "0.0.0.0"
    """Interface the metrics endpoint binds to (default: every interface)."""
    consumer_groups: list[Annotated[str, AfterValidator(_regex)]] = Field(default_factory=list)
    """Upstream consumer groups (regular expressions over whole ids) whose offsets are
    kept translated and committed in the destination, for failover."""
    group_sync_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 10.0
    """How often upstream consumer-group offsets are translated and committed."""
    sync_acls: bool = False
    """Copy the READ and DESCRIBE ACLs of the relayed topics, and of the consumer groups
    ``consumer_groups`` moves, from the upstream into the destination (``ALL`` as READ and
    DESCRIBE; WRITE never), so applications can fail over without an admin step. The
    relay's user then needs ALTER on the destination cluster: see docs/security.md."""
    acl_sync_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 60.0
    """How often, with ``sync_acls``, the upstream's ACLs are read and missing copies
    created."""
    stall_timeout: Annotated[float, AS_DURATION, Field(gt=0)] = 120.0
    """``/healthz`` fails when the assignment loop or the upstream checks have not come
    round their loops for this long."""
    topics: list[RelayTopic] = Field(min_length=1)
    """What to relay: one entry per upstream topic."""
    origin: RegionName = ""
    """The name provenance, checkpoint keys and work placement give the upstream offsets
    (identical upstreams share their offsets, so one name serves them all). Default: the
    first of ``sources``. The relay records it in its checkpoint topic and refuses to
    start under another one: set it to the recorded name when the list of sources is
    edited (a dead first upstream removed, preference reordered)."""

    @model_validator(mode="before")
    @classmethod
    def _default_origin(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("origin") and data.get("sources"):
            return {**data, "origin": data["sources"][0]}
        return data
