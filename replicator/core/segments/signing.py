"""Signed objects: segments and exported group offsets, signed by the writers (egress,
compaction) and checked by every reader, so that someone who can write to the bucket can
no longer replace what the replicator wrote.

Why: a segment's checksums are unkeyed, so a bucket writer could replace a segment with
another valid one (an empty segment covering the same range makes ingress skip the
range), or forge a group's exported offsets (a group failed over to the end of the data
skips everything it had not read).

Two schemes, one per deployment:

- ``ed25519`` (recommended; ``[s3] signing_private_key`` and ``signing_public_keys``):
  only the writers hold the private key; readers (ingress, restore, an operator's
  ``status``) hold public keys and cannot sign. A reader that is broken into cannot forge.
- ``hmac-sha256`` (``[s3] signing_key``, ``verify_keys``): one shared secret; every
  reader holds it and so could sign too.

What a signature binds (the message signed starts with a domain tag per kind of object,
so a signature of one kind never validates as the other):

- a segment (``replicator.segment.v3``): the S3 object key *with* the deployment prefix
  (``prefix/region/topic/partition/level/start-end``: a signed segment copied to another
  key, range or prefix fails) and the Parquet footer's raw bytes as stored (Thrift:
  schema, row groups and their byte positions, and the key-value metadata holding the
  replicator footer, whose row-group checksums cover every record and whose ``topic_id``
  names the topic generation the records were read from), with the signature's own hex
  digits replaced by zeros. Readers compare that topic id with the signed topic
  descriptor's (:meth:`replicator.core.segments.store.SegmentStore.open`): a signed
  segment of an earlier generation put back at its key (bucket versioning keeps it) is
  refused. The writer writes the footer with that placeholder,
  signs the bytes and puts the digits in place (same length: nothing else moves).
- group offsets (``replicator.group-offsets.v2``): the object key with the prefix, and
  the object's content in one canonical JSON spelling (region, topic, group, time and the
  offsets): a signed object copied to another key or group, or changed, fails.
- a topic descriptor (``replicator.topic-descriptor.v1``): the object key with the
  prefix, and its whole content but the signature in canonical JSON, the Kafka topic id
  of the exported generation included: the descriptor is the trusted record of which
  generation the segments under it belong to (:mod:`replicator.core.segments.descriptor`).

Order, for a segment: the reader reads the Parquet footer's raw bytes (their length
capped first, from the file's last eight bytes) and checks the signature over them
*before* anything parses them (Arrow's Thrift decoder, the JSON footer): a footer built to
exhaust memory is refused for the price of reading its bytes. The signature value is found
in the raw bytes by its marker, which must occur exactly once.

Scheme versions: v1 (``hmac-sha256-v1``, a MAC over the unprefixed key and the JSON footer
only) is refused, not accepted alongside: it binds no prefix (a segment of another
deployment sharing the key validates), and its footer is parsed before it is checked. v2
segments (``replicator.segment.v2``, before the footer named the topic id) are refused
too: accepted, a v2 segment of any generation would validate, since it names none; the
refusal says "v2". See docs/security.md for the upgrade of a deployment that signed with
v1 or v2.

Pure; keys are bytes (never logged, never in an error message).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

SIGNATURE_KEY = b"replicator.signature"
"""The Parquet key-value metadata key of a segment's signature (and the JSON field of a
group offsets object's)."""
MARK = b"replicator-signature-v2:"
"""How every stored signature value starts: ``MARK scheme ":" hex digits``."""
HMAC = "hmac-sha256"
ED25519 = "ed25519"
DIGITS = {HMAC: 64, ED25519: 128}
"""Hex digits of each scheme's signature."""
SEGMENT_DOMAIN = b"replicator.segment.v3\n"
V2_SEGMENT_DOMAIN = b"replicator.segment.v2\n"
"""Segments signed before the footer named the topic's generation: refused, recognised
only to say so."""
GROUP_OFFSETS_DOMAIN = b"replicator.group-offsets.v2\n"
DESCRIPTOR_DOMAIN = b"replicator.topic-descriptor.v1\n"
ED25519_KEY_BYTES = 32
_STORED = re.compile(rb"replicator-signature-v2:([a-z0-9-]{1,20}):([0-9a-f]*)")


