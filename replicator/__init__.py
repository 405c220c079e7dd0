"""Shared core of the replicator: config, segment naming and format, segment store, clients."""

__version__ = "0.1.0"
