"""One admin client shared by a long-lived object, replaced after a request through it failed.

Rule: a request that fails drops the client it went through; the next request makes a
new one. The failure itself is raised unchanged (a caller that asks again, such as
:func:`replicator.core.kafka.clients.retry_while_moving`, asks through the new client).

Why: librdkafka's admin client keeps what it learned of the cluster for the client's
life, and two things it kept outlived a paused broker in chaos runs:

- the partitions' leader epochs. A broker frozen (SIGSTOP) past its session with the
  controller is fenced when it wakes and its partitions' leader epochs rise; the client
  sent its old epochs with every ListOffsets, and the broker refused each one with
  FENCED_LEADER_EPOCH ("Leader epoch is older than broker epoch") for as long as
  anyone asked: egress's planning failed and egress stopped;
- its controller connection: every request "Failed while waiting for controller: Local:
  Timed out" long after the brokers answered again (the relay's writers, for five
  minutes after a 16 s pause of the destination's broker).

A new client learns the cluster afresh. Clients are cheap next to a failure (one
bootstrap connection), and are replaced only after one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient

Result = TypeVar("Result")


class SharedAdmin:
    """An :class:`AdminClient` made on first use, shared by every thread, renewed after a
    failed request (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], make: Callable[[], Any] | None = None) -> None:
        self._make: Callable[[], Any] = make or (lambda: AdminClient(settings))
        self._client: Any = None
        self._lock = threading.Lock()

    def call(self, request: Callable[[AdminClient], Result]) -> Result:
        """``request(client)``; any exception it raises drops that client, then is raised."""
        with self._lock:
            if self._client is None:
                self._client = self._make()
            client = self._client
        try:
            return request(client)
        except Exception:
            with self._lock:
                if self._client is client:
                    self._client = None
            raise
