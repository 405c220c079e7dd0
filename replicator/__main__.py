"""``python -m replicator`` is the ``replicator`` command."""

from replicator.cli import main

if __name__ == "__main__":
    main()
