"""When the relay's ACL sync runs a round (:class:`relay.acl_sync.AclSync`): only while
its instance leads (owns slot 0), the first round as soon as it does, then once per
``acl_sync_interval``; a failed round is logged and the next one comes. What a round
copies is tested in ``tests/core/test_acl_copy.py`` and, against brokers, in
``tests/security/test_acl_sync.py``."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka.admin import AclBinding

from relay.acl_sync import AclSync, acl_sync
from replicator.core.config import parse_config
from replicator.core.kafka.errors import BrokerError

CONFIG = """
[regions.east]
kafka.bootstrap_servers = "127.0.0.1:1"
[regions.west]
kafka.bootstrap_servers = "127.0.0.1:2"
[relay]
sources = ["east"]
destination = "west"
sync_acls = true
acl_sync_interval = "{interval}"
[[relay.topics]]
source_topic = "orders"
"""


class CountedSync(AclSync):
    """A sync whose rounds are counted instead of talking to Kafka; the first fails."""

    rounds: list[float]

    def sync_once(self) -> list[AclBinding]:
        self.rounds.append(time.monotonic())
        if len(self.rounds) == 1:
            raise BrokerError("the destination did not answer")
        return []


def counted(interval: str, leading: threading.Event) -> CountedSync:
    config = parse_config(CONFIG.format(interval=interval), "test.toml", {})
    sync = CountedSync(config, {"bootstrap.servers": "127.0.0.1:2"}, leading.is_set)
    sync.rounds = []
    return sync


def test_rounds_run_only_while_leading_first_at_once_then_each_interval(caplog):
    leading = threading.Event()
    sync = counted("300ms", leading)
    sync.start()
    try:
        time.sleep(0.6)
        assert sync.rounds == []  # another instance owns slot 0
        became = time.monotonic()
        leading.set()
        time.sleep(1.05)
    finally:
        sync.stop()
        sync.join(5)
    # Leadership is looked at every min(1 s, interval): 300 ms here.
    assert sync.rounds[0] - became < 0.5, "the first round waited for more than a look"
    gaps = [b - a for a, b in zip(sync.rounds, sync.rounds[1:], strict=False)]
    assert 2 <= len(sync.rounds) <= 4 and all(gap >= 0.29 for gap in gaps), gaps
    assert "ACL sync failed, retrying later: the destination did not answer" in caplog.text


def test_no_sync_unless_the_option_is_on():
    config = parse_config(CONFIG.format(interval="1s"), "test.toml", {})
    assert acl_sync(config, {}, lambda: True) is not None
    off = parse_config(
        CONFIG.format(interval="1s").replace("sync_acls = true", ""), "test.toml", {}
    )
    assert acl_sync(off, {}, lambda: True) is None


@pytest.mark.parametrize("interval", ["0s", "-1s"])
def test_an_interval_that_is_not_positive_is_refused(interval):
    with pytest.raises(Exception, match="acl_sync_interval"):
        parse_config(CONFIG.format(interval=interval), "test.toml", {})
