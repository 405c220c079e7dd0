"""A segment's Parquet footer is authenticated before anything parses it, and its size and
row-group count are capped at what the writers produce; Ed25519 signatures let readers
verify without being able to sign."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from replicator.core.segments import format as segment_format
from replicator.core.segments.errors import SegmentMismatchError, SegmentSignatureError
from replicator.core.segments.format import (
    DICTIONARY_COLUMNS,
    FOOTER_KEY,
    MAX_PARQUET_FOOTER_BYTES,
    MAX_ROW_GROUPS,
    SegmentReader,
    SegmentWriter,
    combine_checksums,
)
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import UNSIGNED, SigningKeys
from tests.fixtures.hostile import forge, rows
from tests.fixtures.records import plain

KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 0, 9_999)
SIGNED = SigningKeys(b"n" * 32)
ROW_GROUP_CAP = 8_192
"""What :data:`replicator.core.segments.format.MAX_ROW_GROUPS` must stay at or above."""


def many_row_groups(count: int) -> bytes:
    """A segment of ``count`` one-record row groups whose footer is valid in every
    respect but its size: what a bucket writer builds to make readers parse a huge
    footer."""
    table = rows(list(range(count)))
    checksums = ["0" * 64] * count  # never read: the footer is refused first
    footer = {
        "format_version": 1,
        "region": KEY.region,
        "topic": KEY.topic,
        "partition": KEY.partition,
        "level": KEY.level,
        "start_offset": KEY.start,
        "end_offset": KEY.end,
        "record_count": count,
        "first_record_offset": 0,
        "last_record_offset": count - 1,
        "created_at": "2026-11-28T00:00:00+00:00",
        "writer_version": "hostile",
        "checksum": combine_checksums(checksums),
        "row_group_checksums": checksums,
    }
    out = io.BytesIO()
    with pq.ParquetWriter(
        out, table.schema, compression="zstd", use_dictionary=sorted(DICTIONARY_COLUMNS)
    ) as writer:
        writer.write_table(table, row_group_size=1)
        writer.add_key_value_metadata({FOOTER_KEY: json.dumps(footer).encode()})
    return out.getvalue()


@pytest.fixture
def arrow_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if Arrow parses a footer; the names of the footers it was asked to."""
    asked: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        asked.append("footer")
        raise AssertionError("Arrow parsed the footer before its signature was checked")

    monkeypatch.setattr(segment_format.pq, "ParquetFile", refuse)
    return asked


def test_a_forged_footer_is_refused_before_arrow_parses_it(arrow_parses):
    forged = forge(KEY, rows([0, 1, 2]))
    with pytest.raises(SegmentSignatureError, match=r"^segment s3://b/k: unsigned"):
        SegmentReader(io.BytesIO(forged), KEY, "s3://b/k", SIGNED)
    other = io.BytesIO()
    writer = SegmentWriter(other, KEY, keys=SigningKeys(b"x" * 32))
    writer.write(plain(3, start=0))
    writer.close()
    with pytest.raises(SegmentSignatureError, match="matches none of the configured keys"):
        SegmentReader(io.BytesIO(other.getvalue()), KEY, "s3://b/k", SIGNED)
    assert arrow_parses == []


@pytest.fixture
def small_cap(monkeypatch: pytest.MonkeyPatch) -> int:
    """The row-group cap lowered to 64 (files at the real cap take a minute to write)."""
    monkeypatch.setattr(segment_format, "MAX_ROW_GROUPS", 64)
    return 64


def test_a_footer_with_more_row_groups_than_writers_write_is_refused_unparsed(
    small_cap, arrow_parses
):
    """Unsigned deployments too: the count is read from the footer's raw bytes."""
    with pytest.raises(SegmentMismatchError, match=f"declares {small_cap + 1} row groups"):
        SegmentReader(io.BytesIO(many_row_groups(small_cap + 1)), KEY, "s3://b/k", UNSIGNED)
    assert arrow_parses == []


def test_row_groups_given_twice_in_a_footer_all_count():
    """Thrift readers keep the last of a field given twice: a footer whose first row-group
    list is short and whose second is long is counted by both, where no signature vouches
    for it."""
    version = bytes([0x15, 0x02])  # field 1, i32, 1
    short = bytes([0x39, 0x1C, 0x00])  # field 4, a list of one empty struct
    long = bytes([0x09, 0x08, 0xFC, 0xA8, 0x46]) + bytes(9_000)  # field 4 again: 9,000 of them
    footer = version + short + long + b"\0"
    assert segment_format._row_group_count(footer) == 9_001
    assert segment_format._row_group_count(footer, whole=False) == 1
    with pytest.raises(ValueError, match="a schema of 65 elements"):
        segment_format._row_group_count(bytes([0x29, 0xFC, 65]) + bytes(65) + b"\0")


