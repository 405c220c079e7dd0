"""How S3 is reached (``[s3]``): endpoint, credentials, encryption, the storage class
and multipart part size of written segments, and the keys segments are signed and
verified with (HMAC, or Ed25519 so that readers cannot sign).

Key rules are checked at load: one signing scheme per deployment, every public key
readable, the private key's public key among those readers accept (readers would
otherwise refuse everything it signs). A private key this process lacks
(:class:`~replicator.core.config.secrets.UnsetSecret`) is checked where it is used.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from replicator.core.config._common import Size, _Model
from replicator.core.config.secrets import UnsetSecret
from replicator.core.segments.signing import (
    ed25519_private_key,
    ed25519_public_key,
    public_key_of,
)

MIN_PART_SIZE = 5 * 1024**2
"""S3 rejects multipart parts below 5 MiB (except the last)."""
MAX_PART_SIZE = 5 * 1024**3
MIN_SIGNING_KEY_CHARS = 32


StorageClass = Literal[
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "GLACIER",
    "DEEP_ARCHIVE",
    "REDUCED_REDUNDANCY",
]


class S3Config(_Model):
    endpoint_url: str | None = None
    """Leave out on AWS; set for S3-compatible stores and the local stack."""
    prefix: str = "data"
    """Key prefix under which every segment, descriptor and offsets object lives."""
    access_key_id: str | None = None
    """Static access key; leave out to use the default AWS credential chain."""
    secret_access_key: SecretStr | None = None
    """Secret of ``access_key_id``: a ``${NAME}`` reference."""
    storage_class: StorageClass | None = None
    """Storage class of the segments egress writes (S3's default when unset)."""
    sse: Literal["none", "SSE-S3", "SSE-KMS"] = "none"
    """Server-side encryption of written objects."""
    sse_kms_key_id: str | None = None
    """KMS key of ``sse = "SSE-KMS"`` (the account's default key when unset)."""
    multipart_part_size: Size = 16 * 1024**2
    """Upload part size: memory per open segment writer is about one part plus one row group."""
    signing_key: SecretStr | None = None
    """HMAC key (a ``${NAME}`` reference, at least 32 characters) that egress and
    compaction sign every segment and exported group offsets object with (HMAC-SHA-256
    of its S3 key and content). When set, ingress, restore, compaction and failover
    refuse one that is unsigned or signed with another key: a writer of the bucket can
    no longer replace them (see docs/security.md). Every reader holds this key and so
    could sign: prefer ``signing_private_key`` and ``signing_public_keys``."""
    verify_keys: list[SecretStr] = Field(default_factory=list)
    """Keys whose signatures readers accept besides ``signing_key``: the old key during a
    rotation (``${NAME}`` references)."""
    signing_private_key: SecretStr | None = None
    """Ed25519 private key (a ``${NAME}`` reference; PEM, or base64 of its 32 bytes) that
    egress and compaction sign with, instead of ``signing_key``. Give its variable to
    those two only: the other services verify with ``signing_public_keys`` and cannot
    sign."""
    signing_public_keys: list[str] = Field(default_factory=list)
    """Ed25519 public keys (PEM, or base64 of their 32 bytes) whose signatures readers
    accept; setting them makes readers require signatures. List the new and the old key
    during a rotation; the one of ``signing_private_key`` must be among them."""

    @model_validator(mode="after")
    def _check(self) -> S3Config:
        if self.prefix.startswith("/") or self.prefix.endswith("/") or "//" in self.prefix:
            raise ValueError(f"prefix {self.prefix!r} must not start or end with '/' or hold '//'")
        if self.sse == "SSE-KMS" and not self.sse_kms_key_id:
            raise ValueError("sse = 'SSE-KMS' needs sse_kms_key_id")
        if self.sse != "SSE-KMS" and self.sse_kms_key_id:
            raise ValueError("sse_kms_key_id is set but sse is not 'SSE-KMS'")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("set both access_key_id and secret_access_key, or neither")
        if self.verify_keys and self.signing_key is None:
            raise ValueError("verify_keys is set but signing_key is not")
        for name, key in [("signing_key", self.signing_key)] + [
            (f"verify_keys[{i}]", k) for i, k in enumerate(self.verify_keys)
        ]:
            if key is not None and len(key.get_secret_value()) < MIN_SIGNING_KEY_CHARS:
                raise ValueError(f"{name} must be at least {MIN_SIGNING_KEY_CHARS} characters")
        self._check_ed25519_keys()
        if not MIN_PART_SIZE <= self.multipart_part_size <= MAX_PART_SIZE:
            raise ValueError(
                f"multipart_part_size must be between 5MiB and 5GiB (S3 limits), "
                f"got {self.multipart_part_size} bytes"
            )
        return self

    def _check_ed25519_keys(self) -> None:
        """One scheme per deployment; every public key readable; the private key (where
        this process has it) readable and its public key among those readers accept."""
        ed25519 = self.signing_private_key is not None or bool(self.signing_public_keys)
        if ed25519 and self.signing_key is not None:
            raise ValueError(
                "set signing_key (HMAC) or signing_private_key and signing_public_keys "
                "(Ed25519), not both"
            )
        if self.signing_private_key is not None and not self.signing_public_keys:
            raise ValueError("signing_private_key is set but signing_public_keys is not")
        public = []
        for i, text in enumerate(self.signing_public_keys):
            try:
                public.append(ed25519_public_key(text))
            except ValueError as exc:
                raise ValueError(f"signing_public_keys[{i}]: {exc}") from None
        if self.signing_private_key is None or isinstance(self.signing_private_key, UnsetSecret):
            return
        try:
            private = ed25519_private_key(self.signing_private_key.get_secret_value())
        except ValueError as exc:
            raise ValueError(f"signing_private_key: {exc}") from None
        if public_key_of(private) not in public:
            raise ValueError(
                "signing_private_key's public key is not in signing_public_keys: readers "
                "would refuse everything it signs"
            )
