"""The Python data sources a class archive is recorded with
(:mod:`replicator.core.spark_class_archive`): a stream of a few Arrow batches read and
discarded the way egress reads and writes, so that the JVM loads the classes of Python
data sources, streaming and Arrow. A module of their own: Spark's Python workers import
it to unpickle them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

SOURCE_NAME = "replicator_class_archive_source"
SINK_NAME = "replicator_class_archive_sink"
ROWS = 1_000
SCHEMA = "number BIGINT, payload BINARY"


class CountingReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets ``0..ROWS``, in two ranges of one Arrow batch each."""

    def initialOffset(self) -> dict[str, Any]:
        return {"offset": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        return {"offset": ROWS}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = int(start["offset"]), int(end["offset"])
        middle = (first + last) // 2
        return [InputPartition((first, middle)), InputPartition((middle, last))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        first, last = partition.value
        numbers = pa.array(range(first, last), pa.int64())
        payloads = pa.array([b"x" * 16] * (last - first), pa.binary())
        yield pa.RecordBatch.from_arrays([numbers, payloads], names=["number", "payload"])

    def commit(self, end: dict[str, Any]) -> None:
        pass


class CountingSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CountingReader()


class Counted(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class DiscardingWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return Counted(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class DiscardingSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return DiscardingWriter()
