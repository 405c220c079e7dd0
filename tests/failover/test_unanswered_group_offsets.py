"""Reading a group's committed offsets from a cluster that does not answer (a source region
down, when failover and failback run): a BrokerError naming the group and the cluster,
which the reports catch, not the admin future's bare TimeoutError, which nothing did."""

from __future__ import annotations

import pytest

from infra.ports import free_port
from replicator.core.groups import admin
from replicator.core.groups.admin import GroupAdmin
from replicator.core.kafka.errors import BrokerError


def test_offsets_of_a_cluster_that_does_not_answer_are_a_broker_error(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(admin, "ADMIN_TIMEOUT", 1.0)
    down = GroupAdmin({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, "us-east-1")
    with pytest.raises(BrokerError, match=r"offsets of group 'payments'.*us-east-1"):
        down.committed("payments")