@dataclass(frozen=True)
class SigningKeys:
    """A deployment's keys. HMAC: ``signing`` signs what is written; a reader accepts a
    signature by ``signing`` or any of ``verifying`` (keys being rotated out). Ed25519:
    ``private_key`` (writers only) signs; a reader accepts a signature by any of
    ``public_keys``. ``no_private_key`` says why a process of an Ed25519 deployment holds
    no private key (its variable is not set: a reader), for the error if it writes."""

    signing: bytes | None = field(default=None, repr=False)
    verifying: tuple[bytes, ...] = field(default=(), repr=False)
    private_key: bytes | None = field(default=None, repr=False)
    public_keys: tuple[bytes, ...] = field(default=(), repr=False)
    no_private_key: str | None = None

    def __post_init__(self) -> None:
        if self.verifying and self.signing is None:
            raise ValueError("verification keys without a signing key")
        if self.signing is not None and (self.private_key is not None or self.public_keys):
            raise ValueError("HMAC and Ed25519 keys together: a deployment uses one scheme")
        if self.private_key is not None and not self.public_keys:
            raise ValueError("an Ed25519 private key without the public keys readers hold")
        for key in (self.private_key, *self.public_keys):
            if key is not None and len(key) != ED25519_KEY_BYTES:
                raise ValueError(f"Ed25519 keys are {ED25519_KEY_BYTES} bytes")

    def __repr__(self) -> str:
        return (
            f"SigningKeys(scheme={self.scheme}, signs={self.signs}, "
            f"accepted={len(self._accepted)} keys)"
        )

    @property
    def scheme(self) -> str | None:
        if self.signing is not None:
            return HMAC
        return ED25519 if self.public_keys else None

    @property
    def signs(self) -> bool:
        """This process can sign what it writes."""
        return self.signing is not None or self.private_key is not None

    @property
    def required(self) -> bool:
        """Readers refuse what is not signed by one of the accepted keys."""
        return self.scheme is not None

    @property
    def _accepted(self) -> tuple[bytes, ...]:
        if self.signing is not None:
            return (self.signing, *self.verifying)
        return self.public_keys

    def sign(self, message: bytes) -> bytes:
        """The stored signature value of ``message`` (``MARK scheme:hex``)."""
        if self.signing is not None:
            digest = hmac.new(self.signing, message, hashlib.sha256).hexdigest()
        elif self.private_key is not None:
            digest = _private(self.private_key).sign(message).hex()
        else:
            raise ValueError(self._cannot_sign())
        return MARK + f"{self.scheme}:{digest}".encode()

    def placeholder(self) -> bytes:
        """A stored value of the right length whose digits are all zero (signed over)."""
        if not self.signs:
            raise ValueError(self._cannot_sign())
        scheme = self.scheme
        assert scheme is not None
        return MARK + f"{scheme}:".encode() + b"0" * DIGITS[scheme]

    def _cannot_sign(self) -> str:
        if self.no_private_key is not None:
            return (
                "this deployment signs what it writes with [s3] signing_private_key, which "
                f"this process does not hold: {self.no_private_key}"
            )
        return "this process holds no signing key"

    def check(self, message: bytes, stored: bytes | None) -> str | None:
        """Why ``stored`` is not an accepted signature of ``message`` (None: it is, or
        none is required)."""
        if not self.required:
            return None
        if stored is None:
            return "unsigned, and this deployment requires signatures ([s3] signing keys)"
        match = _STORED.fullmatch(stored)
        if match is None:
            return f"signature {stored[:40]!r} is not a {MARK.decode()} signature"
        scheme, digits = match.group(1).decode(), match.group(2)
        if scheme != self.scheme:
            return f"signature scheme {scheme!r} is not this deployment's ({self.scheme})"
        if len(digits) != DIGITS[scheme]:
            return f"signature of {len(digits)} hex digits, not {DIGITS[scheme]}"
        if any(_verifies(scheme, key, message, digits) for key in self._accepted):
            return None
        return (
            "signature matches none of the configured keys (signed with another key, or the "
            "object or its key was changed)"
        )

    def check_field(self, message: bytes, stored: object) -> str | None:
        """:meth:`check` for a signature kept in a JSON object's field (``stored``: the
        field's value, None when absent), which a forger may give any type."""
        if stored is not None and not isinstance(stored, str):
            return "its signature is not a string"
        return self.check(message, stored.encode() if stored is not None else None)


UNSIGNED = SigningKeys()


def _verifies(scheme: str, key: bytes, message: bytes, digits: bytes) -> bool:
    if scheme == HMAC:
        expected = hmac.new(key, message, hashlib.sha256).hexdigest().encode()
        return hmac.compare_digest(expected, digits)
    try:
        _public(key).verify(bytes.fromhex(digits.decode()), message)
    except InvalidSignature:
        return False
    return True


