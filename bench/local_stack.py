"""A throw-away local stack for one benchmark, on free ports."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from infra.local_config import local_regions, running_stack
from replicator.core.config import Config


@contextmanager
def bench_stack(sections: str, prefix: str) -> Iterator[tuple[Config, Path]]:
    """Both local regions on free ports plus ``sections`` (the measured job's, formatted
    with ``{root}``, a scratch directory); start the stack, yield (config, root), stop it."""
    root = Path(tempfile.mkdtemp(prefix=f"bench-{prefix}-"))
    toml = local_regions("bench") + sections.format(root=root)
    with running_stack(root / "bench.toml", toml, root / "stack") as config:
        yield config, root
