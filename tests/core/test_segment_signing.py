"""Signed segments: a reader that holds the deployment's keys refuses a segment anyone
else wrote (unsigned, another key, a valid empty replacement, a changed footer, a copy at
another key), and accepts the old key during a rotation."""

import base64
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
from replicator.core.segments.signing import MARK, SIGNATURE_KEY, UNSIGNED, SigningKeys
from replicator.core.segments.store import signing_keys
from tests.fixtures.hostile import forge, rows
from tests.fixtures.records import plain
from tests.fixtures.signing import signed_by

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
    assert metadata[SIGNATURE_KEY].startswith(MARK + b"hmac-sha256:")
    assert signed_by(SIGNED, KEY.to_s3_key(""), data)
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
    """The signature is over the object key: a copy fails it before its footer is read
    (whose fields disagree with the new key, as an unsigned reader finds); were the footer
    rewritten to agree, the signature would still fail."""
    other = SegmentKey("us-east-1", "sensor.events", 3, 0, 100, 199)
    with pytest.raises(SegmentSignatureError, match="matches none"):
        read(write(), key=other)
    with pytest.raises(SegmentMismatchError, match="footer partition is 2"):
        read(write(), UNSIGNED, key=other)
    forged = with_footer(write(key=other), {"partition": 2})
    with pytest.raises(SegmentSignatureError, match="matches none"):
        read(forged)


def test_rotation_accepts_the_old_key_only_while_it_is_listed():
    by_old = write(keys=SigningKeys(OLD))
    assert read(by_old, SigningKeys(NEW, (OLD,))).num_rows == 100
    with pytest.raises(SegmentSignatureError):
        read(by_old, SigningKeys(NEW))
    by_new = write(keys=SigningKeys(NEW, (OLD,)))  # signs with the new key
    assert signed_by(SigningKeys(NEW), KEY.to_s3_key(""), by_new)
    assert not signed_by(SigningKeys(OLD), KEY.to_s3_key(""), by_new)


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


def ed25519_texts() -> tuple[str, str]:
    """A new Ed25519 key pair as an operator writes them: (private PEM, public base64)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return private, base64.b64encode(public).decode()


def test_ed25519_writers_hold_the_private_key_and_readers_only_public_ones():
    private, public = ed25519_texts()
    s3 = f'signing_private_key = "${{SEG_PRIVATE}}"\nsigning_public_keys = ["{public}"]'
    writer = signing_keys(config(s3, {"SEG_PRIVATE": private}).s3)
    assert writer.signs and writer.required
    assert writer.public_keys == (base64.b64decode(public),)
    reader = signing_keys(config(s3, {}).s3)  # a service not given the variable
    assert not reader.signs and reader.required and reader.public_keys == writer.public_keys
    assert reader.no_private_key is not None and "SEG_PRIVATE" in reader.no_private_key
    loaded = config(s3, {"SEG_PRIVATE": private})
    secret_line = private.splitlines()[1]
    assert secret_line not in repr(loaded) and secret_line not in repr(writer)
    assert secret_line not in config_to_json(loaded)


@pytest.mark.parametrize(
    ("s3", "message"),
    [
        (
            'signing_key = "${SEG_KEY}"\nsigning_public_keys = ["{public}"]',
            "set signing_key .HMAC. or signing_private_key and signing_public_keys",
        ),
        ('signing_private_key = "${SEG_PRIVATE}"', "signing_public_keys is not"),
        ('signing_public_keys = ["bm90LWEta2V5"]', r"signing_public_keys\[0\]: not an Ed25519"),
        (
            'signing_private_key = "${SEG_PRIVATE}"\nsigning_public_keys = ["{other}"]',
            "signing_private_key's public key is not in signing_public_keys",
        ),
        (
            'signing_private_key = "${SEG_KEY}"\nsigning_public_keys = ["{public}"]',
            "signing_private_key: not an Ed25519 private key",
        ),
    ],
)
def test_ed25519_keys_are_validated_without_showing_them(s3, message):
    private, public = ed25519_texts()
    _, other = ed25519_texts()
    env = {"SEG_KEY": "k" * 40, "SEG_PRIVATE": private}
    text = s3.replace("{public}", public).replace("{other}", other)
    with pytest.raises(ConfigError, match=message) as raised:
        config(text, env)
    assert private.splitlines()[1] not in str(raised.value) and "k" * 40 not in str(raised.value)