@lru_cache(maxsize=16)
def _private(raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(raw)


@lru_cache(maxsize=64)
def _public(raw: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(raw)


# -- segments ---------------------------------------------------------------------------


def segment_message(
    s3_key: str, footer: bytes | memoryview, domain: bytes = SEGMENT_DOMAIN
) -> bytes:
    """What a segment's signature signs: its object key and its Parquet footer's bytes
    with the signature's digits zeroed."""
    return domain + s3_key.encode() + b"\n" + bytes(footer)


def sign_footer(keys: SigningKeys, s3_key: str, footer: bytes) -> bytes:
    """``footer`` (the raw Parquet footer, written with :meth:`SigningKeys.placeholder`
    as the signature) with the placeholder's digits replaced by the signature."""
    placeholder = keys.placeholder()
    if footer.count(placeholder) != 1:
        raise ValueError("the footer does not hold the signature placeholder exactly once")
    signature = keys.sign(segment_message(s3_key, footer))
    assert len(signature) == len(placeholder)
    return footer.replace(placeholder, signature)


def check_footer_signature(keys: SigningKeys, s3_key: str, footer: bytes) -> str | None:
    """Why the raw Parquet ``footer`` of the segment at ``s3_key`` is not signed by one of
    ``keys`` (None: it is, or none is required). Parses nothing but the signature value."""
    if not keys.required:
        return None
    found = footer.count(MARK)
    if found == 0:
        return "unsigned, and this deployment requires signed segments ([s3] signing keys)"
    if found > 1:
        return f"the footer holds {found} signature markers, not one"
    start = footer.index(MARK)
    match = _STORED.match(footer, start)
    if match is None:
        return "the footer's signature is not a scheme name and hex digits"
    stored = match.group(0)
    digits_at = match.start(2)
    zeroed = footer[:digits_at] + b"0" * len(match.group(2)) + footer[match.end(2) :]
    reason = keys.check(segment_message(s3_key, zeroed), stored)
    if (
        reason is not None
        and keys.check(segment_message(s3_key, zeroed, V2_SEGMENT_DOMAIN), stored) is None
    ):
        return (
            "signed with segment signature v2, which does not bind the topic's generation: "
            "refused (docs/security.md, upgrading)"
        )
    return reason


# -- group offsets and other small JSON objects -------------------------------------------


def object_message(s3_key: str, canonical: bytes) -> bytes:
    return GROUP_OFFSETS_DOMAIN + s3_key.encode() + b"\n" + canonical


OBJECT_SIGNATURE_FIELD = "signature"
"""The field of a small JSON object (group offsets, ACLs) that holds its signature."""


def canonical_json(content: dict[str, Any]) -> bytes:
    """The one spelling of a small object's content that its signature covers."""
    return json.dumps(content, sort_keys=True, separators=(",", ":")).encode()


def signed_object(content: dict[str, Any], s3_key: str, keys: SigningKeys) -> dict[str, Any]:
    """``content`` as stored at ``s3_key``: with its signature where the deployment
    requires signatures (``ValueError`` if this process holds no key to sign with)."""
    if not keys.required:
        return content
    signature = keys.sign(object_message(s3_key, canonical_json(content)))
    return {**content, OBJECT_SIGNATURE_FIELD: signature.decode()}


def object_signature_problem(
    stored: dict[str, Any], content: dict[str, Any], s3_key: str, keys: SigningKeys
) -> str | None:
    """Why ``stored`` (read from ``s3_key``; ``content``: what it says, as parsed) is not
    signed by one of ``keys`` (None: it is, or the deployment does not sign)."""
    return keys.check_field(
        object_message(s3_key, canonical_json(content)), stored.get(OBJECT_SIGNATURE_FIELD)
    )


def descriptor_message(s3_key: str, canonical: bytes) -> bytes:
    """What a topic descriptor's signature signs: its object key (with the prefix) and
    its content in canonical JSON (everything but the signature field)."""
    return DESCRIPTOR_DOMAIN + s3_key.encode() + b"\n" + canonical


# -- keys as configured -------------------------------------------------------------------


def ed25519_private_key(text: str) -> bytes:
    """The raw 32 bytes of an Ed25519 private key written as PEM (PKCS#8, unencrypted)
    or as base64 of the raw 32 bytes; ``ValueError`` saying which form is expected (never
    quoting the text)."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(stripped.encode(), password=None)
        except (ValueError, TypeError):
            raise ValueError("not an unencrypted PEM private key") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError("a PEM private key, but not an Ed25519 one")
        return key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    return _raw_base64(stripped, "private")


def ed25519_public_key(text: str) -> bytes:
    """The raw 32 bytes of an Ed25519 public key written as PEM (``BEGIN PUBLIC KEY``) or
    as base64 of the raw 32 bytes."""
    stripped = text.strip()
    if stripped.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_public_key(stripped.encode())
        except (ValueError, TypeError):
            raise ValueError("not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("a PEM public key, but not an Ed25519 one")
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _raw_base64(stripped, "public")


def public_key_of(private_key: bytes) -> bytes:
    return (
        _private(private_key)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def _raw_base64(text: str, kind: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != ED25519_KEY_BYTES:
        raise ValueError(
            f"not an Ed25519 {kind} key: write it as PEM or as base64 of its "
            f"{ED25519_KEY_BYTES} raw bytes"
        )
    return raw
