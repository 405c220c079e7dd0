"""Metrics endpoints bind where the config says: every interface by default, one
interface when ``metrics_host`` names it."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from replicator.core.config import parse_config, required
from replicator.core.errors import ConfigError
from replicator.core.metrics import serve

BASE = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "127.0.0.1:19092"
[egress]
region = "us-east-1"
"""


def test_metrics_host_defaults_to_every_interface_and_is_validated():
    assert required(parse_config(BASE, "t.toml", {}), "egress").metrics_host == "0.0.0.0"
    chosen = parse_config(BASE + 'metrics_host = "127.0.0.1"\n', "t.toml", {})
    assert required(chosen, "egress").metrics_host == "127.0.0.1"
    with pytest.raises(ConfigError, match=r"egress\.metrics_host"):
        parse_config(BASE + 'metrics_host = "not a host!"\n', "t.toml", {})


def test_the_endpoint_binds_to_the_chosen_interface_only():
    registry = CollectorRegistry()
    Counter("replicator_test_things", "things", registry=registry).inc()
    server = serve(registry, 0, "test", "127.0.0.1")
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert b"replicator_test_things_total 1.0" in reply.read()
    finally:
        server.shutdown()
