"""Which upstream a partition relays from, and whether two upstreams agree. Pure.

Failover assumes identical upstreams: the same topics with the same records at the same
offsets. A partition keeps its upstream while it is healthy and not too far behind; when
it fails, the next healthy one in the configured order takes over; when it trails the most
advanced healthy upstream by more than ``lag_threshold`` records (its log end against
theirs), that one takes over. Either way the relay resumes at its next source offset, so
nothing is skipped or written twice — after checking that the new upstream holds the
record it relayed last at the same offset (:func:`same_record`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

TopicPartitionKey = tuple[str, int]
SwitchReason = Literal["failure", "lag"]

TIMESTAMP_NONE = 0


@dataclass(frozen=True)
class UpstreamState:
    healthy: bool
    log_ends: Mapping[TopicPartitionKey, int] = field(default_factory=dict)
    """End offsets (read_committed: last stable) of the relayed partitions."""
    problem: str = ""


@dataclass(frozen=True)
class Choice:
    upstream: str | None
    """None: no upstream may be read from now (see ``waiting``)."""
    reason: SwitchReason | None = None
    """Why it differs from the current one (None: it does not, or there was none)."""
    waiting: str = ""
    """Why there is none: no healthy upstream, or none holding the next offset yet."""


def choose_upstream(
    current: str | None,
    order: Sequence[str],
    states: Mapping[str, UpstreamState],
    partition: TopicPartitionKey,
    lag_threshold: int,
    next_offset: int | None = None,
) -> Choice:
    """The upstream ``partition`` should relay from now. With ``next_offset`` (something
    was relayed): only an upstream whose log reaches it may be chosen: one that ends
    before it lacks the record relayed last (it fell behind, or is the one just left for
    lag), and reading it would be taken for upstreams that differ."""
    healthy = [name for name in order if name in states and states[name].healthy]
    if not healthy:
        return Choice(None, "failure" if current is not None else None, "no healthy upstream")
    # The current upstream is read from: its end in the last check may be older than
    # what was read since.
    holding = [n for n in healthy if n == current or _reaches(states[n], partition, next_offset)]
    if not holding:
        return Choice(
            None,
            "failure" if current is not None else None,
            f"no healthy upstream holds offset {(next_offset or 0) - 1} yet",
        )
    healthy = holding
    if current is None:
        return Choice(healthy[0])
    if current not in healthy:
        return Choice(healthy[0], "failure")
    ends = {name: states[name].log_ends.get(partition) for name in healthy}
    known = {name: end for name, end in ends.items() if end is not None}
    mine = known.get(current)
    if mine is None or not known:
        return Choice(current)
    best = max(known.values())
    if best - mine > lag_threshold:
        leader = next(name for name in healthy if known.get(name) == best)
        return Choice(leader, "lag")
    return Choice(current)


def _reaches(state: UpstreamState, partition: TopicPartitionKey, next_offset: int | None) -> bool:
    """Whether the upstream's log reaches ``next_offset`` (unknown end: assumed)."""
    end = state.log_ends.get(partition)
    return next_offset is None or end is None or end >= next_offset


@dataclass(frozen=True)
class RecordRef:
    """What identifies a relayed record on another upstream: its offset, and digests of
    its key and value, and its timestamp where the source set one."""

    offset: int
    key_digest: bytes
    value_digest: bytes
    timestamp: int | None


def _digest(data: bytes | None) -> bytes:
    if data is None:
        return b"null"
    return hashlib.blake2b(data, digest_size=16).digest()


def record_ref(
    offset: int, key: bytes | None, value: bytes | None, timestamp_type: int, timestamp: int
) -> RecordRef:
    stamp = None if timestamp_type == TIMESTAMP_NONE else timestamp
    return RecordRef(offset, _digest(key), _digest(value), stamp)


def last_record(records: pa.RecordBatch) -> RecordRef:
    """The :class:`RecordRef` of the last of ``records`` (segment schema, not empty). Pure."""
    last = records.slice(records.num_rows - 1)
    stamp = last.column("timestamp")[0].value  # milliseconds, as the source gave them
    return record_ref(
        last.column("offset")[0].as_py(),
        last.column("key")[0].as_py(),
        last.column("value")[0].as_py(),
        last.column("timestamp_type")[0].as_py(),
        stamp,
    )


def same_record(ref: RecordRef, other: RecordRef) -> bool:
    """Whether ``other`` (read from another upstream) is the record ``ref`` describes.
    A timestamp is compared only when both records carry one."""
    if (ref.offset, ref.key_digest, ref.value_digest) != (
        other.offset,
        other.key_digest,
        other.value_digest,
    ):
        return False
    return ref.timestamp is None or other.timestamp is None or ref.timestamp == other.timestamp


def backoff(attempt: int, base: float = 0.5, cap: float = 10.0) -> float:
    """Seconds to wait before retry ``attempt`` (0-based) while no upstream is healthy."""
    return min(cap, base * 2**attempt)


def grown_partition_counts(
    known: Mapping[str, int], order: Sequence[str], states: Mapping[str, UpstreamState]
) -> dict[str, int]:
    """The relayed topics that have more partitions now than ``known``, with their new
    count, as the first healthy upstream in ``order`` reports them (its last health check
    lists every partition's end). Empty when nothing grew or no upstream is healthy."""
    for name in order:
        state = states.get(name)
        if state is None or not state.healthy:
            continue
        counts: dict[str, int] = {}
        for topic, partition in state.log_ends:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        return {t: n for t, n in sorted(counts.items()) if n > known.get(t, n)}
    return {}


def stop_offsets(
    partitions: Mapping[str, int], order: Sequence[str], states: Mapping[str, UpstreamState]
) -> tuple[str, dict[TopicPartitionKey, int]] | None:
    """For ``--stop-at-end``: the first healthy upstream in ``order`` whose last check gave
    the end offset of every relayed partition (``partitions``: topic -> count), with those
    ends; None while none has. A worker without a stop offset would never be done."""
    wanted = [(t, p) for t, n in sorted(partitions.items()) for p in range(n)]
    for name in order:
        state = states.get(name)
        if state is None or not state.healthy:
            continue
        if all(tp in state.log_ends for tp in wanted):
            return name, {tp: state.log_ends[tp] for tp in wanted}
    return None
