"""Service topics whose partition count differs from the config are refused at start,
naming the topic, the setting and what to do: placement and checkpoint look-ups hash onto
that count."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import NewTopic

from ingress.service import IngressService
from replicator.core.kafka.errors import ServiceTopicError
from tests.fixtures.stack import DESTINATION


@pytest.mark.parametrize(
    ("topic_key", "setting", "configured"),
    [
        ("segment_events_topic", "ingress.segment_events_partitions", 4),
        ("checkpoint_topic", "ingress.checkpoint_partitions", 2),
    ],
)
def test_a_service_topic_with_another_partition_count_is_refused(
    local_stack, ingress_setup, topic_key, setting, configured
):
    setup = ingress_setup()
    name = getattr(setup.config.ingress, topic_key)
    admin = local_stack.admin(DESTINATION)
    admin.create_topics([NewTopic(name, configured + 1)])[name].result(timeout=30)
    setup.put_descriptor(1)
    service = IngressService(setup.config, stop_at_end=True, handle_signals=False)
    with pytest.raises(ServiceTopicError) as raised:
        service.run()
    message = str(raised.value)
    assert f"topic {name} has {configured + 1} partitions but {setting} = {configured}" in message
    assert f"set {setting} = {configured + 1}" in message
