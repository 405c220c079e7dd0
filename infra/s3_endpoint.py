"""The local stack's S3 and SQS endpoint: moto's server, with its dispatch cached.

moto's server decides for every request which of its services answers it, and for an
S3 or SQS request it lists its own package directory and asks the file system about
each of its ~150 entries (``backends.list_of_moto_modules``), then matches the request's
host against every service's URL patterns, all under one lock; then it writes a log line
for the request. Profiled in a latency benchmark, that was about a sixth of the
endpoint's CPU, on the two cores the brokers and the measured stage share: the local
stand-in for S3 took more CPU than the stage it served.

The answers cannot change while the server runs (its package directory and patterns
are fixed at import), so the service of each host is looked up once and kept; the
request log is off (warnings and errors stay). Every request is answered by the same
moto code as before: only the look-up of which service answers it is remembered.

moto holds each object and each upload part in a spooled file that moves to a temporary
file on disk past ``MOTO_S3_DEFAULT_KEY_BUFFER_SIZE`` (5 MiB less 1 KiB by default), and it
copies the bytes again at every move. Profiled while a 256 MiB segment was uploaded in
16 MiB parts, those moves were 37 % of the endpoint's CPU; the endpoint spent 13.3 ns a byte
on a multipart upload and 7.5 on 16 MiB PUTs (``python -m bench.s3_stand_in``), against
9.2 and 3.8 with objects kept in memory up to :data:`KEY_BUFFER_BYTES`. The local stack
keeps them in memory (its data is a test's or a benchmark's: a 10,000,000-record
benchmark holds about 2 GiB); a value of the variable in the environment wins. Kept in
memory, moto's read of the whole object for every ranged GET made restore, which reads a
segment a row group at a time, 10-20 % slower inside its tasks (docs/performance.md),
until the reads below stopped copying.

Two more of moto's copies are the stand-in's own, not S3's, and the stand-in leaves them
out (:func:`copy_less`), answering every request as moto does:

- reading an object copied all of it, for each GET: a ranged GET of one row group copied
  the whole segment first. An object's in-memory buffer is now sized exactly, so that a
  read from its start hands out the stored bytes themselves (CPython's ``BytesIO`` shares
  its buffer when the read covers it whole) and a ranged GET copies only its range;
- completing a multipart upload copied every part's bytes six times (each part read
  twice, appended twice, and the whole joined twice); it now reads each part once and
  joins them once, with the same checks (each part present with its ETag, every part but
  the last at least the minimum size), the same ETag and the same checksum.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3 import models as s3_models
from moto.s3.exceptions import EntityTooSmall, InvalidPart, MalformedXML
from moto.s3.models import FakeKey, FakeMultipart, MultipartChecksumBuilder
from moto.s3.utils import compute_checksum

KEY_BUFFER_BYTES = 2**30
"""Objects and upload parts up to this size stay in the endpoint's memory."""


def keep_objects_in_memory(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Have moto keep objects up to :data:`KEY_BUFFER_BYTES` in memory, unless the
    environment already says how much."""
    environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(KEY_BUFFER_BYTES))


def _exactly_sized(key: FakeKey) -> None:
    """Size ``key``'s in-memory buffer to its bytes, so that reading it from the start
    returns the stored bytes object rather than a copy (a buffer on disk is left)."""
    buffer: Any = key._value_buffer  # a SpooledTemporaryFile: a BytesIO until it rolls over
    if not buffer._rolled:
        buffer._file.getvalue()


_moto_value: property = vars(FakeKey)["value"]


def _set_value_exactly_sized(key: FakeKey, new_value: bytes) -> None:
    _moto_value.__set__(key, new_value)
    _exactly_sized(key)


def complete_copying_once(
    multipart: FakeMultipart, body: Iterator[tuple[int, str]]
) -> tuple[bytes, str, tuple[str, str, int] | None]:
    """moto's ``FakeMultipart.complete``: the object's bytes, its ETag (the MD5 of the
    parts' MD5s, ``-`` and their count) and its checksum, each part read once."""
    builder = MultipartChecksumBuilder(
        multipart.metadata.get("x-amz-checksum-algorithm"),
        multipart.metadata.get("x-amz-checksum-type"),
    )
    composite = builder.checksum_type == "COMPOSITE"
    values: list[bytes] = []
    part_md5s = bytearray()
    last: FakeKey | None = None
    for part_number, etag in body:
        part = multipart.parts.get(part_number)
        part_md5 = None if part is None else part.etag.replace('"', "")
        if part is None or part_md5 != etag.replace('"', ""):
            raise InvalidPart()
        if last is not None and last.contentsize < s3_models.S3_UPLOAD_PART_MIN_SIZE:
            raise EntityTooSmall()
        part_md5s.extend(bytes.fromhex(part_md5))
        value = part.value
        values.append(value)
        if composite:
            builder.addPart(value)
        last = part
    if not values:
        raise MalformedXML()
    total = b"".join(values)
    checksum = (
        builder.build()
        if composite
        else (
            builder.checksum_type,
            compute_checksum(total, builder.checksum_algorithm).decode(),
            1,
        )
    )
    etag = hashlib.md5(bytes(part_md5s), usedforsecurity=False).hexdigest()
    return total, f"{etag}-{len(values)}", checksum


exactly_sized_value = property(_moto_value.fget, _set_value_exactly_sized)
"""``FakeKey.value``, read as moto reads it, stored in an exactly sized buffer."""


def copy_less() -> None:
    """Leave out moto's copies of whole objects on reads and multipart completions."""
    FakeKey.value = exactly_sized_value  # type: ignore[method-assign,assignment]
    FakeMultipart.complete = complete_copying_once  # type: ignore[method-assign,assignment]


class CachedDispatch(DomainDispatcherApplication):
    """moto's dispatcher, remembering the service each host name is answered by."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._backend_by_host: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        # Called under the dispatcher's lock, so the cache needs none of its own.
        try:
            return self._backend_by_host[host]
        except KeyError:
            backend = super().get_backend_for_host(host)
            self._backend_by_host[host] = backend
            return backend


def main(argv: list[str] | None = None) -> None:
    """Run moto's server (its own arguments: ``-H host -p port``) with the cached dispatch
    and objects kept in memory."""
    keep_objects_in_memory()
    copy_less()
    server.DomainDispatcherApplication = CachedDispatch  # type: ignore[misc]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
