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
