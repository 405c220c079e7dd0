"""Prometheus plumbing shared by the replicator's processes.

Metric names follow ``replicator_<component>_<what>_<unit>`` with labels ``region``,
``topic`` and ``partition`` where they apply. Each process builds its own registry (no
global state) and serves it over HTTP when its ``metrics_port`` is set, together with its
health probes (``/healthz``, ``/readyz``; see :mod:`replicator.core.health`).
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from replicator.core.health import Health

log = logging.getLogger(__name__)


DEFAULT_HOST = "0.0.0.0"
"""Every interface, so that a scraper on another host (or pod) reaches it; set
``metrics_host`` to one interface's address to keep metrics off the others."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    health: Health


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            status, body, kind = 200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST
        elif path == "/healthz":
            status, body = self.server.health.live()
            kind = "application/json"
        elif path == "/readyz":
            status, body = self.server.health.ready()
            kind = "application/json"
        else:
            status, body, kind = 404, b"try /metrics, /healthz or /readyz\n", "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


def serve(
    registry: CollectorRegistry,
    port: int,
    component: str,
    host: str = DEFAULT_HOST,
    health: Health | None = None,
) -> Any:
    """Serve ``registry`` at ``/metrics`` and ``health`` at ``/healthz`` and ``/readyz`` on
    ``host``:``port`` (port 0 picks a free one); returns the server (``shutdown()`` it)."""
    server = _Server((host, port), _Handler)
    server.registry = registry
    server.health = health or Health()
    threading.Thread(target=server.serve_forever, name=f"{component}-http", daemon=True).start()
    log.info(
        "%s metrics on http://%s:%d/metrics (probes /healthz, /readyz)",
        component,
        host,
        server.server_port,
    )
    return server
