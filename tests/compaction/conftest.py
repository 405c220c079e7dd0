"""Compaction fixtures: a bucket of small level-0 segments and a config to compact it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from replicator.core.config import Config, load_config
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.store import SegmentStore
from tests.conftest import SOURCE, LocalStack
from tests.ingress.test_instances import segment_batch


@dataclass
class CompactionSetup:
    config: Config
    path: Path
    topic: str
    bucket: str
    store: SegmentStore

    def fill(self, partitions: int, segments: int, per_segment: int, level: int = 0) -> None:
        for partition in range(partitions):
            for s in range(segments):
                start = s * per_segment
                key = SegmentKey(
                    SOURCE, self.topic, partition, level, start, start + per_segment - 1
                )
                self.store.write_segment(key, segment_batch(start, per_segment))


@pytest.fixture
def compaction_setup(
    local_stack: LocalStack, bucket: str, unique: Callable[[str], str], tmp_path: Path
) -> Callable[..., CompactionSetup]:
    def make(**rules: object) -> CompactionSetup:
        topic = unique("compact.me")
        settings = {
            "min_segment_age": "0s",
            "min_segment_count": 3,
            "min_segment_bytes": "1GiB",
            "max_segment_count": 1000,
            "max_segment_bytes": "4GiB",
            **rules,
        }
        lines = [
            "[s3]",
            f'endpoint_url = "{local_stack.config.s3.endpoint_url}"',
            'prefix = "data"',
            'access_key_id = "test"',
            'secret_access_key = "test"',
            f"[regions.{SOURCE}]",
            f'bucket = "{bucket}"',
            f'kafka.bootstrap_servers = "{local_stack.bootstrap(SOURCE)}"',
            "[compaction]",
            f'region = "{SOURCE}"',
            "parallelism = 2",
            'schedule = "* * * * * */3"',
            "[compaction.storage_class]",
            '1 = "STANDARD_IA"',
            '2 = "GLACIER_IR"',
            f'[compaction.topics."{topic}"]',
        ]
        for key, value in settings.items():
            lines.append(
                f"{key} = " + (f'"{value}"' if isinstance(value, str) else str(value).lower())
            )
        path = tmp_path / f"compact-{unique('cfg')}.toml"
        path.write_text("\n".join(lines) + "\n")
        config = load_config(path)
        return CompactionSetup(config, path, topic, bucket, SegmentStore.for_region(config, SOURCE))

    return make
