"""``python -m replicator`` is the ``replicator`` command."""

from replicator.cli import main

main()
