"""The replay from S3 into Kafka (``[ingress]``, in the destination region): the
sources it replays (``[[ingress.sources]]``, a topic or a pattern of a region, each with
its destination and filters), the segment-events and checkpoint topics, the writers and
the memory they may take, and the consumer-group offsets it keeps translated.

That each source's region is defined and has a bucket, that ingress's region has a
queue, and that no two sources share a destination are checked at load
(:mod:`replicator.core.config.loader`)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, PositiveInt, model_validator

from replicator.core.config._common import (
    AS_DURATION,
    Duration,
    RegionName,
    TopicName,
    _host,
    _Model,
    _regex,
)
from replicator.core.config.filters import FilterSpec
from replicator.core.segments.key import check_topic_name

TOPIC_PLACEHOLDER = "{topic}"


def _topic_or_unset(value: str) -> str:
    """A topic name, or ``""``: unset, in a source that names ``topic_pattern`` instead.
    The model writes that default when it is dumped, so it must read it back (the copy
    of the config each Spark process validates)."""
    return value if value == "" else check_topic_name(value)


def _destination_template(value: str) -> str:
    """A destination topic name, where ``{topic}`` stands for the source topic's name."""
    check_topic_name(value.replace(TOPIC_PLACEHOLDER, "t"))
    return value


class IngressSource(_Model):
    """One source topic of a region, or with ``topic_pattern`` every topic of the region
    whose whole name matches (found in the bucket, followed while ingress runs)."""

    region: RegionName
    """The region whose segments this source replays."""
    topic: Annotated[str, AfterValidator(_topic_or_unset)] = ""
    """The source topic's name (or ``topic_pattern``)."""
    topic_pattern: Annotated[str, AfterValidator(_regex)] | None = None
    """A regular expression over whole topic names, instead of ``topic``."""
    destination_topic: Annotated[str, AfterValidator(_destination_template)] | None = None
    """Defaults to the source topic's name; ``{topic}`` in it is replaced by the source
    topic's name (e.g. ``"{topic}.copy"``)."""
    filters: list[FilterSpec] = Field(default_factory=list)
    """Record filters, applied in order, before records are replayed."""
    first_segment_delay: Duration = 300.0
    """Old descriptors only: how long after the first segment a partition starts."""
    late_segment_retries: Annotated[int, Field(ge=0)] = 5
    """Timed looks for a missing segment, at doubling intervals from its first miss;
    an event in between adds a look without moving them."""
    lost_segment_timeout: Duration = 3600.0
    """How long a missing segment (or start) is waited for, from its first miss, before
    it is lost, however many events arrive meanwhile."""
    max_topics: PositiveInt = 100
    """With ``topic_pattern``: at most this many matching topics are replayed, those
    replayed already first, then by name; one past it is not, with an ERROR naming it
    (a source naming one topic ignores it).
    Anyone who can write to the bucket can make topic directories, each a destination
    topic and a worker per partition."""

    @model_validator(mode="after")
    def _check_topic(self) -> IngressSource:
        if bool(self.topic) == bool(self.topic_pattern):
            raise ValueError("name exactly one of topic and topic_pattern")
        template = self.destination_topic
        if self.topic_pattern and template is not None and TOPIC_PLACEHOLDER not in template:
            raise ValueError(
                f"destination_topic {template!r} of a topic_pattern must contain "
                f"{TOPIC_PLACEHOLDER} (every matching topic would go into one)"
            )
        return self

    @property
    def destination(self) -> str:
        """The destination topic (of a source naming one topic)."""
        return (self.destination_topic or TOPIC_PLACEHOLDER).replace(TOPIC_PLACEHOLDER, self.topic)

    def matches(self, topic: str) -> bool:
        if self.topic_pattern is None:
            return topic == self.topic
        return re.fullmatch(self.topic_pattern, topic) is not None

    def for_topic(self, topic: str) -> IngressSource:
        """This source for one topic it matches (itself for a source naming one topic).
        Raises ``ValueError`` when the rendered destination is no valid topic name."""
        if self.topic_pattern is None:
            return self
        concrete = self.model_copy(update={"topic": topic, "topic_pattern": None})
        check_topic_name(concrete.destination)
        return concrete


