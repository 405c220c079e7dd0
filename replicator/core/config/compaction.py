"""Merging small segments into larger ones (``[compaction]``, a Spark batch run on a
schedule): the region whose bucket is compacted, the merge rules of each topic
(``[compaction.topics.NAME]``) and the storage class written at each level."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, PositiveInt, model_validator

from replicator.core.config._common import Duration, RegionName, Size, TopicName, _Model
from replicator.core.config.s3 import StorageClass


def _cron(value: str) -> str:
    # Imported here: every Spark Python worker imports this module; few check a schedule.
    from croniter import croniter

    fields = value.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(value):
        raise ValueError(
            f"invalid cron schedule {value!r}: expected 5 fields "
            "(minute hour day month weekday) or 6 with seconds last"
        )
    return value


class CompactionTopicConfig(_Model):
    min_level: Annotated[int, Field(ge=0)] = 0
    """The lowest level whose segments are merged."""
    max_level: Annotated[int, Field(ge=0)] = 0
    """The highest level merged into (merges write one level up, at most this)."""
    min_segment_age: Duration = 3600.0
    """Only segments older than this are merged."""
    min_segment_count: PositiveInt = 10
    """A merge needs at least this many segments."""
    min_segment_bytes: Size = 1024**3
    """... or at least this many bytes of them."""
    max_segment_count: PositiveInt = 1000
    """A merge takes at most this many segments."""
    max_segment_bytes: Size = 4 * 1024**3
    """A merge writes at most this many bytes."""
    delete: bool = True
    """Delete merged inputs once the output is verified."""

    @model_validator(mode="after")
    def _check(self) -> CompactionTopicConfig:
        if self.min_level > self.max_level:
            raise ValueError(f"min_level {self.min_level} is above max_level {self.max_level}")
        if self.min_segment_count > self.max_segment_count:
            raise ValueError(
                f"min_segment_count {self.min_segment_count} is above "
                f"max_segment_count {self.max_segment_count}"
            )
        return self


def _level_key(value: Any) -> Any:
    """A level written as a table key (text in TOML) is its number as such: "01", "+1"
    or " 1" would name the same level as "1" (one silently replacing the other), and a
    ``${NAME}`` reference under it could not be found again by its key when the config
    is handed to Spark processes."""
    if isinstance(value, str) and not re.fullmatch(r"0|[1-9][0-9]*", value):
        raise ValueError(f"level {value!r}: write the level's number alone, e.g. 1")
    return value


Level = Annotated[int, BeforeValidator(_level_key), Field(ge=0)]


class CompactionConfig(_Model):
    region: RegionName
    """The region whose bucket is compacted."""
    schedule: Annotated[str, AfterValidator(_cron)] = "0 1 * * *"
    """Cron expression of the runs (for the scheduler the deployment uses)."""
    parallelism: PositiveInt = 8
    """Merges running at once."""
    topics: dict[TopicName, CompactionTopicConfig] = Field(default_factory=dict)
    """Topics to compact, each with its merge rules."""
    storage_class: dict[Level, StorageClass] = Field(default_factory=dict)
    """Storage class of the segments written at each level, e.g. {1 = "STANDARD_IA"}."""
    pushgateway_url: str | None = None
    """Where a run's figures are pushed, so a cron job's result reaches monitoring."""
