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
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication


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
    """Run moto's server (its own arguments: ``-H host -p port``) with the cached dispatch."""
    server.DomainDispatcherApplication = CachedDispatch  # type: ignore[misc]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
