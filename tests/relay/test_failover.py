"""Failover across identical upstreams on real brokers (a third broker is the second
upstream): the current upstream dies, or falls behind by more than ``lag_threshold``, and
the relay goes on from the other exactly; upstreams that differ halt the partition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from infra.ports import free_port
from relay.errors import RelayIdentityError
from relay.failover import UpstreamState, choose_upstream
from relay.service import RelayService
from replicator.core.config import Config, load_config
from replicator.core.kafka import provenance
from replicator.core.kafka.checkpoints import CheckpointStore, WriteTarget
from tests.fixtures.independent import read_partition
from tests.fixtures.relay import UPSTREAM_B, create_topic, produce, record_counts
from tests.fixtures.stack import DESTINATION, SOURCE

PARTITIONS = 2


def records(start: int, count: int, value: bytes = b"v") -> list[tuple[int, bytes, bytes]]:
    return [(i % PARTITIONS, b"k%d" % i, value + b"%d" % i) for i in range(start, start + count)]


def relayed(local_stack, setup) -> int:
    return sum(record_counts(local_stack.bootstrap(DESTINATION), setup.destination, PARTITIONS))


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def assert_exact(local_stack, setup) -> None:
    for partition in range(PARTITIONS):
        source = read_partition(local_stack.bootstrap(SOURCE), setup.source, partition)
        copied = read_partition(local_stack.bootstrap(DESTINATION), setup.destination, partition)
        named = provenance.SourcePartition(UPSTREAM_B, setup.source, partition)
        assert [provenance.source_offset(list(r[5]), named) for r in copied] == [
            r[0] for r in source
        ], f"partition {partition}"
        assert [(r[3], r[4]) for r in copied] == [(r[3], r[4]) for r in source]


def run_in_background(service: RelayService) -> threading.Thread:
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    return thread


def relay_once(config: Config) -> int:
    return RelayService(config, stop_at_end=True, handle_signals=False).run()


def identical_upstreams(local_stack, relay_setup, extra_broker, count: int, **options):
    """A failover relay over ``east-b`` (preferred) and the local source, both holding the
    same first ``count`` records."""
    setup = relay_setup(
        sources=(UPSTREAM_B, SOURCE), mode="failover", east_b=extra_broker.bootstrap, **options
    )
    both = [extra_broker.bootstrap, local_stack.bootstrap(SOURCE)]
    for bootstrap in both:
        create_topic(bootstrap, setup.source, PARTITIONS)
    produce(both, setup.source, records(0, count))
    return setup


def switches(service: RelayService, setup, reason: str) -> float:
    return service.metrics.switches.labels(setup.source, reason)._value.get()


def test_the_current_upstream_dies_and_the_other_goes_on_exactly(
    local_stack, relay_setup, extra_broker
):
    setup = identical_upstreams(local_stack, relay_setup, extra_broker, 200)
    service = RelayService(setup.config, handle_signals=False)
    thread = run_in_background(service)
    try:
        wait_for(lambda: relayed(local_stack, setup) >= 50, "the first records")
        extra_broker.kill()  # the current upstream
        produce([local_stack.bootstrap(SOURCE)], setup.source, records(200, 200))
        wait_for(lambda: relayed(local_stack, setup) == 400, "every record via us-east-1")
    finally:
        service.request_stop()
        thread.join(60)
    assert_exact(local_stack, setup)
    assert switches(service, setup, "failure") >= 1
    metrics = service.metrics
    assert metrics.source_healthy.labels(UPSTREAM_B)._value.get() == 0
    assert metrics.source_healthy.labels(SOURCE)._value.get() == 1
    assert metrics.current_source.labels(setup.source, SOURCE)._value.get() == 1
    assert metrics.current_source.labels(setup.source, UPSTREAM_B)._value.get() == 0
    relayed_total = sum(metrics.records.labels(setup.source, str(p))._value.get() for p in (0, 1))
    assert relayed_total == 400


def test_an_upstream_falling_behind_past_the_threshold_is_left_for_the_leader(
    local_stack, relay_setup, extra_broker
):
    setup = identical_upstreams(
        local_stack, relay_setup, extra_broker, 100, relay_options="lag_threshold = 50"
    )
    service = RelayService(setup.config, handle_signals=False)
    thread = run_in_background(service)
    try:
        wait_for(lambda: relayed(local_stack, setup) == 100, "the shared records")
        produce([local_stack.bootstrap(SOURCE)], setup.source, records(100, 300))
        wait_for(lambda: relayed(local_stack, setup) == 400, "the leader's records")
    finally:
        service.request_stop()
        thread.join(60)
    assert_exact(local_stack, setup)
    assert switches(service, setup, "lag") >= 1
    assert switches(service, setup, "failure") == 0

    # A restart: the preferred upstream still lacks the records relayed last. It is
    # passed over (not compared, which would halt as "upstreams differ").
    restarted = RelayService(setup.config, handle_signals=False)
    thread = run_in_background(restarted)
    try:
        produce([local_stack.bootstrap(SOURCE)], setup.source, records(400, 20))
        wait_for(
            lambda: relayed(local_stack, setup) == 420 or bool(restarted.workers.halted()),
            "the records after the restart",
        )
        assert restarted.workers.halted() == []
    finally:
        restarted.request_stop()
        thread.join(60)
    assert_exact(local_stack, setup)


def test_an_upstream_must_reach_the_next_offset_to_be_chosen():
    tp = ("t", 0)
    behind = UpstreamState(True, {tp: 100})
    ahead = UpstreamState(True, {tp: 400})
    states = {"a": behind, "b": ahead}
    assert choose_upstream(None, ["a", "b"], states, tp, 50, 300).upstream == "b"
    assert choose_upstream(None, ["a", "b"], states, tp, 50, 100).upstream == "a"
    assert choose_upstream(None, ["a", "b"], states, tp, 50, None).upstream == "a"
    waiting = choose_upstream(None, ["a"], states, tp, 50, 300)
    assert waiting.upstream is None and "holds offset 299" in waiting.waiting
    # The current upstream is read from: its end in the last check may be older.
    assert choose_upstream("a", ["a", "b"], states, tp, 500, 300).upstream == "a"
    failed = choose_upstream("b", ["a", "b"], {"a": behind}, tp, 50, 300)
    assert (failed.upstream, failed.reason) == (None, "failure")


def test_upstreams_that_differ_halt_the_partition_and_nothing_wrong_is_written(
    local_stack, relay_setup, extra_broker
):
    setup = relay_setup(
        sources=(UPSTREAM_B, SOURCE), mode="failover", east_b=extra_broker.bootstrap
    )
    for bootstrap in (extra_broker.bootstrap, local_stack.bootstrap(SOURCE)):
        create_topic(bootstrap, setup.source, PARTITIONS)
    produce([extra_broker.bootstrap], setup.source, records(0, 40, b"a"))
    produce([local_stack.bootstrap(SOURCE)], setup.source, records(0, 60, b"b"))
    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 0
    before = [
        read_partition(local_stack.bootstrap(DESTINATION), setup.destination, p)
        for p in range(PARTITIONS)
    ]
    assert sum(len(b) for b in before) == 40
    extra_broker.kill()
    assert RelayService(setup.config, stop_at_end=True, handle_signals=False).run() == 1
    after = [
        read_partition(local_stack.bootstrap(DESTINATION), setup.destination, p)
        for p in range(PARTITIONS)
    ]
    assert after == before
    relay = setup.config.relay
    assert relay is not None
    store = CheckpointStore(
        {"bootstrap.servers": local_stack.bootstrap(DESTINATION)},
        relay.checkpoint_topic,
        relay.checkpoint_partitions,
    )
    for partition in range(PARTITIONS):
        target = WriteTarget(
            provenance.SourcePartition(UPSTREAM_B, setup.source, partition),
            setup.destination,
            partition,
        )
        checkpoint = store.resume_point(target).checkpoint
        assert checkpoint is not None
        assert "upstreams differ" in checkpoint.halted and SOURCE in checkpoint.halted
        assert "offset 19 as relayed" in checkpoint.halted


def test_with_no_upstream_answering_the_relay_waits_and_never_exits_by_itself(
    local_stack, relay_setup
):
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    setup = relay_setup(sources=(UPSTREAM_B,), east_b=dead)
    service = RelayService(setup.config, handle_signals=False)
    thread = run_in_background(service)
    time.sleep(5)
    assert thread.is_alive(), "the relay gave up on its upstreams"
    assert service.metrics.source_healthy.labels(UPSTREAM_B)._value.get() == 0
    service.request_stop()
    thread.join(30)
    assert not thread.is_alive()


def test_an_edited_list_of_upstreams_relays_nothing_twice(
    local_stack, relay_setup, extra_broker, tmp_path
):
    setup = identical_upstreams(local_stack, relay_setup, extra_broker, 200)
    assert relay_once(setup.config) == 0

    # The first upstream is lost for good; the operator removes it from the list.
    extra_broker.kill()
    produce([local_stack.bootstrap(SOURCE)], setup.source, records(200, 100))
    text = (
        setup.path.read_text()
        .replace(f'sources = ["{UPSTREAM_B}", "{SOURCE}"]', f'sources = ["{SOURCE}"]')
        .replace('mode = "failover"', 'mode = "single"')
    )
    edited = tmp_path / "edited.toml"
    edited.write_text(text)
    try:
        refusal = f"exit code {relay_once(load_config(edited))}"
    except RelayIdentityError as exc:
        refusal = str(exc)
    assert relayed(local_stack, setup) == 200, (
        f"{relayed(local_stack, setup)} records in the destination where 200 were relayed: "
        "records written again under another origin name"
    )
    assert f'set origin = "{UPSTREAM_B}"' in refusal

    edited.write_text(text.replace("[relay]\n", f'[relay]\norigin = "{UPSTREAM_B}"\n'))
    assert relay_once(load_config(edited)) == 0
    assert_exact(local_stack, setup)
