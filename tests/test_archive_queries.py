"""docs/operations/restore.md's "Querying the archive" works as written: its DuckDB SQL
against a copy of a
bucket's layout (the httpfs extension it loads first is a download, so the S3 part is the
only part replaced), and its Python against the local S3 endpoint. A compaction in
progress (a level-1 segment beside the level-0 ones it covers) and the topic's JSON
objects are in the bucket, as in production."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pyarrow as pa

from replicator.core.segments.format import SCHEMA
from replicator.core.segments.key import SegmentKey
from tests.fixtures.stack import SOURCE

OPERATIONS = Path(__file__).parent.parent / "docs" / "operations" / "restore.md"
BUCKET, TOPIC = "replicator-us-east-1", "orders.placed"
PER_SEGMENT = 1000


def section_blocks(language: str) -> list[str]:
    text = OPERATIONS.read_text()
    section = text.split("## Querying the archive\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)


def batch(partition: int, start: int, count: int) -> pa.RecordBatch:
    """Records whose key is customer-42 at every 100th offset, customer-<offset> else."""
    offsets = list(range(start, start + count))
    keys = [b"customer-42" if o % 100 == 42 else b"customer-%d" % o for o in offsets]
    return pa.RecordBatch.from_pydict(
        {
            "offset": offsets,
            "timestamp": [1_700_000_000_000 + o for o in offsets],
            "timestamp_type": [0] * count,
            "key": keys,
            "value": [b"p%d-%d" % (partition, o) for o in offsets],
            "headers": [[] for _ in offsets],
        },
        schema=SCHEMA,
    )


def fill_archive(local_stack, bucket: str) -> None:
    store = local_stack.store(SOURCE, bucket)
    for partition in (1, 3):
        for start in range(0, 3 * PER_SEGMENT, PER_SEGMENT):
            key = SegmentKey(SOURCE, TOPIC, partition, 0, start, start + PER_SEGMENT - 1)
            store.write_segment(key, batch(partition, start, PER_SEGMENT))
    # Mid-compaction: the level-1 output exists, its level-0 inputs are not deleted yet.
    merged = SegmentKey(SOURCE, TOPIC, 3, 1, 0, 3 * PER_SEGMENT - 1)
    store.write_segment(merged, batch(3, 0, 3 * PER_SEGMENT))
    s3 = local_stack.s3()
    for extra in ("_topic.json", "_groups/app.json", "_group_history/app/1700000000000.json"):
        s3.put_object(Bucket=bucket, Key=f"data/{SOURCE}/{TOPIC}/{extra}", Body=b"{}")


def rows_of(query: str) -> list[tuple]:
    """The query's rows (through Arrow: DuckDB's own conversion of time zones needs pytz)."""
    relation = duckdb.sql(query)
    assert relation is not None, query
    table = relation.arrow()
    if not isinstance(table, pa.Table):  # newer DuckDB returns a record batch reader
        table = table.read_all()
    return [tuple(row.values()) for row in table.to_pylist()]


def copy_bucket(local_stack, bucket: str, root: Path) -> None:
    s3 = local_stack.s3()
    for item in s3.list_objects_v2(Bucket=bucket, Prefix="data/")["Contents"]:
        target = root / bucket / item["Key"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())


def test_the_readme_sql_reads_a_range_and_a_key_each_record_once(local_stack, unique, tmp_path):
    bucket = local_stack.new_bucket(unique("archive"))
    fill_archive(local_stack, bucket)
    copy_bucket(local_stack, bucket, tmp_path)
    [sql] = section_blocks("sql")
    statements = [s.strip() for s in sql.split(";") if s.strip()]
    queries = [s for s in statements if "read_parquet" in s]
    assert len(queries) == 2 and len(statements) == 5  # + INSTALL, LOAD, CREATE SECRET
    local = [q.replace(f"s3://{BUCKET}/", f"{tmp_path}/{bucket}/") for q in queries]

    in_range = rows_of(local[0])
    assert [r[0] for r in in_range] == list(range(1000, 2000))
    assert in_range[0][2:] == (b"customer-1000", b"p3-1000")

    of_key = rows_of(local[1])
    expected = [(p, o) for p in (1, 3) for o in range(42, 3 * PER_SEGMENT, 100)]
    assert [(r[0], r[1]) for r in of_key] == expected
    assert of_key[0][3] == b"p1-42"


def test_the_readme_python_reads_straight_from_s3(local_stack, unique):
    bucket = local_stack.new_bucket(unique("archive"))
    fill_archive(local_stack, bucket)
    [code] = section_blocks("python")
    endpoint = local_stack.config.s3.endpoint_url
    assert endpoint is not None
    host = endpoint.split("://", 1)[1]
    local = code.replace(
        'fs.S3FileSystem(region="us-east-1")',
        f'fs.S3FileSystem(region="us-east-1", endpoint_override="{host}", scheme="http", '
        'access_key="test", secret_key="test")',
    ).replace(f'"{BUCKET}/', f'"{bucket}/')
    assert local != code
    namespace: dict[str, object] = {}
    exec(compile(local, "docs/operations/restore.md", "exec"), namespace)
    rows = namespace["rows"]
    assert isinstance(rows, list)
    assert [r[0] for r in rows] == list(range(1000, 2000))
    assert rows[58] == (1058, b"customer-1058", b"p3-1058")
