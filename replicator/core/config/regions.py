"""A named region or cluster (``[regions.NAME]``): its Kafka cluster, and the bucket and
queue of its region. Sections name regions by these names; that each name they use is
defined (and has the bucket or queue it needs) is checked at load
(:mod:`replicator.core.config.loader`)."""

from __future__ import annotations

from pydantic import Field

from replicator.core.config._common import _Model
from replicator.core.config.kafka import KafkaConfig


class RegionConfig(_Model):
    """A named cluster, and the bucket (and queue) of its region. A cluster that only a
    relay reads or writes may be named with Kafka settings alone."""

    bucket: str | None = Field(default=None, min_length=3, max_length=63)
    """The region's S3 bucket of segments (a relay-only cluster has none)."""
    kafka: KafkaConfig
    """How to reach the region's Kafka cluster."""
    sqs_queue: str | None = None
    """Queue receiving this region's bucket notifications (needed where ingress runs)."""
    aws_region: str | None = None
    """AWS region of the bucket and queue; defaults to the region's name."""
