"""The relay's identity: the origin name its offsets carry, kept stable across edits of
the list of upstreams.

Provenance headers, checkpoint keys, ``transactional.id``\\ s and work placement all name
the upstream offsets by one origin (``[relay] origin``, by default the first of
``sources``). If that name changed with an edit of the list (a dead first upstream
removed after a disaster, preference reordered), a restart would find no checkpoint and
no provenance of its own: it would copy the whole retained log again (or skip it with
``start_from = "latest"``), and group translation would find nothing. So the first start
records the origin beside the checkpoints, and a start under another origin is refused
before anything is written, naming the recorded one.

The record's key: ``relay-identity/{group_id}`` in the relay's checkpoint topic (no
checkpoint key has this form: theirs start with a topic name, which holds no "/").
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from relay.errors import RelayIdentityError
from replicator.core.config import RelayConfig
from replicator.core.kafka.checkpoints import CheckpointStore
from replicator.core.untrusted_json import Kinds, check_fields, json_object

log = logging.getLogger(__name__)

MAX_IDENTITY_BYTES = 64 * 1024


def identity_key(group_id: str) -> str:
    return f"relay-identity/{group_id}"


def recorded_fields(
    raw: bytes, where: str, fields: dict[str, tuple[Kinds, bool]]
) -> dict[str, Any]:
    """The ``fields`` of a record kept beside the checkpoints (this identity, the start
    records of :mod:`relay.start_points`); RelayIdentityError naming ``where`` if it
    cannot be read. Pure."""
    try:
        return check_fields(json_object(raw, MAX_IDENTITY_BYTES), fields)
    except ValueError as exc:
        raise RelayIdentityError(f"the relay record {where} is unreadable ({exc})") from None


def recorded_origin(raw: bytes, where: str) -> str:
    """The origin of a recorded identity. Pure."""
    return str(recorded_fields(raw, where, {"origin": (str, True)})["origin"])


def origin_problem(recorded: str, relay: RelayConfig, where: str) -> str | None:
    """Why this config may not relay under the identity ``recorded`` (None: it may). Pure."""
    if recorded == relay.origin:
        return None
    return (
        f"this relay (group_id {relay.group_id!r}) names its upstream offsets {recorded!r}, "
        f"as recorded {where}; this config names them {relay.origin!r} ([relay] origin, by "
        "default the first of sources). Under another name it would find none of its "
        "checkpoints and provenance, and copy every topic again: set "
        f'origin = "{recorded}" in [relay] (a relay meant to start afresh takes another '
        "group_id and checkpoint topic)"
    )


def check_identity(store: CheckpointStore, relay: RelayConfig) -> bool:
    """Record the origin at the first start; refuse a start under another one. Whether
    this relay ran before (its identity was recorded already)."""
    key = identity_key(relay.group_id)
    where = f"under key {key} in {store.topic}"
    raw = store.latest(key)
    if raw is None:
        value = {"origin": relay.origin, "sources": list(relay.sources), "time": time.time()}
        store.put(key, json.dumps(value, separators=(",", ":")).encode())
        log.info("relay identity recorded: upstream offsets named %r %s", relay.origin, where)
        return False
    problem = origin_problem(recorded_origin(raw, where), relay, where)
    if problem is not None:
        raise RelayIdentityError(problem)
    return True
