"""Consumer-group offsets across regions: exported beside the segments, translated
exactly into destination offsets, committed for groups that fail over.

Why exact translation is possible here: every replicated record carries the source offset
it was copied from (``replicator.source``) and a destination partition holds one source
partition's records in source-offset order. So for a group's committed source offset X
the destination offset is that of the first replicated record whose source offset is at
least X, found by a binary search over the destination partition
(:mod:`replicator.core.groups.translation`), and a consumer starting there reads exactly
what it had not yet read in the source.
"""
