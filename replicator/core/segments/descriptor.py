"""The topic descriptor's format: ``{prefix}/{region}/{topic}/_topic.json``. Pure.

Egress writes it (:mod:`egress.topic_descriptor`); ingress and restore read it to create a
destination topic alike and to know where each partition's export started.

It is also the trusted record of the topic's generation: the Kafka topic id of the topic
whose records the segments under it hold. So where the deployment signs
(``[s3]`` signing keys) egress signs it like a group offsets object (its S3 object key
with the prefix and its content in canonical JSON, :func:`signed_descriptor`), and every
reader refuses one that is unsigned or not signed by the deployment's keys
(:func:`read_descriptor`, a :class:`DescriptorError` naming its S3 object key: that source
or topic stops, the others go on). Unsigned, a bucket writer could name another topic id
(or none) and make a segment of another generation pass as this one's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.core.aws.errors import ObjectNotFoundError, StorageError
from replicator.core.decimal_text import parse_decimal
from replicator.core.kafka.topics import COPIED_CONFIGS, copied_configs
from replicator.core.segments.errors import DescriptorError
from replicator.core.segments.key import MAX_OFFSET, topic_descriptor_s3_key
from replicator.core.segments.signing import SigningKeys, descriptor_message

if TYPE_CHECKING:  # the store reads descriptors (a segment's generation is checked there)
    from replicator.core.segments.store import SegmentStore

DESCRIPTOR_VERSION = 1
UNUSABLE_OBJECT = ("parse", "size")
"""The :class:`StorageError` operations of ``SegmentStore.get_json`` that mean the object
is there but is no usable JSON object (too large, nested too deep, not JSON): a bucket
writer's forgery or damage, kept to the topic it belongs to."""


def describe(
    topic: str,
    partitions: int,
    configs: dict[str, str],
    region: str,
    export_start: dict[int, int] | None = None,
    topic_id: str | None = None,
) -> dict[str, Any]:
    descriptor: dict[str, Any] = {
        "format_version": DESCRIPTOR_VERSION,
        "region": region,
        "topic": topic,
        "partitions": partitions,
        "configs": copied_configs(configs),
        "export_start": {str(p): o for p, o in sorted((export_start or {}).items())},
    }
    if topic_id is not None:
        descriptor["topic_id"] = topic_id
    return descriptor


def recorded_topic_id(descriptor: Any) -> str | None:
    """The topic id (the broker's, for this generation of the topic) the exported segments
    came from; None when not recorded. Pure."""
    if not isinstance(descriptor, dict):
        return None
    value = descriptor.get("topic_id")
    return value if isinstance(value, str) and 0 < len(value) <= 64 else None


def recreated(recorded: str | None, current: str | None) -> bool:
    """Whether the topic now is another generation than the one exported: the broker
    names both and they differ (a topic deleted and created again). Pure."""
    return recorded is not None and current is not None and recorded != current


MAX_PARTITIONS = 100_000
"""Far above any real topic: a larger count is a damaged or hostile descriptor."""


def export_starts(descriptor: Any, where: str = "topic descriptor") -> dict[int, int] | None:
    """The export start offsets a descriptor records per partition; None for descriptors
    of egress versions that did not record them. A partition or offset that is not one
    (in the spelling egress writes) is a :class:`DescriptorError` naming ``where``. Pure."""
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("export_start"), dict):
        return None
    starts = {}
    for name, offset in descriptor["export_start"].items():
        partition = parse_decimal(name, maximum=MAX_PARTITIONS - 1)
        if partition is None:
            raise DescriptorError(
                f"{where}: export_start partition {str(name)[:40]!r} is not a partition number"
            )
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET:
            raise DescriptorError(
                f"{where}: export_start of partition {partition} is {offset!r:.40}, not an offset"
            )
        starts[partition] = offset
    return starts


@dataclass(frozen=True)
class Descriptor:
    partitions: int
    configs: dict[str, str]
    export_start: dict[int, int] | None
    topic_id: str | None = None
    """The Kafka topic id of the exported generation (None: not recorded, by an egress
    version that did not, or a broker that reports none)."""


