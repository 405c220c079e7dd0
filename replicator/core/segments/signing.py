"""Signed segments: an HMAC-SHA-256 that binds a segment's footer to its key.

Why: a segment's checksums are unkeyed, so anyone who can write to the bucket can replace
a segment with another valid one (an empty segment covering the same range makes ingress
skip the range). With ``[s3] signing_key`` set, writers (egress, compaction) sign every
segment and readers (ingress, restore, compaction) refuse one that is unsigned or signed
with a key they do not hold.

What is signed: a domain tag, the segment's key without the deployment prefix
(``region/topic/partition/level/start-end``: a signed segment copied to another key or
range fails) and the footer's JSON exactly as stored. The footer holds the covered range,
the record count, the first and last record offsets, the loss flag and the checksum of
every row group, which the reader checks against the records before using them — so the
signature covers every record, and a truncated, replaced, emptied or re-ranged segment
fails. The signature is stored next to the footer in the Parquet key-value metadata.

Order: the reader checks the signature when it opens the segment, after the footer is
parsed and found to match the key and before any row group is read.

Pure; keys are bytes (never logged, never in an error message).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field

from replicator.core.segments.key import SegmentKey

SIGNATURE_KEY = b"replicator.signature"
"""The Parquet key-value metadata key of a segment's signature."""
SCHEME = "hmac-sha256-v1"
_DOMAIN = b"replicator.segment.v1\n"


@dataclass(frozen=True)
class SigningKeys:
    """The keys of a deployment: ``signing`` signs what it writes; a reader accepts a
    signature by ``signing`` or any of ``verifying`` (the keys being rotated out)."""

    signing: bytes | None = None
    verifying: tuple[bytes, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.verifying and self.signing is None:
            raise ValueError("verification keys without a signing key")

    def __repr__(self) -> str:
        return f"SigningKeys(signing={self.signs}, verifying={len(self.verifying)} keys)"

    @property
    def signs(self) -> bool:
        """Writers sign and readers require signatures."""
        return self.signing is not None

    @property
    def accepted(self) -> tuple[bytes, ...]:
        return (self.signing, *self.verifying) if self.signing is not None else ()


UNSIGNED = SigningKeys()


def _message(key: SegmentKey, footer_json: bytes) -> bytes:
    return _DOMAIN + key.to_s3_key("").encode() + b"\n" + footer_json


def sign(secret: bytes, key: SegmentKey, footer_json: bytes) -> bytes:
    """The signature to store with a segment of ``key`` whose footer is ``footer_json``."""
    digest = hmac.new(secret, _message(key, footer_json), hashlib.sha256).hexdigest()
    return f"{SCHEME}:{digest}".encode()


def check_signature(
    keys: SigningKeys, key: SegmentKey, footer_json: bytes, stored: bytes | None
) -> str | None:
    """Why the segment's signature is not accepted (None: it is, or none is required)."""
    if not keys.signs:
        return None
    if stored is None:
        return "unsigned, and this deployment requires signed segments ([s3] signing_key)"
    scheme, _, digest = stored.partition(b":")
    if scheme != SCHEME.encode():
        return f"signature scheme {scheme[:40]!r} is not {SCHEME}"
    message = _message(key, footer_json)
    for secret in keys.accepted:
        expected = hmac.new(secret, message, hashlib.sha256).hexdigest().encode()
        if hmac.compare_digest(expected, digest):
            return None
    return (
        "signature matches none of the configured keys (signed with another key, or the "
        "footer or key was changed)"
    )
