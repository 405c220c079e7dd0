"""Topic descriptors in a deployment that signs: the descriptor records the topic id of
the exported generation, which decides which segments belong to the topic, so every
reader refuses one not signed by the deployment for its own S3 object key, naming it."""

from __future__ import annotations

import io
import json
from typing import Any, cast

import pytest
from botocore.exceptions import ClientError

from egress.generations import TopicGenerations
from replicator.core.segments.descriptor import (
    describe,
    read_descriptor,
    signed_descriptor,
)
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.key import topic_descriptor_s3_key
from replicator.core.segments.signing import SigningKeys
from replicator.core.segments.store import SegmentStore
from tests.fixtures.egress import unreachable_egress_config

KEYS = SigningKeys(b"descriptor-signing-key-of-the-tests-" + b"7" * 8)
ATTACKER = SigningKeys(b"a-key-the-deployment-never-had-" + b"6" * 16)
KEY = topic_descriptor_s3_key("data", "east", "orders")
OTHER_KEY = topic_descriptor_s3_key("data", "east", "payments")


class Objects:
    """The ``get_object`` of an S3 client over a dict of object bodies."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies

    def get_object(self, Bucket: str, Key: str) -> dict[str, Any]:
        if Key not in self.bodies:
            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")
        body = self.bodies[Key]
        return {"ContentLength": len(body), "Body": io.BytesIO(body)}


def store_of(data: dict[str, Any], keys: SigningKeys = KEYS) -> SegmentStore:
    bodies = {key: json.dumps(value).encode() for key, value in data.items()}
    return SegmentStore(cast(Any, Objects(bodies)), "archive", "data", keys=keys)


def descriptor(topic: str = "orders", topic_id: str = "generation-B") -> dict[str, Any]:
    return describe(topic, 2, {}, "east", {0: 0, 1: 0}, topic_id=topic_id)


def test_a_signed_descriptor_is_read_with_its_topic_id():
    found = read_descriptor(
        store_of({KEY: signed_descriptor(descriptor(), KEY, KEYS)}), "east", "orders"
    )
    assert found is not None and found.topic_id == "generation-B" and found.partitions == 2


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (descriptor(), "unsigned"),
        (signed_descriptor(descriptor(), KEY, ATTACKER), "matches none of the configured keys"),
        # The deployment's own signature, over another topic id (an earlier generation's
        # descriptor with this one's id put in) or copied from another topic's key.
        (
            {
                **signed_descriptor(descriptor(topic_id="generation-A"), KEY, KEYS),
                "topic_id": "generation-B",
            },
            "matches none of the configured keys",
        ),
        (signed_descriptor(descriptor(), OTHER_KEY, KEYS), "matches none of the configured keys"),
        ({**descriptor(), "signature": 5}, "not a string"),
    ],
)
def test_a_descriptor_the_deployment_did_not_sign_is_refused_naming_its_key(stored, reason):
    with pytest.raises(DescriptorError) as refused:
        read_descriptor(store_of({KEY: stored}), "east", "orders")
    assert KEY in str(refused.value) and reason in str(refused.value), refused.value


def test_without_keys_an_unsigned_descriptor_is_read_as_before():
    found = read_descriptor(store_of({KEY: descriptor()}, keys=SigningKeys()), "east", "orders")
    assert found is not None and found.topic_id == "generation-B"


def test_egress_ignores_the_topic_id_of_a_descriptor_it_did_not_sign(caplog):
    """A forged descriptor naming another generation neither stops the export (as a
    re-created topic) nor is kept: the generation seen now is the one recorded."""
    forged = store_of({KEY: descriptor(topic_id="forged")})
    generations = TopicGenerations(unreachable_egress_config(), cast(Any, None), forged)
    assert generations._read_recorded("orders") is None
    assert KEY in caplog.text and "unsigned" in caplog.text, caplog.text
    signed = store_of({KEY: signed_descriptor(descriptor(), KEY, KEYS)})
    generations = TopicGenerations(unreachable_egress_config(), cast(Any, None), signed)
    assert generations._read_recorded("orders") == "generation-B"
