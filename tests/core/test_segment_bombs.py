"""Decompression bombs whose footer lies about their sizes: memory stays under the cap.

The memory figure is Arrow's own (its default pool's peak allocation) in a fresh process
that reads the forged file and nothing else, so no other test's allocations count."""

import io
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from replicator.core.segments import format as format_module
from replicator.core.segments.errors import SegmentMismatchError
from replicator.core.segments.format import SegmentReader
from replicator.core.segments.key import SegmentKey
from tests.fixtures.forged_parquet import (
    delta_bomb,
    footer_length,
    header_key_bomb,
    lying_bomb,
    with_footer_length,
)

KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 199)
MiB = 1024**2
CAP = 4 * MiB

READ_IN_A_FRESH_PROCESS = """
import io, json, resource, sys
import pyarrow as pa
from replicator.core.segments import format as format_module
from replicator.core.segments.errors import SegmentError
from replicator.core.segments.key import SegmentKey
path, cap = sys.argv[1], int(sys.argv[2])
format_module.MAX_ROW_GROUP_BYTES = cap
data = open(path, "rb").read()
key = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 199)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    rows = format_module.SegmentReader(io.BytesIO(data), key, "s3://b/k").read_all().num_rows
    outcome = f"read {rows} records"
except SegmentError as exc:
    outcome = f"refused: {exc}"
print(json.dumps({
    "outcome": outcome,
    "arrow_peak": pa.default_memory_pool().max_memory(),
    "rss_growth": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024,
}))
"""


def read_in_fresh_process(tmp_path, data: bytes, cap: int) -> dict:
    path = tmp_path / "forged.parquet"
    path.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-c", READ_IN_A_FRESH_PROCESS, str(path), str(cap)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout)


def test_the_forged_file_is_small_and_its_footer_claims_little():
    data = lying_bomb(KEY, values=64, value_bytes=MiB, claimed_bytes=MiB)
    assert len(data) < 16 * 1024
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    assert metadata.row_group(0).total_byte_size == MiB
    declared = sum(
        metadata.row_group(0).column(i).total_uncompressed_size for i in range(metadata.num_columns)
    )
    assert declared <= MiB
    # ...and yet it decodes to 64 MiB: the lie is only in the footer.
    assert pq.read_table(io.BytesIO(data)).column("value").chunk(0).nbytes > 64 * MiB


def test_a_footer_that_understates_sizes_does_not_get_past_the_cap(tmp_path):
    data = lying_bomb(KEY, values=64, value_bytes=MiB, claimed_bytes=MiB)
    seen = read_in_fresh_process(tmp_path, data, CAP)
    assert seen["arrow_peak"] < CAP, seen
    assert seen["outcome"].startswith("refused: segment s3://b/k: row group 0 pages decode to"), (
        seen
    )


def test_the_refusal_names_the_column_and_its_pages(monkeypatch):
    data = lying_bomb(KEY, values=64, value_bytes=MiB, claimed_bytes=MiB)
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_BYTES", CAP)
    with pytest.raises(SegmentMismatchError, match=r"column value alone \d+ bytes from 1 page"):
        SegmentReader(io.BytesIO(data), KEY, "s3://b/k").read_all()


def test_a_file_under_the_cap_is_read_whatever_its_footer_claims(monkeypatch):
    data = lying_bomb(KEY, values=2, value_bytes=MiB, claimed_bytes=1024)
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_BYTES", CAP)
    table = SegmentReader(io.BytesIO(data), KEY, "s3://b/k").read_all()
    assert table.column("value").to_pylist() == [b"\0" * MiB] * 2


def test_a_footer_longer_than_the_cap_is_refused_before_it_is_parsed(monkeypatch):
    data = lying_bomb(KEY, values=2, value_bytes=1024, claimed_bytes=1024)
    monkeypatch.setattr(format_module, "MAX_PARQUET_FOOTER_BYTES", footer_length(data) - 1)
    with pytest.raises(SegmentMismatchError, match=r"s3://b/k: Parquet footer of \d+ bytes"):
        SegmentReader(io.BytesIO(data), KEY, "s3://b/k")


def test_a_footer_length_past_the_file_is_refused():
    data = lying_bomb(KEY, values=2, value_bytes=1024, claimed_bytes=1024)
    with pytest.raises(SegmentMismatchError, match=r"Parquet footer of 4000000000 bytes"):
        SegmentReader(io.BytesIO(with_footer_length(data, 4_000_000_000)), KEY, "s3://b/k")


def test_values_in_an_encoding_that_repeats_prefixes_are_refused(monkeypatch):
    data = delta_bomb(KEY, values=64, value_bytes=MiB)
    assert len(data) < 16 * 1024
    monkeypatch.setattr(format_module, "MAX_ROW_GROUP_BYTES", CAP)
    with pytest.raises(
        SegmentMismatchError,
        match=r"column value page at byte \d+: values encoded DELTA_BYTE_ARRAY",
    ):
        SegmentReader(io.BytesIO(data), KEY, "s3://b/k").read_all()


def test_header_keys_that_expand_past_the_cap_are_refused_before_they_are_expanded(tmp_path):
    data = header_key_bomb(KEY, headers=256, key_bytes=256 * 1024)
    assert len(data) < 16 * 1024
    seen = read_in_fresh_process(tmp_path, data, CAP)
    assert seen["outcome"].startswith(
        "refused: segment s3://b/k: row group 0 header keys decode to 67108864 bytes"
    ), seen
    assert seen["arrow_peak"] < CAP, seen