def parse_descriptor(data: Any, where: str) -> Descriptor:
    """Validate a descriptor's parsed JSON; ``where`` (its S3 key) names it in errors."""
    if not isinstance(data, dict):
        raise DescriptorError(f"topic descriptor {where}: not a JSON object")
    partitions = data.get("partitions")
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 0 < partitions <= MAX_PARTITIONS
    ):
        raise DescriptorError(
            f"topic descriptor {where}: 'partitions' is {partitions!r}, not a partition count "
            f"(1..{MAX_PARTITIONS})"
        )
    configs = data.get("configs", {})
    if not isinstance(configs, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in configs.items()
    ):
        raise DescriptorError(f"topic descriptor {where}: 'configs' is not a table of values")
    topic_id = data.get("topic_id")
    if topic_id is not None and recorded_topic_id(data) is None:
        raise DescriptorError(f"topic descriptor {where}: 'topic_id' is {topic_id!r:.80}")
    return Descriptor(
        partitions,
        _copied_configs(configs, where),
        export_starts(data, f"topic descriptor {where}"),
        topic_id,
    )


SIGNATURE_FIELD = "signature"
"""The JSON field holding a signed descriptor's signature."""


def _canonical(data: dict[str, Any]) -> bytes:
    """``data`` but its signature in one JSON spelling: what the signature signs."""
    unsigned = {k: v for k, v in data.items() if k != SIGNATURE_FIELD}
    return json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode()


def signed_descriptor(descriptor: dict[str, Any], s3_key: str, keys: SigningKeys) -> dict[str, Any]:
    """``descriptor`` as stored at ``s3_key``: with its signature where the deployment
    signs (:class:`DescriptorError` if this process holds no key to sign with)."""
    if not keys.required:
        return descriptor
    try:
        signature = keys.sign(descriptor_message(s3_key, _canonical(descriptor)))
    except ValueError as exc:
        raise DescriptorError(f"topic descriptor {s3_key}: not written: {exc}") from None
    return {**descriptor, SIGNATURE_FIELD: signature.decode()}


def signature_problem(data: Any, s3_key: str, keys: SigningKeys) -> str | None:
    """Why the descriptor ``data`` stored at ``s3_key`` is not signed by one of ``keys``
    (None: it is, or the deployment does not sign). Pure."""
    if not keys.required:
        return None
    if not isinstance(data, dict):
        return "not a JSON object"
    return keys.check_field(descriptor_message(s3_key, _canonical(data)), data.get(SIGNATURE_FIELD))


def checked_descriptor(data: Any, s3_key: str, keys: SigningKeys) -> Any:
    """``data`` if it is signed as ``keys`` require, else a :class:`DescriptorError`
    naming ``s3_key`` and why."""
    problem = signature_problem(data, s3_key, keys)
    if problem is not None:
        raise DescriptorError(f"topic descriptor {s3_key}: {problem}")
    return data


_CHOICES = {
    "cleanup.policy": {"delete", "compact", "compact,delete", "delete,compact"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
    "compression.type": {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
}
_RATIOS = {"min.cleanable.dirty.ratio"}


def _copied_configs(configs: dict[str, Any], where: str) -> dict[str, str]:
    """The allow-listed configs (others are dropped: a descriptor written by someone else
    must not set anything else on a destination), each value checked: one of the known
    choices, a number in range. A bad value is a :class:`DescriptorError` naming it."""
    copied: dict[str, str] = {}
    for name, value in configs.items():
        if name not in COPIED_CONFIGS:
            continue
        text = str(value)
        if name in _CHOICES:
            ok = text in _CHOICES[name]
        elif name in _RATIOS:
            ok = _is_number(text) and 0.0 <= float(text) <= 1.0
        else:
            ok = parse_decimal(text, minimum=-1) is not None
        if isinstance(value, bool) or not ok:
            raise DescriptorError(f"topic descriptor {where}: config {name} = {text[:80]!r}")
        copied[name] = text
    return copied


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_descriptor(store: SegmentStore, region: str, topic: str) -> Descriptor | None:
    """``region``/``topic``'s descriptor in ``store``'s bucket (None: there is none yet).
    Raises :class:`DescriptorError` for one that is there but unusable, or, where the
    deployment signs, not signed by its keys for this S3 object key (checked before its
    content is used)."""
    key = topic_descriptor_s3_key(store.prefix, region, topic)
    try:
        data = store.get_json(key)
    except ObjectNotFoundError:
        return None
    except StorageError as exc:
        if exc.operation in UNUSABLE_OBJECT:
            raise DescriptorError(f"topic descriptor {exc}") from None
        raise
    return parse_descriptor(checked_descriptor(data, key, store.keys), key)


def write_descriptor(
    store: SegmentStore, region: str, topic: str, descriptor: dict[str, Any]
) -> None:
    """Put ``descriptor`` at ``region``/``topic``'s key in ``store``'s bucket, signed with
    ``store``'s keys where the deployment signs."""
    key = topic_descriptor_s3_key(store.prefix, region, topic)
    store.put_json(key, signed_descriptor(descriptor, key, store.keys))
