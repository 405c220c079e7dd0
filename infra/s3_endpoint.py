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
benchmark holds about 2 GiB); a value of the variable in the environment wins. One cost
measured: moto reads the whole object for every ranged GET, and restore, which reads a
segment a row group at a time, ran 10-20 % slower inside its tasks with objects in memory
(docs/performance.md).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

KEY_BUFFER_BYTES = 2**30
"""Objects and upload parts up to this size stay in the endpoint's memory."""


def keep_objects_in_memory(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Have moto keep objects up to :data:`KEY_BUFFER_BYTES` in memory, unless the
    environment already says how much."""
    environ.setdefault("MOTO_S3_DEFAULT_KEY_BUFFER_SIZE", str(KEY_BUFFER_BYTES))


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
    server.DomainDispatcherApplication = CachedDispatch  # type: ignore[misc]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
