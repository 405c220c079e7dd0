import os
import signal
import threading

from replicator.core.signals import stop_on_signals


def test_sigterm_and_sigint_set_every_event_and_the_old_handlers_come_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    first, second = threading.Event(), threading.Event()
    with stop_on_signals(first, second):
        os.kill(os.getpid(), signal.SIGTERM)
        assert first.wait(5) and second.is_set()
        first.clear()
        second.clear()
        os.kill(os.getpid(), signal.SIGINT)
        assert first.wait(5) and second.is_set()
    assert {s: signal.getsignal(s) for s in before} == before


def test_not_installed_leaves_the_handlers_alone():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(threading.Event(), install=False):
        assert signal.getsignal(signal.SIGTERM) is before
