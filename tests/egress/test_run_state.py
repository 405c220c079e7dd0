"""Egress runs that share a working directory: each names where its partitions start.

The driver's statistics (segments written per partition, which tell the descriptor
publisher when to look for a partition's export start) used to live in one directory per
working directory, keyed by micro-batch id. A second egress there (another deployment, a
reset checkpoint) starts again at batch 0, and its batches were taken for ones already
recorded: its topics' descriptors never named where their partitions start, and ingress
halted those partitions as lost."""

from __future__ import annotations

import json
import shutil

from egress.driver_state import DriverState, last_run_directory
from egress.job import EgressJob
from tests.fixtures.egress import create_topic
from tests.fixtures.records import produce_records
from tests.fixtures.stack import SOURCE

PARTITIONS = 2


def run_to_end(config, spark):
    return EgressJob(config, stop_at_end=True, spark=spark, handle_signals=False).run()


def export_starts(local_stack, config, topic: str) -> dict[str, int]:
    body = local_stack.s3().get_object(
        Bucket=config.bucket(SOURCE), Key=f"data/{SOURCE}/{topic}/_topic.json"
    )["Body"]
    return json.loads(body.read())["export_start"]


def test_a_second_egress_in_the_same_directory_names_where_its_partitions_start(
    local_stack, egress_config, unique, spark, tmp_path
):
    first, second = unique("first"), unique("second")
    for topic in (first, second):
        create_topic(local_stack, topic, PARTITIONS)
        produce_records(local_stack.bootstrap(SOURCE), topic, PARTITIONS, 30)

    config_a, _ = egress_config({first: {}}, checkpoint_location=str(tmp_path / "a-checkpoint"))
    run_to_end(config_a, spark)
    assert export_starts(local_stack, config_a, first) == {"0": 0, "1": 0}

    # Another deployment started in the same directory: same state_dir, its own checkpoint.
    config_b, _ = egress_config({second: {}}, checkpoint_location=str(tmp_path / "b-checkpoint"))
    assert config_b.egress.state_dir == config_a.egress.state_dir
    run_to_end(config_b, spark)
    assert export_starts(local_stack, config_b, second) == {"0": 0, "1": 0}


def test_an_egress_on_a_reset_checkpoint_names_where_new_partitions_start(
    local_stack, egress_config, unique, spark
):
    old, new = unique("old"), unique("new")
    create_topic(local_stack, old, PARTITIONS)
    produce_records(local_stack.bootstrap(SOURCE), old, PARTITIONS, 30)
    config, _ = egress_config({old: {}})
    for _ in range(3):  # batches 0, 1, 2 recorded (the later runs find new records)
        run_to_end(config, spark)
        produce_records(local_stack.bootstrap(SOURCE), old, PARTITIONS, 5)

    shutil.rmtree(config.egress.checkpoint_location)  # the operator resets the checkpoint
    create_topic(local_stack, new, PARTITIONS)
    produce_records(local_stack.bootstrap(SOURCE), new, PARTITIONS, 30)
    config, _ = egress_config({old: {}, new: {}})
    run = run_to_end(config, spark)
    assert export_starts(local_stack, config, new) == {"0": 0, "1": 0}
    _, stats = DriverState(run.state_dir).read_partitions()
    assert stats[(new, 0)].records == stats[(new, 1)].records == 30


def test_each_run_keeps_its_statistics_apart_and_the_last_is_found(
    local_stack, egress_config, unique, spark
):
    topic = unique("runs")
    create_topic(local_stack, topic, PARTITIONS)
    produce_records(local_stack.bootstrap(SOURCE), topic, PARTITIONS, 10)
    config, _ = egress_config({topic: {}})
    first = run_to_end(config, spark)
    produce_records(local_stack.bootstrap(SOURCE), topic, PARTITIONS, 4)
    second = run_to_end(config, spark)

    assert first.state_dir != second.state_dir
    assert last_run_directory(config.egress.state_dir) == second.state_dir
    assert not first.state_dir.exists()  # an ended run's directory goes at the next start
    _, stats = DriverState(second.state_dir).read_partitions()
    assert sum(s.records for (t, _), s in stats.items() if t == topic) == 2 * 4
