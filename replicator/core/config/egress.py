"""The export from Kafka to S3 (``[egress]``, a Spark job in the source region): which
topics, when a level-0 segment closes (``[egress.defaults]``, overridden per topic under
``[egress.topics]``), how the source is read, and the consumer groups whose offsets are
exported beside the segments for failover."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PositiveInt

from replicator.core.config._common import (
    AS_DURATION,
    AS_SIZE,
    Duration,
    RegionName,
    TopicName,
    _host,
    _Model,
    _regex,
)


class EgressTopicConfig(_Model):
    """When a level-0 segment of a topic closes; whichever limit is reached first.

    ``max_segment_bytes`` counts record bytes (key + value + header keys and values), not
    the compressed file size.
    """

    max_segment_messages: PositiveInt = 1_000_000
    """A segment closes after this many records."""
    max_segment_bytes: Annotated[int, AS_SIZE, Field(gt=0)] = 100 * 1024**2
    """A segment closes at this many bytes of records (``256MiB``)."""
    max_segment_age: Duration = 300.0
    """A segment closes when its first record is this old (``5m``): the latency floor."""


class EgressTopicOverrides(_Model):
    """A topic's table under ``[egress.topics]``: what it sets overrides ``[egress.defaults]``."""

    max_segment_messages: PositiveInt | None = None
    """This topic's ``max_segment_messages`` (default: ``[egress.defaults]``)."""
    max_segment_bytes: Annotated[int, AS_SIZE, Field(gt=0)] | None = None
    """This topic's ``max_segment_bytes`` (default: ``[egress.defaults]``)."""
    max_segment_age: Duration | None = None
    """This topic's ``max_segment_age`` (default: ``[egress.defaults]``)."""


class EgressConfig(_Model):
    region: RegionName
    """The region egress exports from (its cluster and bucket)."""
    checkpoint_location: str = ".replicator/egress-checkpoint"
    """Spark's checkpoint directory (local, or a Hadoop-compatible file system)."""
    state_dir: str = ".replicator/egress-state"
    """Where each egress run keeps, in a directory of its own, the driver-local statistics
    its processes share (metrics, size estimates, which partitions have a first segment)."""
    topics: dict[TopicName, EgressTopicOverrides] = Field(default_factory=dict)
    """Topics to export by name, each with optional segment limits of its own."""
    topic_pattern: Annotated[str, AfterValidator(_regex)] | None = None
    """Topics whose whole name matches are exported too, with the defaults' thresholds."""
    defaults: EgressTopicConfig = Field(default_factory=EgressTopicConfig)
    """Segment limits of every exported topic without its own."""
    group_id: str = Field(default="replicator-egress", min_length=1)
    """Consumer group whose committed offsets show egress progress to standard lag tools."""
    start_from: Literal["earliest", "latest"] = "earliest"
    """Where a partition with no committed offset and no exported segment starts."""
    on_data_loss: Literal["fail", "skip"] = "fail"
    """Offsets gone from the source before export: stop (``fail``) or mark them and go on."""
    isolation_level: Literal["read_committed", "read_uncommitted"] = "read_committed"
    """How the source is read: committed records only, or also open and aborted ones."""
    trigger_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 1.0
    """How often a streaming micro-batch starts."""
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Port of the Prometheus endpoint (and ``/healthz``, ``/readyz``); none when unset."""
    metrics_host: Annotated[str, AfterValidator(_host)] = "0.0.0.0"
    """Interface the metrics endpoint binds to (default: every interface)."""
    descriptor_interval: Duration = 60.0
    """How often topic descriptors (_topic.json) are checked for changes."""
    consumer_groups: list[Annotated[str, AfterValidator(_regex)]] = Field(default_factory=list)
    """Consumer groups (regular expressions over whole ids) whose committed offsets on the
    exported topics are exported beside the segments, for failover."""
    group_offsets_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 10.0
    """How often the offsets of ``consumer_groups`` are exported."""
    sync_acls: bool = False
    """Export the READ and DESCRIBE ACLs of each exported topic, and of the consumer groups
    whose offsets are exported, to ``_acls.json`` beside its descriptor (signed where the
    deployment signs), for ``[ingress] sync_acls`` to copy. The source's ACLs are read
    with DESCRIBE on the cluster, which egress holds already: see docs/security.md."""
    acl_export_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 60.0
    """How often, with ``sync_acls``, the source's ACLs are read and changed objects
    written."""
    skip_replicated: bool = False
    """Leave records that carry a ``replicator.source`` header out of the export (their
    offsets stay covered): two regions can then mirror each other's topics."""
    stall_timeout: Annotated[float, AS_DURATION, Field(gt=0)] = 600.0
    """``/healthz`` fails when the driver's loop has not come round for this long;
    ``/readyz`` while one trigger has run for longer. Longer than the longest batch (a
    catch-up after downtime)."""

    def thresholds(self, topic: str) -> EgressTopicConfig:
        """The segment limits for ``topic``: its own table over ``[egress.defaults]``."""
        overrides = self.topics.get(topic)
        if overrides is None:
            return self.defaults
        return self.defaults.model_copy(update=overrides.model_dump(exclude_none=True))
