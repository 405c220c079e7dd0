"""From a committed source offset to the destination offset. Pure.

A destination partition written from one source partition holds that partition's records
in source-offset order (filters may leave some out, brokers may show aborted ones; order
holds either way). ``probe(d)`` returns the first record at destination offset ``d`` or
later as ``(destination offset, source offset)``, or None when there is none before the
end. The predicate "the record found from ``d`` has source offset >= X (or there is
none)" is monotone in ``d``, so a binary search finds the first record with source offset
>= X in O(log n) probes, each a short read.

The answer for a committed source offset X (the next record the group reads):

- the destination offset of the first record with source offset >= X: the consumer reads
  that record first; nothing before it is read again and nothing after it skipped;
- when every replicated record is below X: the offset after the last one written. That is
  exact when the replay has passed X (the next record written has source offset >= X);
  otherwise the group is *behind*: translated as far as the destination goes;
- when X is below the source offset of the first record the destination holds: that
  record, but *behind*, not exact: the records before it were never replicated (the
  export began later) or are gone from the destination (its retention), and the group
  would skip them. (Records filtered out or compacted away before the first one look the
  same, so this errs on the side of saying "behind".) Exact after all when the caller
  knows where the replay began (:func:`replayed_from`): at or below X, and with the
  destination's log start never moved, every offset from X up to that first record was
  replayed and held none to write (a transaction marker, aborted records).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

Probe = Callable[[int], "tuple[int, int] | None"]
"""destination offset -> (destination offset, source offset) of the first record at or
after it, or None."""


@dataclass(frozen=True)
class Translation:
    source_offset: int
    """The group's committed source offset."""
    destination_offset: int
    """Where the group starts reading in the destination."""
    exact: bool
    """The destination holds everything up to ``source_offset``: starting at
    ``destination_offset`` reads exactly what was not read in the source."""
    replayed_until: int | None
    """Next source offset the destination will get (None: nothing replicated yet)."""
    missing_before: int = 0
    """Source offsets from the committed one up to the first record the destination holds
    (the group starts before it: see the module docstring)."""
    log_start: int = 0
    """The destination partition's first offset when translated (above 0: retention or
    DeleteRecords removed what was before it)."""

    @property
    def behind_records(self) -> int:
        """Source offsets between what is replicated and the committed offset, or that
        the destination does not hold before its first record."""
        if self.exact:
            return 0
        if self.missing_before:
            return self.missing_before
        return self.source_offset - (self.replayed_until or 0)


def first_at_or_after(source_offset: int, probe: Probe, low: int, end: int) -> int | None:
    """The destination offset of the first record in ``[low, end)`` whose source offset is
    at least ``source_offset``; None if there is none."""
    lo, hi = low, end
    while lo < hi:
        mid = (lo + hi) // 2
        found = probe(mid)
        if found is None or found[0] >= end or found[1] >= source_offset:
            hi = mid
        else:
            lo = max(mid + 1, found[0] + 1)
    found = probe(lo) if lo < end else None
    if found is None or found[0] >= end or found[1] < source_offset:
        return None
    return found[0]


def translate(
    source_offset: int,
    probe: Probe,
    low: int,
    replayed_until: int | None,
    last_destination_offset: int,
) -> Translation:
    """Translate ``source_offset`` over a destination partition whose records start at
    ``low`` and whose last replicated record is at ``last_destination_offset`` (-1: none),
    with the replay at ``replayed_until`` (the writer's resume point)."""
    end = max(low, last_destination_offset + 1)
    found = first_at_or_after(source_offset, probe, low, end)
    if found is not None:
        first = probe(low)
        if first is not None and first[0] == found and first[1] > source_offset:
            missing = first[1] - source_offset
            return Translation(source_offset, found, False, replayed_until, missing, low)
        return Translation(source_offset, found, True, replayed_until, log_start=low)
    exact = (replayed_until or 0) >= source_offset
    return Translation(source_offset, end, exact, replayed_until, log_start=low)


def replayed_from(translation: Translation, start: int | None) -> Translation:
    """``translation``, knowing that the replay of its source partition began at source
    offset ``start`` (None: not known; unchanged then).

    A group committed below the first record the destination holds is exact when the
    replay began at or below its offset and the destination's log start never moved:
    every source offset from ``start`` up to that first record was replayed and nothing of
    it is gone, so those offsets held no record to write (a transaction marker, aborted
    or filtered records). Below ``start`` nothing is known: still behind."""
    if translation.exact or not translation.missing_before or start is None:
        return translation
    if start > translation.source_offset or translation.log_start > 0:
        return translation
    return replace(translation, exact=True, missing_before=0)


def translated_back(
    translation: Translation, reversed_from: int, replicated_record: int | None
) -> Translation:
    """A failback's translation of a group's committed offset in the new region (the
    destination a failover moved it to) into the old region, from ``translation``: the
    same offset translated over the reversed replication, whose source offsets are the
    new region's and which began at new-region offset ``reversed_from`` (after the last
    record replicated forward). ``replicated_record``: the old-region offset named by
    the provenance of the first record at or after the committed offset that the forward
    replication wrote (None: none).

    - Committed at or after ``reversed_from``: the reversed replication began at or below
      it and wrote every record from there, so a first reversed record above the
      committed offset only means the offsets between held none (a transaction marker):
      exact. Behind only while the reversed replication has not reached it yet.
    - Committed below it: the group had not read every record replicated forward; the old
      region holds them at the offsets their provenance names, and the group resumes at
      ``replicated_record`` there (it then reads the divergent tail too, which it never
      read anywhere). Exact.
    """
    committed = translation.source_offset
    if committed >= reversed_from:
        if translation.exact or not translation.missing_before:
            return translation
        return replace(translation, exact=True, missing_before=0)
    if replicated_record is None:
        return translation
    return Translation(committed, replicated_record, True, translation.replayed_until)
