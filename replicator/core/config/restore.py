"""Restore's setting that the config holds although restore has no section of its own
(restore is run with options on the command line): its checkpoint topic."""

from __future__ import annotations

RESTORE_CHECKPOINT_TOPIC = "replicator.checkpoint.restore"
"""Restore's checkpoint topic (restore has no section of its own): each service writes
checkpoints into a topic of its own, which only its user may write."""
