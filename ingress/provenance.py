"""The provenance header written on every replayed record. Pure functions.

``replicator.source`` = ``region/topic/partition/offset`` of the source record. After any
crash the owner of a destination partition reads its tail and resumes after the last
source offset found there, so what is in the destination is the truth, whatever the
checkpoint says.
"""

from __future__ import annotations

HEADER = "replicator.source"


def encode(region: str, topic: str, partition: int, offset: int) -> bytes:
    return f"{region}/{topic}/{partition}/{offset}".encode()


def source_offset(
    headers: list[tuple[str, bytes | None]] | None, region: str, topic: str, partition: int
) -> int | None:
    """The source offset in ``headers`` if they name this source partition, else None."""
    if not headers:
        return None
    prefix = f"{region}/{topic}/{partition}/".encode()
    for name, value in reversed(headers):
        if name == HEADER and value is not None and value.startswith(prefix):
            tail = value[len(prefix) :]
            if tail.isdigit():
                return int(tail)
    return None
