"""The instance's scrape of its members when one of them ends mid-answer: a member
that exits (``--stop-at-end``, a restart, a kill) can close its connection after its
headers, and the instance's own scrape must still answer, without that member."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest

from ingress.instance import _MembersCollector

WHOLE = b"""# HELP replicator_ingress_records_total Records produced
# TYPE replicator_ingress_records_total counter
replicator_ingress_records_total{region="w",topic="t",partition="0"} 7.0
"""


class _Whole(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(WHOLE)))
        self.end_headers()
        self.wfile.write(WHOLE)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def whole_member() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Whole)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def member_ending_after_its_headers() -> Iterator[int]:
    """Promises 7,504 bytes, sends 10 and closes, as a process exiting mid-answer."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7504\r\n\r\n# HELP rep")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


def test_a_member_ending_mid_answer_leaves_the_instance_scrape_whole() -> None:
    with whole_member() as whole, member_ending_after_its_headers() as ending:
        registry = CollectorRegistry()
        registry.register(_MembersCollector(lambda: [(0, ending), (1, whole)]))
        text = generate_latest(registry).decode()
    assert (
        'replicator_ingress_records_total{partition="0",process="1",region="w",topic="t"} 7.0'
        in text
    )
    assert 'process="0"' not in text