class IngressConfig(_Model):
    region: RegionName
    """The region ingress replays into (its cluster, bucket and queue)."""
    segment_events_topic: TopicName = "replicator.segmentevents"
    """The topic of segment events, also the unit of work placement."""
    segment_events_partitions: PositiveInt = 16
    """Units of work placement: each instance owns the source partitions hashed to the
    events-topic partitions Kafka assigns it."""
    segment_events_retention: Duration = 7 * 86400.0
    """Retention of the segment events topic."""
    checkpoint_topic: TopicName = "replicator.checkpoint.ingress"
    """The compacted topic of ingress's checkpoints: its own, which only ingress's user
    may write (a checkpoint is where ingress resumes). The default was
    ``replicator.checkpoint`` before checkpoint topics were per service: see
    docs/operations/deploying.md, upgrading."""
    checkpoint_partitions: PositiveInt = 8
    """Partitions of ``checkpoint_topic`` (must not change once created)."""
    group_id: str = Field(default="replicator-ingress", min_length=1)
    """Consumer group of the ingress instances; also the writers' transactional id prefix."""
    on_lost_segment: Literal["fail", "skip"] = "fail"
    """A segment that never arrives: halt the partition (``fail``) or skip its offsets."""
    relist_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 30.0
    """How often an idle partition re-lists its segments, in case an event was lost."""
    checkpoint_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 1.0
    """Ignored, kept so that existing files load: a transaction now covers at most one row
    group (it is committed before every read)."""
    transaction_timeout: Annotated[float, AS_DURATION, Field(gt=0)] = 60.0
    """``transaction.timeout.ms`` of the writers: a transaction open longer (a broker
    outage mid-transaction) is aborted by the coordinator; the worker then re-opens its
    writer and resumes."""
    read_concurrency: PositiveInt = 2
    """Segments opened (footers read and parsed) and row groups decoded and being produced
    at once, over all partitions of the instance. Each costs about three times the row
    group (8 MiB as egress writes them): this, not the number of partitions owned or
    ``max_open_writers``, bounds ingress memory. Replay is CPU-bound
    in one process, so more than the cores it has buys nothing (``processes`` uses the
    others)."""
    max_open_writers: PositiveInt = 32
    """Exactly-once writers open at once in one replay process (each a transactional
    producer: about 3.5 MiB and a few threads). A partition's writer is opened when it
    has segments to replay and closed when it has been caught up for
    ``writer_idle_close``, or at once when another partition waits for one; re-opening
    resumes from the destination as a restart does. Raise it when more partitions than
    this are busy at once in a process, and the memory budget allows."""
    writer_idle_close: Annotated[float, AS_DURATION, Field(gt=0)] = 60.0
    """A caught-up partition closes its writer after this long without segments."""
    processes: PositiveInt | None = None
    """Replay processes under one instance, each a member of the ingress group with its
    own writers and its own ``read_concurrency`` (memory is bounded per process). Unset:
    one per core this process may run on. Set it where the cores seen are not the cores
    granted (a container's CPU limit)."""
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    """Port of the Prometheus endpoint (and ``/healthz``, ``/readyz``); none when unset."""
    metrics_host: Annotated[str, AfterValidator(_host)] = "0.0.0.0"
    """Interface the metrics endpoint binds to (default: every interface)."""
    descriptor_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 30.0
    """How often topic descriptors are read again: partitions added to a source, sources
    that appear after start, config changes."""
    sync_group_offsets: bool = True
    """Keep the translated offsets of exported consumer groups committed in the
    destination (groups with members there are never moved; offsets never go back)."""
    group_sync_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 10.0
    """How often exported consumer-group offsets are translated and committed."""
    consumer_groups: list[Annotated[str, AfterValidator(_regex)]] = Field(default_factory=list)
    """Exported consumer groups (regular expressions over whole ids) whose offsets the sync
    commits in the destination, and that ``replicator failover`` reports and ``--apply``
    commits when no ``--group`` is named. None until named: anyone who can write to the
    bucket can write a group's offsets object, so only the groups named here are moved."""
    max_groups: PositiveInt = 1000
    """At most this many exported groups (those matching ``consumer_groups``, in id order)
    are read and synced per topic; more are left out with a warning (a bucket filled with
    forged groups costs at most this many reads a round)."""
    sync_acls: bool = False
    """Copy the READ and DESCRIBE ACLs that egress exported (``[egress] sync_acls``) onto
    the replayed topics' destinations, and onto the exported groups ``consumer_groups``
    names, creating only missing ones (LITERAL, WRITE never, nothing deleted), so that
    applications can fail over without an admin step. Ingress's user then needs ALTER on
    the destination cluster, and the objects should be signed: see docs/security.md."""
    acl_sync_interval: Annotated[float, AS_DURATION, Field(gt=0)] = 60.0
    """How often, with ``sync_acls``, the exported ACLs are read and missing copies
    created."""
    max_partitions: Annotated[int, Field(ge=1, le=100_000)] = 10_000
    """A topic descriptor naming more partitions than this is refused (its source is not
    replayed, with an error naming it): no destination is created or grown past it.
    Growth of an existing destination is further limited to the partitions that have
    segments in the bucket."""
    stall_timeout: Annotated[float, AS_DURATION, Field(gt=0)] = 180.0
    """``/healthz`` fails when the events loop, the SQS reader or the group sync has
    not come round its loop for this long (each loop's own waits are bounded well below)."""
    sources: list[IngressSource] = Field(default_factory=list)
    """What to replay: one entry per source topic or pattern."""

    def process_count(self) -> int:
        """``processes``, or the cores this process may run on."""
        return self.processes or len(os.sched_getaffinity(0))

    def match(self, region: str, topic: str) -> tuple[int, IngressSource] | None:
        """The source entry (its index and itself, for ``topic``) that ``region``/``topic``
        is replayed by: a source naming the topic wins over patterns, then the first
        pattern that matches."""
        named = [(i, s) for i, s in enumerate(self.sources) if s.region == region]
        for i, source in named:
            if source.topic_pattern is None and source.topic == topic:
                return i, source
        for i, source in named:
            if source.topic_pattern is not None and source.matches(topic):
                try:
                    return i, source.for_topic(topic)
                except ValueError:
                    return None
        return None

    def source(self, region: str, topic: str) -> IngressSource:
        found = self.match(region, topic)
        if found is None:
            raise KeyError(f"no ingress source {region}/{topic}")
        return found[1]
