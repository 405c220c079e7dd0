"""The replay processes of one instance start their workers together and, with
``--stop-at-end``, leave the group together (:mod:`ingress.siblings`): a member that
joined the group first holds every partition and starts none of them until the other
member holds its share, and the destination still holds every record exactly once."""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from pathlib import Path

from ingress.instance import IngressInstance
from ingress.service import IngressService
from ingress.siblings import InstanceMembers
from replicator.core.config import load_config
from tests.fixtures.stack import log_end
from tests.fixtures.takeover import PARTITIONS, assert_exactly_once, fill, wait_until

ROOT = Path(__file__).resolve().parents[2]


def members(count: int) -> InstanceMembers:
    return InstanceMembers(multiprocessing.get_context("spawn"), count)


def test_members_join_once_all_are_ready():
    board = members(2)
    stop = threading.Event()
    answers: list[bool] = []
    first = threading.Thread(target=lambda: answers.append(board.join_together(stop, 10)))
    first.start()
    time.sleep(0.3)
    assert first.is_alive(), "the first member joined before the second was ready"
    assert board.join_together(stop, 10)
    first.join(5)
    assert answers == [True]
    # A member restarted later finds every member counted and joins at once.
    started = time.monotonic()
    assert board.join_together(stop, 10)
    assert time.monotonic() - started < 1


def test_a_member_waits_for_the_others_only_until_its_timeout_or_a_stop():
    board = members(3)
    started = time.monotonic()
    assert not board.join_together(threading.Event(), 0.3)
    assert 0.3 <= time.monotonic() - started < 2
    stop = threading.Event()
    stop.set()
    assert not board.join_together(stop, 10)


def test_all_assigned_once_every_member_holds_a_share():
    board = members(2)
    assert not board.all_assigned(1)
    assert board.all_assigned(0)
    assert board.all_assigned(1)


def test_members_finish_together_and_a_member_with_work_again_holds_the_others():
    board = members(2)
    assert not board.all_finished(0, True)  # member 1 has not said it is done
    assert not board.all_finished(1, False)
    assert board.all_finished(1, True)
    assert board.all_finished(0, True)
    assert not board.all_finished(1, False)  # handed work again (a rebalance)
    assert not board.all_finished(0, True)
    assert not board.all_finished(0, False)  # never finished while its own share is not


def first_share(records: list[logging.LogRecord], thread: str) -> int | None:
    for record in records:
        if record.threadName == thread and record.getMessage().startswith("owning "):
            return int(record.getMessage().split()[1])
    return None


def test_the_member_that_joined_first_starts_nothing_until_the_other_holds_its_share(
    local_stack, ingress_setup, caplog
):
    caplog.set_level(logging.INFO, logger="ingress.service")
    setup = ingress_setup()
    fill(setup)
    board = members(2)
    # Member 1 counts itself ready to join but does not yet: member 0 joins the group
    # alone and is given every events partition.
    assert not board.join_together(threading.Event(), 0)
    services = [
        IngressService(
            setup.config,
            stop_at_end=True,
            handle_signals=False,
            read_notifications=index == 0,
            members=(board, index),
        )
        for index in range(2)
    ]
    codes: dict[int, int] = {}

    def run(index: int) -> threading.Thread:
        thread = threading.Thread(
            target=lambda: codes.__setitem__(index, services[index].run()), name=f"member-{index}"
        )
        thread.start()
        return thread

    threads = [run(0)]
    try:
        wait_until(lambda: services[0]._share.ever_assigned, 60, "member 0's share", [])
        time.sleep(3)
        assert len(services[0].workers) == 0, "member 0 started its share's workers alone"
        assert all(log_end(local_stack, setup.destination, p) == 0 for p in range(PARTITIONS))
        threads.append(run(1))
        for thread in threads:
            thread.join(240)
            assert not thread.is_alive(), "the instance did not finish"
    finally:
        for service in services:
            service.request_stop()
        for thread in threads:
            thread.join(60)
    assert codes == {0: 0, 1: 0}
    assert first_share(caplog.records, "member-0") == PARTITIONS // 2, caplog.text[-3000:]
    assert first_share(caplog.records, "member-1") == PARTITIONS // 2, caplog.text[-3000:]
    assert_exactly_once(local_stack, setup)


class _Exited:
    """A member's process that has exited with ``exitcode``."""

    def __init__(self, exitcode: int) -> None:
        self.exitcode = exitcode
        self.pid = 4242

    def is_alive(self) -> bool:
        return False


def test_a_member_gone_for_good_is_not_waited_for_and_one_restarting_is():
    """Found in review: a member that exited by itself (an unexpected error, or a SIGTERM
    of that process alone) left its flag unset, and with ``--stop-at-end`` the others
    waited for it forever while the parent waited for them."""
    config = load_config(ROOT / "config.example.toml")
    instance = IngressInstance(config, 2, stop_at_end=True)
    board = instance._siblings
    member = instance.members[1]
    assert not board.all_finished(0, True)
    member.process = _Exited(1)  # type: ignore[assignment]  # exited with an error
    instance._check(member)
    assert member.finished_code == 1
    assert board.all_finished(0, True), "member 0 would wait for a member that is gone"

    board.all_finished(1, True)
    restarted = instance.members[1]
    restarted.finished_code = None
    restarted.process = _Exited(-9)  # type: ignore[assignment]  # killed: restarted later
    instance._check(restarted)
    assert restarted.restart_at is not None
    assert not board.all_finished(0, True), "its partitions come back: wait for the new one"