def test_writers_stay_within_the_caps_readers_apply(small_cap):
    """A writer refuses a row group past the cap; a segment at the cap reads back; and a
    footer of the real cap's row groups (measured per row group) is under the footer
    cap with room to spare."""
    assert MAX_ROW_GROUPS >= ROW_GROUP_CAP
    key = SegmentKey("us-east-1", "sensor.events", 2, 0, 0, 10**12)
    sink = io.BytesIO()
    writer = SegmentWriter(sink, key, row_group_rows=1, keys=SIGNED)
    writer.write(plain(small_cap, start=0))
    with pytest.raises(ValueError, match=f"more than {small_cap} row groups"):
        writer.write(plain(1, start=small_cap))
        writer.close()

    lengths = {}
    for count in (small_cap // 2, small_cap):
        sink = io.BytesIO()
        writer = SegmentWriter(sink, key, row_group_rows=1, keys=SIGNED)
        writer.write(plain(count, start=0))
        writer.close()
        data = sink.getvalue()
        lengths[count] = int.from_bytes(data[-8:-4], "little")
    reader = SegmentReader(io.BytesIO(data), key, "s3://b/k", SIGNED)
    assert reader.num_row_groups == small_cap
    assert reader.read_row_group(small_cap - 1).num_rows == 1
    per_row_group = (lengths[small_cap] - lengths[small_cap // 2]) / (small_cap // 2)
    at_the_cap = lengths[small_cap] + per_row_group * (MAX_ROW_GROUPS - small_cap)
    assert at_the_cap < MAX_PARQUET_FOOTER_BYTES * 0.95, (per_row_group, at_the_cap)


def test_a_signed_footer_changed_anywhere_is_refused():
    """The signature covers the footer's raw bytes, not only the replicator footer: a
    changed row-group position or statistic fails as a changed checksum does."""
    sink = io.BytesIO()
    writer = SegmentWriter(sink, KEY, keys=SIGNED)
    writer.write(plain(10, start=0))
    writer.close()
    data = bytearray(sink.getvalue())
    length = int.from_bytes(data[-8:-4], "little")
    footer_start = len(data) - 8 - length
    assert SegmentReader(io.BytesIO(bytes(data)), KEY, "s3://b/k", SIGNED).read_all().num_rows
    for position in (footer_start + 5, footer_start + length // 3, len(data) - 9):
        changed = bytearray(data)
        changed[position] ^= 0x01
        with pytest.raises((SegmentSignatureError, SegmentMismatchError)):
            SegmentReader(io.BytesIO(bytes(changed)), KEY, "s3://b/k", SIGNED)


# -- Ed25519 ------------------------------------------------------------------------------


def ed25519_pair() -> tuple[bytes, bytes]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return private, public


def write(keys: SigningKeys, key: SegmentKey = KEY) -> bytes:
    sink = io.BytesIO()
    writer = SegmentWriter(sink, key, keys=keys)
    writer.write(plain(10, start=key.start))
    writer.close()
    return sink.getvalue()


def test_ed25519_readers_verify_and_cannot_sign():
    private, public = ed25519_pair()
    writer_keys = SigningKeys(private_key=private, public_keys=(public,))
    reader_keys = SigningKeys(public_keys=(public,))
    data = write(writer_keys)
    assert SegmentReader(io.BytesIO(data), KEY, "s3://b/k", reader_keys).read_all().num_rows == 10
    # A reader holds nothing to sign with: it cannot write a segment readers accept.
    assert not reader_keys.signs and reader_keys.required
    with pytest.raises(ValueError, match="holds no signing key"):
        write(reader_keys)
    # Nor can anyone with another private key, or an HMAC key.
    stranger, stranger_public = ed25519_pair()
    forged = write(SigningKeys(private_key=stranger, public_keys=(stranger_public,)))
    with pytest.raises(SegmentSignatureError, match="matches none of the configured keys"):
        SegmentReader(io.BytesIO(forged), KEY, "s3://b/k", reader_keys)
    with pytest.raises(SegmentSignatureError, match="scheme 'hmac-sha256' is not"):
        SegmentReader(io.BytesIO(write(SIGNED)), KEY, "s3://b/k", reader_keys)
    # Rotation: a reader listing the old and the new public key accepts both.
    _, other_public = ed25519_pair()
    rotating = SigningKeys(public_keys=(other_public, public))
    assert SegmentReader(io.BytesIO(data), KEY, "s3://b/k", rotating).read_all().num_rows == 10


def test_an_ed25519_writer_without_its_private_key_says_which_setting():
    _, public = ed25519_pair()
    keys = SigningKeys(public_keys=(public,), no_private_key="REPLICATOR_SIGNING_PRIVATE is unset")
    with pytest.raises(ValueError, match="signing_private_key, which this process does not hold"):
        write(keys)
