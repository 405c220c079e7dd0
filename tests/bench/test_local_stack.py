"""The benchmarks' throw-away stack: its scratch directory (brokers' logs, the S3
endpoint's data: gigabytes for the larger workloads) is removed once the stack stops,
and kept for its logs when the benchmark fails."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import local_stack


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """``running_stack`` replaced by one that only writes into the scratch directory, as
    the real one's brokers and S3 endpoint do; the directories it was given."""
    stack_dirs: list[Path] = []

    @contextmanager
    def running_stack(config_path: Path, toml: str, stack_dir: Path) -> Iterator[object]:
        stack_dir.mkdir()
        (stack_dir / "broker.log").write_text("started\n")
        config_path.write_text(toml)
        stack_dirs.append(stack_dir)
        yield SimpleNamespace(regions={})

    monkeypatch.setattr(local_stack, "running_stack", running_stack)
    return stack_dirs


def test_the_scratch_directory_is_removed_once_the_stack_stops(started: list[Path]) -> None:
    with local_stack.bench_stack("", "test") as (_config, root):
        (root / "aws.log").write_text("PUT\n")
        assert (root / "stack" / "broker.log").exists()
    assert started == [root / "stack"]
    assert not root.exists()


def test_a_failed_benchmark_keeps_its_scratch_directory_for_its_logs(
    started: list[Path], caplog: pytest.LogCaptureFixture
) -> None:
    kept: Path | None = None
    with pytest.raises(RuntimeError), local_stack.bench_stack("", "test") as (_config, root):
        kept = root
        raise RuntimeError("the measured stage failed")
    assert kept is not None and (kept / "stack" / "broker.log").exists()
    assert str(kept) in caplog.text
    shutil.rmtree(kept)
