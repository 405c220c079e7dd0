"""Prometheus plumbing shared by the replicator's processes.

Metric names follow ``replicator_<component>_<what>_<unit>`` with labels ``region``,
``topic`` and ``partition`` where they apply. Each process builds its own registry (no
global state) and serves it over HTTP when its ``metrics_port`` is set, together with its
health probes (``/healthz``, ``/readyz``; see :mod:`replicator.core.health`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from replicator.core.health import Health

log = logging.getLogger(__name__)


DEFAULT_HOST = "0.0.0.0"
"""Every interface, so that a scraper on another host (or pod) reaches it: Prometheus
and the kubelet's probes connect from outside the process's network namespace. Set
``metrics_host`` to one interface's address to keep metrics off the others; on
Kubernetes the NetworkPolicy lets only the scrapers' namespace reach the port."""

REQUEST_TIMEOUT = 10.0
"""Seconds a connection has, from its accept, to send its request and read the answer
(Prometheus's own scrape timeout is 10 s); then it is closed, however slowly it drips."""
RESPONSE_TIMEOUT = 2.0
"""Seconds an answer has, from its request's arrival, to be written (read by the client):
a scraper reads at once, and a /metrics body is written in milliseconds; a client that
asks and never reads is closed then, within ``REQUEST_TIMEOUT`` of its accept."""
MAX_CONNECTIONS = 16
"""Connections served at once (a thread each). Past it, the oldest one still sending its
request is closed to make room: a scrape or a probe sends its request at once and is
answered in milliseconds, so it is never the oldest for long, and idle connections
(slowloris) cannot shut them out. When every one is being answered, the one answered
longest is closed instead if it has taken more than ``ANSWER_GRACE``: clients that ask
and never read cannot shut probes out either."""
ANSWER_GRACE = 0.5
"""Seconds an answer is let be before a new connection may take its slot (see above)."""


class _Server(ThreadingHTTPServer):
    """One thread per connection, at most ``max_connections`` of them, each closed at its
    deadline (``request_timeout`` from its accept, and ``response_timeout`` from its
    request's arrival). The accepting thread enforces both: it closes the connections past their
    deadline every ``poll_interval`` (``service_actions``) and makes room on accept.
    Closing is ``shutdown()`` of the socket, which wakes its thread from a blocked read
    or write; the thread then ends and forgets the connection."""

    daemon_threads = True
    request_queue_size = 64
    registry: CollectorRegistry
    health: Health
    request_timeout: float
    response_timeout: float
    answer_grace: float
    max_connections: int

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self._lock = threading.Lock()
        self._deadlines: dict[socket.socket, float] = {}
        """Open connections and when each must be done, in accept order."""
        self._answering: dict[socket.socket, float] = {}
        """Connections whose request has arrived (not closed to make room), and when."""
        self._closed: set[socket.socket] = set()
        """Connections closed here whose thread has not ended yet: not answered."""

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            if len(self._deadlines) >= self.max_connections:
                making_room = self._making_room()
                if making_room is None:
                    self.shutdown_request(request)  # every slot is answering: try later
                    return
                self._close(making_room)
            self._deadlines[request] = time.monotonic() + self.request_timeout
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._deadlines.pop(request, None)
                self._answering.pop(request, None)
                self._closed.discard(request)

    def _making_room(self) -> socket.socket | None:
        """The connection to close for a new one (the lock is held): the oldest still
        sending its request, else the one answered longest if past ``answer_grace``."""
        waiting = [c for c in self._deadlines if c not in self._answering]
        if waiting:
            return waiting[0]
        answered = [(since, c) for c, since in self._answering.items() if c in self._deadlines]
        if not answered:
            return None
        since, longest = min(answered, key=lambda item: item[0])
        return longest if time.monotonic() - since > self.answer_grace else None

    def answering(self, request: Any) -> bool:
        """Mark ``request`` as being answered; False if it was closed (its end of
        headers may be the close itself): then it gets no answer."""
        with self._lock:
            if request in self._closed or request not in self._deadlines:
                return False
            now = time.monotonic()
            self._answering[request] = now
            self._deadlines[request] = min(self._deadlines[request], now + self.response_timeout)
            return True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke (closed here or by its client) is no error of the
        server's: noted at DEBUG, not printed to stderr as the standard library does."""
        log.debug("metrics connection from %s ended early: %r", client_address, sys.exc_info()[1])

    def service_actions(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [c for c, deadline in self._deadlines.items() if deadline <= now]
            for connection in late:
                self._close(connection)

    def _close(self, connection: socket.socket) -> None:
        """Wake and end the thread serving ``connection`` (the lock is held)."""
        del self._deadlines[connection]
        self._closed.add(connection)
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def setup(self) -> None:
        # Each read and write times out too, within the deadline the server enforces.
        self.request.settimeout(self.server.request_timeout)
        super().setup()

    def do_GET(self) -> None:
        if not self.server.answering(self.request):
            self.close_connection = True
            return
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
        # As the standard library does: a request line's control characters (terminal
        # escapes) are written escaped.
        message = (format % args).translate(self._control_char_table)  # type: ignore[attr-defined]
        log.debug("%s %s", self.address_string(), message)


def serve(
    registry: CollectorRegistry,
    port: int,
    component: str,
    host: str = DEFAULT_HOST,
    health: Health | None = None,
) -> Any:
    """Serve ``registry`` at ``/metrics`` and ``health`` at ``/healthz`` and ``/readyz`` on
    ``host``:``port`` (port 0 picks a free one); returns the server (``shutdown()`` it)."""
    server = _Server((host, port))
    server.request_timeout = REQUEST_TIMEOUT
    server.response_timeout = RESPONSE_TIMEOUT
    server.answer_grace = ANSWER_GRACE
    server.max_connections = MAX_CONNECTIONS
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
