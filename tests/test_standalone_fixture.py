"""The standalone cluster the cluster tests run on starts when the port its master asked
for is taken (by another test's broker or driver, started meanwhile on a busy machine).

Spark's master then binds the next free port. The fixture started the worker at the port
asked for and polled the UI port it had asked for; in one CI run the poll reached a
master's RPC port instead ("Too large frame: 5135603447297110887", the bytes of
``GET /js``) until the 90 s ran out. It now takes both addresses from the master's log."""

from __future__ import annotations

import socket

from infra.ports import free_port
from tests.fixtures.spark import standalone


def test_the_cluster_starts_when_its_master_port_is_taken(
    tmp_path, monkeypatch, bare_python, tmp_path_factory
):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = (port, free_port(), free_port())
        cache = tmp_path_factory.getbasetemp() / "cache"
        with standalone(tmp_path, monkeypatch, bare_python, cache, ports) as url:
            assert url.startswith("spark://127.0.0.1:")
            assert url != f"spark://127.0.0.1:{port}"
