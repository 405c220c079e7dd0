"""How long a partition worker waits for a missing segment. Pure functions.

Which segment comes next is :mod:`replicator.core.segments.selection`; this module holds
what is ingress's own: the late-segment clock, and the back-off while offsets are missing
and later segments exist.

The clock is fed steps of the *listing* only: a segment event names an object that need
not exist (anyone who can send to the notification queue can announce any key), so the
worker looks at the listing before it takes a gap as real (see
:mod:`ingress.worker`).
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.core.segments.selection import Gap, ReadNext, Step


@dataclass(frozen=True)
class LateClock:
    """Offsets from ``first`` are missing while a later segment is listed, since
    ``since`` (a monotonic time)."""

    first: int
    since: float


def late_clock(clock: LateClock | None, step: Step, now: float) -> LateClock | None:
    """The late-segment clock after the listing's next ``step``.

    A gap starts it (at ``now``) and the same gap (the same first missing offset, however
    much of the range arrived since) keeps it running; so does a read that has not yet
    moved the next offset (the object may turn out gone, and the gap return). The listing
    showing no later segment (caught up) stops it: what made the gap is gone, and a gap
    seen again later is missed from then, never from an earlier clock. Each step after
    the next offset moved on meets a new gap, if any, with a new clock."""
    if isinstance(step, Gap):
        if clock is not None and clock.first == step.first:
            return clock
        return LateClock(step.first, now)
    if isinstance(step, ReadNext):
        return clock
    return None


def retry_intervals(retries: int, timeout: float) -> list[float]:
    """Waits between re-listings of a late segment: doubling, adding up to ``timeout``.

    With 5 retries over 1 h: 1m56s, 3m52s, 7m45s, 15m29s, 30m58s.
    """
    if retries <= 0:
        return [timeout]
    unit = timeout / (2**retries - 1)
    return [unit * 2**i for i in range(retries)]


def late_segment_wait(retries: int, timeout: float, waited: float) -> float | None:
    """How much longer to wait for a late segment before the next look (a re-listing),
    ``waited`` seconds after it was first missed; None once ``timeout`` has passed: the
    segment is lost.

    The looks fall at the ends of :func:`retry_intervals` counted from the first miss. An
    event (another segment of the partition arriving, a duplicate) brings a look earlier
    but moves none of them: the time given to a late segment is ``timeout`` however many
    events wake its partition, so an export going on past the gap cannot make it lost
    early (with ``on_lost_segment = "skip"``, skipped for good)."""
    deadline = 0.0
    for interval in retry_intervals(retries, timeout):
        deadline += interval
        if waited < deadline:
            return deadline - waited
    return None
