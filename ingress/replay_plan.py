"""How long a partition worker waits for a missing segment. Pure functions.

Which segment comes next is :mod:`replicator.core.segments.selection`; this module holds
what is ingress's own: the back-off while offsets are missing and later segments exist.
"""

from __future__ import annotations


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
