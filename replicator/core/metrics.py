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


def serve(registry: CollectorRegistry, port: int, component: str) -> Any:
    """Serve ``registry`` on ``port`` (0 picks a free port); returns the server."""
    server, _thread = start_http_server(port, addr="0.0.0.0", registry=registry)
    log.info("%s metrics on http://0.0.0.0:%d/metrics", component, server.server_port)
    return server
