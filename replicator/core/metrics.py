"""Prometheus plumbing shared by the replicator's processes.

Metric names follow ``replicator_<component>_<what>_<unit>`` with labels ``region``,
``topic`` and ``partition`` where they apply. Each process builds its own registry (no
global state) and serves it over HTTP when its ``metrics_port`` is set.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger(__name__)


DEFAULT_HOST = "0.0.0.0"
"""Every interface, so that a scraper on another host (or pod) reaches it; set
``metrics_host`` to one interface's address to keep metrics off the others."""


def serve(registry: CollectorRegistry, port: int, component: str, host: str = DEFAULT_HOST) -> Any:
    """Serve ``registry`` on ``host``:``port`` (port 0 picks a free one); returns the
    server."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    log.info("%s metrics on http://%s:%d/metrics", component, host, server.server_port)
    return server
