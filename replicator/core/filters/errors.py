"""Errors of record filters."""

from __future__ import annotations

from replicator.core.errors import ReplicatorError


class FilterError(ReplicatorError):
    """A filter plugin raised, or returned something that is not one decision per record;
    names the plugin. The partition it filters halts (others go on)."""

    def __init__(self, plugin: str, reason: str) -> None:
        self.plugin = plugin
        super().__init__(f"filter {plugin} failed: {reason}")
