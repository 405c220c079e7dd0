"""Secrets never leave their process in clear: Spark processes get ``${NAME}`` references
and resolve them from their own environment.

The end-to-end test runs egress with the S3 secret key in an environment variable and
Spark's event log on (it records every plan, job and stage), and then searches every byte
the run left behind — logs, event log, Spark checkpoint, driver state — for the secret."""

from __future__ import annotations

import pickle
import uuid

import pytest
from confluent_kafka import Producer

from egress.kafka_source import KafkaStreamReader
from egress.segment_sink import SegmentStreamWriter
from egress.spark_options import CONFIG_OPTION, config_to_option
from replicator.core.config import load_config
from replicator.core.errors import ConfigError
from replicator.core.spark import config_from_json, config_to_json
from tests.fixtures.egress import create_topic, egress_toml, start_egress
from tests.fixtures.stack import SOURCE

SECRET_VARIABLE = "REPLICATOR_TEST_S3_SECRET"


def with_secret_reference(text: str) -> str:
    return text.replace(
        'secret_access_key = "test"', f'secret_access_key = "${{{SECRET_VARIABLE}}}"'
    )


def test_spark_processes_get_references_and_resolve_them_where_they_run(
    local_stack, bucket, tmp_path
):
    secret = f"s3-secret-{uuid.uuid4().hex}"
    path = tmp_path / "egress.toml"
    path.write_text(with_secret_reference(egress_toml(local_stack, bucket, tmp_path, {"t": {}})))
    config = load_config(path, {SECRET_VARIABLE: secret})
    shipped = config_to_json(config)
    assert secret not in shipped and f"${{{SECRET_VARIABLE}}}" in shipped
    # Readers and writers pickled into executors hold only the option.
    options = {CONFIG_OPTION: config_to_option(config)}
    for payload in (KafkaStreamReader(options), SegmentStreamWriter(options)):
        assert secret.encode() not in pickle.dumps(payload)
    elsewhere = config_from_json(shipped, {SECRET_VARIABLE: secret})
    assert elsewhere.s3.secret_access_key is not None
    assert elsewhere.s3.secret_access_key.get_secret_value() == secret
    assert elsewhere == config
    assert secret not in config_to_json(elsewhere)  # and on again, still a reference
    with pytest.raises(ConfigError, match=f"environment variable {SECRET_VARIABLE} is not set"):
        config_from_json(shipped, {})


def test_no_secret_in_plans_event_logs_checkpoints_or_logs_of_an_egress_run(
    local_stack, bucket, unique, tmp_path, monkeypatch
):
    secret = f"s3-secret-{uuid.uuid4().hex}"
    topic = unique("secrets")
    create_topic(local_stack, topic, 2)
    producer = Producer({"bootstrap.servers": local_stack.bootstrap(SOURCE)})
    for i in range(50):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    producer.flush(30)
    path = tmp_path / "egress.toml"
    path.write_text(with_secret_reference(egress_toml(local_stack, bucket, tmp_path, {topic: {}})))
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "events"
    conf_dir.mkdir()
    events.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.compress false\n"
        f"spark.eventLog.dir file://{events}\n"
    )
    monkeypatch.setenv(SECRET_VARIABLE, secret)
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    log = tmp_path / "egress.log"
    assert start_egress(path, log, "--stop-at-end").wait(300) == 0, log.read_text()[-3000:]

    listing = local_stack.s3().list_objects_v2(Bucket=bucket, Prefix=f"data/{SOURCE}/{topic}/")
    assert listing.get("KeyCount", 0) > 0  # the secret worked: segments were written
    event_logs = [p for p in events.rglob("*") if p.is_file()]
    assert event_logs, "Spark wrote no event log"
    text = b"".join(p.read_bytes() for p in event_logs)
    assert b"physicalPlanDescription" in text and b"MicroBatchScan" in text  # plans recorded
    leaks = [p for p in tmp_path.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaks == [], leaks


def test_a_secret_written_in_clear_is_shipped_with_a_warning(local_stack, bucket, tmp_path, caplog):
    path = tmp_path / "egress.toml"
    path.write_text(egress_toml(local_stack, bucket, tmp_path, {"t": {}}))
    config = load_config(path)
    with caplog.at_level("WARNING", logger="replicator.core.spark"):
        config_from_json(config_to_json(config))
    messages = [r.getMessage() for r in caplog.records]
    assert any("s3.secret_access_key is not a ${NAME} reference" in m for m in messages), messages
