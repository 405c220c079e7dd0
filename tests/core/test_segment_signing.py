"""Signed segments: a reader that holds the deployment's keys refuses a segment anyone
else wrote (unsigned, another key, a valid empty replacement, a changed footer, a copy at
another key), and accepts the old key during a rotation."""

import io
import json

import pyarrow.parquet as pq
import pytest

from replicator.core.config import parse_config
from replicator.core.config_json import config_from_json, config_to_json
from replicator.core.errors import ConfigError
from replicator.core.segments.errors import SegmentMismatchError, SegmentSignatureError
from replicator.core.segments.format import FOOTER_KEY, SegmentReader, SegmentWriter
from replicator.core.segments.key import SegmentKey
from replicator.core.segments.signing import SIGNATURE_KEY, UNSIGNED, SigningKeys, sign
from replicator.core.segments.store import signing_keys
from tests.fixtures.hostile import forge, rows
from tests.fixtures.records import plain

KEY = SegmentKey("us-east-1", "sensor.events", 2, 0, 100, 199)
OLD, NEW, OTHER = b"o" * 32, b"n" * 32, b"x" * 32
SIGNED = SigningKeys(NEW)


def write(key=KEY, keys=SIGNED, records=100) -> bytes:
    sink = io.BytesIO()
    writer = SegmentWriter(sink, key, keys=keys)
    if records:
        writer.write(plain(records, start=key.start))
    writer.close()
    return sink.getvalue()


def read(data: bytes, keys=SIGNED, key=KEY):
    return SegmentReader(io.BytesIO(data), key, "s3://b/k", keys).read_all()


def with_footer(data: bytes, changes: dict) -> bytes:
    """``data`` written again with ``changes`` in its footer, keeping its signature."""
    metadata = pq.read_metadata(io.BytesIO(data)).metadata
    footer = json.loads(metadata[FOOTER_KEY]) | changes
    table = pq.read_table(io.BytesIO(data))
    out = io.BytesIO()
    with pq.ParquetWriter(out, table.schema, compression="zstd") as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(
            {FOOTER_KEY: json.dumps(footer).encode(), SIGNATURE_KEY: metadata[SIGNATURE_KEY]}
        )
    return out.getvalue()


def test_a_signed_segment_reads_back_and_carries_its_signature():
    data = write()
    assert read(data).num_rows == 100
    metadata = pq.read_metadata(io.BytesIO(data)).metadata
    assert metadata[SIGNATURE_KEY] == sign(NEW, KEY, metadata[FOOTER_KEY])
    assert read(data, UNSIGNED).num_rows == 100  # a deployment without keys reads it too


def test_an_unsigned_segment_is_refused_naming_it():
    with pytest.raises(SegmentSignatureError, match=r"^segment s3://b/k: unsigned, and this"):
        read(write(keys=UNSIGNED))


def test_a_segment_signed_with_another_key_is_refused():
    with pytest.raises(SegmentSignatureError, match="matches none of the configured keys"):
        read(write(keys=SigningKeys(OTHER)))


def test_a_valid_empty_replacement_is_refused():
    """What a writer of the bucket would put in place of a segment to make ingress skip
    its range: an empty segment covering the same range, footer and checksums valid."""
    empty = forge(KEY, rows([]))
    assert read(empty, UNSIGNED).num_rows == 0  # unsigned deployments take it
    with pytest.raises(SegmentSignatureError, match="unsigned"):
        read(empty)
    with pytest.raises(SegmentSignatureError, match="matches none"):
        read(write(records=0, keys=SigningKeys(OTHER)))


def test_a_changed_footer_under_a_kept_signature_is_refused():
    # say the range was lost at the source: readers would skip it
    forged = with_footer(write(), {"source_data_loss": True})
    with pytest.raises(SegmentSignatureError, match="matches none"):
        read(forged)


def test_a_signed_segment_copied_to_another_key_is_refused():
    """The footer of a copy disagrees with its new key; were it rewritten to agree, the
    signature (over the key) would not."""
    other = SegmentKey("us-east-1", "sensor.events", 3, 0, 100, 199)
    with pytest.raises(SegmentMismatchError, match="footer partition is 2"):
        read(write(), key=other)
    forged = with_footer(write(key=other), {"partition": 2})
    with pytest.raises(SegmentSignatureError, match="matches none"):
        read(forged)


def test_rotation_accepts_the_old_key_only_while_it_is_listed():
    by_old = write(keys=SigningKeys(OLD))
    assert read(by_old, SigningKeys(NEW, (OLD,))).num_rows == 100
    with pytest.raises(SegmentSignatureError):
        read(by_old, SigningKeys(NEW))
    metadata = pq.read_metadata(io.BytesIO(write(keys=SigningKeys(NEW, (OLD,))))).metadata
    assert metadata[SIGNATURE_KEY] == sign(NEW, KEY, metadata[FOOTER_KEY])  # signs with new


S3_CONFIG = """
[s3]
{s3}
[regions.us-east-1]
bucket = "bucket-a"
kafka.bootstrap_servers = "localhost:9092"
"""


def config(s3: str, env: dict[str, str]):
    return parse_config(S3_CONFIG.format(s3=s3), "test.toml", env)


def test_keys_come_from_the_environment_and_travel_as_references():
    env = {"SEG_KEY": "k" * 40, "SEG_OLD": "o" * 40}
    loaded = config('signing_key = "${SEG_KEY}"\nverify_keys = ["${SEG_OLD}"]', env)
    assert signing_keys(loaded.s3) == SigningKeys(b"k" * 40, (b"o" * 40,))
    assert "k" * 40 not in repr(loaded) and "k" * 40 not in repr(signing_keys(loaded.s3))
    shipped = config_to_json(loaded)
    assert "k" * 40 not in shipped and "o" * 40 not in shipped
    assert "${SEG_KEY}" in shipped and "${SEG_OLD}" in shipped
    assert signing_keys(config_from_json(shipped, env).s3) == signing_keys(loaded.s3)
    assert signing_keys(config("", {}).s3) == UNSIGNED


@pytest.mark.parametrize(
    ("s3", "message"),
    [
        ('signing_key = "${SEG_KEY}"', "signing_key must be at least 32 characters"),
        ('verify_keys = ["${SEG_OLD}"]', "verify_keys is set but signing_key is not"),
    ],
)
def test_short_keys_and_verify_keys_alone_are_refused_without_showing_them(s3, message):
    env = {"SEG_KEY": "short-secret", "SEG_OLD": "o" * 40}
    with pytest.raises(ConfigError, match=message) as raised:
        config(s3, env)
    assert "short-secret" not in str(raised.value) and "o" * 40 not in str(raised.value)
