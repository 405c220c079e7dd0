"""Noticing that a destination topic was deleted and created again under a running service.

Why: a checkpoint describes one topic (see :mod:`replicator.core.kafka.checkpoints`), and a
writer commits records only into the topic it opened on (``PartitionWriter``), so a writer
that writes after a re-creation fails and opens again, resuming by what the new topic
holds. A writer that has nothing to write never gets that far: a caught-up partition
whose source stays idle would leave the new topic without its records for as long as the
source stays idle, while status shows no lag. So a service looks at its destination
topics' ids every :data:`CHECK_INTERVAL` seconds, and opens the writers of a topic whose
id changed again (each then resumes as after a restart: ingress from where the export
begins, the relay from the upstream's log start).

A look is one metadata request for all destination topics (not one per partition), bounded
in time: a deleted topic is an answer, not something to wait for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from replicator.core.errors import ReplicatorError

log = logging.getLogger(__name__)

CHECK_INTERVAL = 5.0


def changed_ids(known: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Topics whose id in ``now`` differs from the one ``known`` (topic -> id). A topic
    without an id now (deleted, not created again yet) or not known before has not
    changed. Pure."""
    return sorted(t for t, new in now.items() if new and known.get(t) not in (None, "", new))


class RecreationWatch:
    """Remembers destination topic ids and says which changed (see the module docstring)."""

    def __init__(
        self,
        topic_ids: Callable[[Sequence[str]], Mapping[str, str]],
        interval: float = CHECK_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic_ids = topic_ids
        self._interval = interval
        self._clock = clock
        self._known: dict[str, str] = {}
        self._due = 0.0

    def recreated(self, topics: Iterable[str]) -> list[str]:
        """The ``topics`` deleted and created again since the last look (none while a look
        is not due). A topic that cannot be described now is looked at next time."""
        now = self._clock()
        if now < self._due:
            return []
        self._due = now + self._interval
        try:
            ids = dict(self._topic_ids(sorted(set(topics))))
        except ReplicatorError as exc:  # a broker's passing trouble: next time
            log.info("cannot look at destination topic ids now: %s", exc)
            return []
        changed = changed_ids(self._known, ids)
        for topic, new in ids.items():
            if new:
                self._known[topic] = new
        for topic in changed:
            log.warning(
                "destination topic %s was deleted and created again: its writers open again "
                "and resume by what the new topic holds",
                topic,
            )
        return changed
