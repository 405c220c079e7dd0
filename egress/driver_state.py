"""Statistics shared by the processes of one egress run, in a local directory of its own.

Spark runs a Python data source's planning (``latestOffset``) and a sink's ``commit`` in
separate Python processes on the driver host, next to the process that started the query
and serves metrics. They share two small files in the run's directory:

- ``partitions.json``: per partition, cumulative records, bytes, covered offsets and
  segments written, and the last committed batch; written by the sink's ``commit``
  (atomically, by rename), read by planning (bytes-per-offset estimates), metrics and the
  descriptor publisher (which partitions have a first segment whose start to look up).
- ``data-loss.jsonl``: one line per data-loss event, appended by planning, read by metrics.

Why a directory per run (``[egress] state_dir``/``run-<start time>-<pid>``): the sink keys
its statistics by micro-batch id and records a batch once (Spark may commit the same batch
again after a restart), and batch ids start again at 0 on every new checkpoint. A state
shared by every egress started in one working directory (a second deployment, a reset
checkpoint, a new config) took a new query's batches for ones already recorded, so its
descriptors never named where its partitions start. A run's directory is made at its
start and written by that run's processes only, so its batch ids and its statistics always
belong to one query: a mismatch cannot happen, and nothing needs detecting.

A run holds a lock on its directory while it lives; the directories of runs that ended
(their lock free, however they ended) are removed when the next run starts there, so the
last run's statistics stay readable until then (:func:`last_run_directory`).

The files hold statistics only: losing them changes estimates and counters, never which
records are exported (export starts are found by listing the bucket).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

PARTITIONS_FILE = "partitions.json"
DATA_LOSS_FILE = "data-loss.jsonl"
RUN_PREFIX = "run-"
OWNER_LOCK = ".owner"
ABANDONED_AFTER = 60.0
"""Seconds after which a run's directory without a lock file was left by a run killed
while it made it (making one takes microseconds)."""


@dataclass
class PartitionStats:
    records: int = 0
    bytes: int = 0
    offsets: int = 0
    segments: int = 0
    next_offset: int = 0

    @property
    def bytes_per_offset(self) -> float | None:
        return self.bytes / self.offsets if self.offsets and self.bytes else None


class DriverState:
    """Reads and writes the shared files in ``directory``."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, name: str) -> Path:
        return self.directory / name

    def read_partitions(self) -> tuple[int, dict[tuple[str, int], PartitionStats]]:
        """(last committed batch id or -1, stats per (topic, partition))."""
        try:
            data = json.loads(self._path(PARTITIONS_FILE).read_text())
        except (OSError, ValueError):
            return -1, {}
        stats = {}
        for key, values in data.get("partitions", {}).items():
            topic, _, partition = key.rpartition("/")
            stats[(topic, int(partition))] = PartitionStats(**values)
        return int(data.get("batch_id", -1)), stats

    def write_partitions(self, batch_id: int, stats: dict[tuple[str, int], PartitionStats]) -> None:
        """Replace the statistics (atomically). Never makes the directory: only its run
        does, at its start (a late write of a run that ended must not bring back the
        directory the next run removed)."""
        data: dict[str, Any] = {
            "batch_id": batch_id,
            "partitions": {f"{t}/{p}": asdict(s) for (t, p), s in sorted(stats.items())},
        }
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".partitions-")
        except FileNotFoundError:
            self._gone()
            return
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
        os.replace(tmp, self._path(PARTITIONS_FILE))

    def record_data_loss(self, event: dict[str, Any]) -> None:
        """Append one data-loss event (never makes the directory either)."""
        line = json.dumps({"time": time.time(), **event}) + "\n"
        try:
            with self._path(DATA_LOSS_FILE).open("a") as out:
                out.write(line)
        except FileNotFoundError:
            self._gone()

    def _gone(self) -> None:
        log.warning(
            "the egress run's statistics directory %s is gone (its run ended); not recorded",
            self.directory,
        )

    def data_loss_events(self) -> list[dict[str, Any]]:
        try:
            text = self._path(DATA_LOSS_FILE).read_text()
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]


class RunDirectory:
    """One egress run's directory under the state root, locked for as long as the run
    lives (an ``flock`` the kernel drops when the process ends, however it ends)."""

    def __init__(self, directory: Path, lock_fd: int) -> None:
        self.directory = directory
        self._lock_fd: int | None = lock_fd

    @classmethod
    def start(cls, state_root: str | os.PathLike[str]) -> RunDirectory:
        """A new run's directory, locked; the directories of ended runs are removed first."""
        root = Path(state_root)
        root.mkdir(parents=True, exist_ok=True)
        _remove_ended_runs(root)
        name = f"{RUN_PREFIX}{time.time_ns():020d}-{os.getpid()}"
        # Locked before it gets a run's name: another run starting meanwhile never sees
        # it unlocked (it would take it for an ended run's).
        making = Path(tempfile.mkdtemp(dir=root, prefix=f".{name}-"))
        fd = os.open(making / OWNER_LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        directory = making.rename(root / name)
        return cls(directory, fd)

    def release(self) -> None:
        """The run ended: its directory stays (for a look at its statistics) until the
        next run starts."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def last_run_directory(state_root: str | os.PathLike[str]) -> Path | None:
    """The directory of the newest run under ``state_root`` (running or ended), if any."""
    runs = _run_directories(Path(state_root))
    return runs[-1] if runs else None


def _run_directories(root: Path, prefix: str = RUN_PREFIX) -> list[Path]:
    try:
        found = [p for p in root.iterdir() if p.name.startswith(prefix) and p.is_dir()]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.name)


def _remove_ended_runs(root: Path) -> None:
    """Remove the directories of runs whose lock is free, and those a run was killed
    making (before its lock file was there) a while ago."""
    for directory in _run_directories(root) + _run_directories(root, f".{RUN_PREFIX}"):
        try:
            fd = os.open(directory / OWNER_LOCK, os.O_RDWR)
        except FileNotFoundError:
            # Being made (the lock file comes right after), removed by another run
            # starting now, or left by a run killed while it made it.
            with contextlib.suppress(OSError):
                if time.time() - directory.stat().st_mtime > ABANDONED_AFTER:
                    shutil.rmtree(directory, ignore_errors=True)
            continue
        try:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(directory, ignore_errors=True)
                log.debug("removed the statistics of an ended egress run: %s", directory)
        finally:
            os.close(fd)
