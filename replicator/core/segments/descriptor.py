"""The topic descriptor's format: ``{prefix}/{region}/{topic}/_topic.json``. Pure.

Egress writes it (:mod:`egress.topic_descriptor`); ingress and restore read it to create a
destination topic alike and to know where each partition's export started.
"""

from __future__ import annotations

from typing import Any

from replicator.core.kafka.topics import copied_configs

DESCRIPTOR_VERSION = 1


def describe(
    topic: str,
    partitions: int,
    configs: dict[str, str],
    region: str,
    export_start: dict[int, int] | None = None,
) -> dict[str, Any]:
    return {
        "format_version": DESCRIPTOR_VERSION,
        "region": region,
        "topic": topic,
        "partitions": partitions,
        "configs": copied_configs(configs),
        "export_start": {str(p): o for p, o in sorted((export_start or {}).items())},
    }


def export_starts(descriptor: Any) -> dict[int, int] | None:
    """The export start offsets a descriptor records per partition; None for descriptors
    of egress versions that did not record them. Pure."""
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("export_start"), dict):
        return None
    return {
        int(p): o
        for p, o in descriptor["export_start"].items()
        if isinstance(p, str) and p.isdigit() and isinstance(o, int) and o >= 0
    }
