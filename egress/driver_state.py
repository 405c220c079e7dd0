"""Statistics shared by the processes of the egress driver, in a local directory.

Spark runs a Python data source's planning (``latestOffset``) and a sink's ``commit`` in
separate Python processes on the driver host, next to the process that started the query
and serves metrics. They share two small files in ``[egress] state_dir``:

- ``partitions.json``: per partition, cumulative records, bytes, covered offsets and
  segments written, and the last committed batch; written by the sink's ``commit``
  (atomically, by rename), read by planning (bytes-per-offset estimates) and metrics.
- ``data-loss.jsonl``: one line per data-loss event, appended by planning, read by metrics.

The files hold statistics only: losing them changes estimates and counters, never which
records are exported.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PARTITIONS_FILE = "partitions.json"
DATA_LOSS_FILE = "data-loss.jsonl"


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
        self.directory.mkdir(parents=True, exist_ok=True)
        data: dict[str, Any] = {
            "batch_id": batch_id,
            "partitions": {f"{t}/{p}": asdict(s) for (t, p), s in sorted(stats.items())},
        }
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".partitions-")
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
        os.replace(tmp, self._path(PARTITIONS_FILE))

    def record_data_loss(self, event: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": time.time(), **event}) + "\n"
        with self._path(DATA_LOSS_FILE).open("a") as out:
            out.write(line)

    def data_loss_events(self) -> list[dict[str, Any]]:
        try:
            text = self._path(DATA_LOSS_FILE).read_text()
        except OSError:
            return []
        return [json.loads(line) for line in text.splitlines() if line.strip()]
