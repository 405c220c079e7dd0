"""Secrets never leave their process in clear: Spark processes get ``${NAME}`` references
and resolve them from their own environment.

The end-to-end test runs egress with the S3 secret key in an environment variable and
Spark's event log on (it records every plan, job and stage), and then searches every byte
the run left behind — logs, event log, Spark checkpoint, driver state — for the secret."""

from __future__ import annotations

import pickle
import uuid

import pytest

from egress.kafka_source import KafkaStreamReader
from egress.segment_sink import SegmentStreamWriter
from egress.spark_options import CONFIG_OPTION, config_to_option
from replicator.core.config import load_config, parse_config
from replicator.core.config_json import config_from_json, config_to_json
from replicator.core.errors import ConfigError
from tests.fixtures.egress import egress_toml, round_robin_topic, start_egress
from tests.fixtures.jvm import write_spark_defaults
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
    round_robin_topic(local_stack, topic, 2, 50)
    path = tmp_path / "egress.toml"
    path.write_text(with_secret_reference(egress_toml(local_stack, bucket, tmp_path, {topic: {}})))
    conf_dir, events = tmp_path / "spark-conf", tmp_path / "events"
    events.mkdir()
    write_spark_defaults(
        conf_dir,
        f"spark.eventLog.enabled true\nspark.eventLog.compress false\n"
        f"spark.eventLog.dir file://{events}\n",
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


REFERENCES = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "127.0.0.1:19092"
kafka.security_protocol = "SASL_SSL"
kafka.sasl_mechanism = "SCRAM-SHA-512"
kafka.sasl_username = "${KAFKA_USER}"
kafka.sasl_password = "${KAFKA_PASSWORD}"
[egress]
region = "us-east-1"
"""


def test_the_user_name_reference_is_handed_to_spark_as_written_and_others_are_refused():
    """References are expanded in secret fields and sasl_username only; the user name
    travels as its reference, as secrets do. One anywhere else (a raw librdkafka
    property, a filter's config) is refused at load: expanded, it would show a secret in
    clear."""
    env = {"KAFKA_USER": f"user-{uuid.uuid4().hex}", "KAFKA_PASSWORD": uuid.uuid4().hex}
    config = parse_config(REFERENCES, "references.toml", env)
    assert config.region("us-east-1").kafka.sasl_username == env["KAFKA_USER"]
    shipped = config_to_json(config)
    for name in ("KAFKA_USER", "KAFKA_PASSWORD"):
        assert env[name] not in shipped, name
        assert f"${{{name}}}" in shipped, name
    elsewhere = config_from_json(shipped, env)
    assert elsewhere == config
    assert env["KAFKA_USER"] not in config_to_json(elsewhere)  # and on again
    with pytest.raises(ConfigError, match="environment variable KAFKA_USER is not set"):
        config_from_json(shipped, {k: v for k, v in env.items() if k != "KAFKA_USER"})
    leaky = REFERENCES + '[egress.defaults]\nmax_segment_age = "${SEGMENT_AGE}"\n'
    with pytest.raises(ConfigError, match=r"egress\.defaults\.max_segment_age: a \$\{NAME\}"):
        parse_config(leaky, "references.toml", {**env, "SEGMENT_AGE": "90s"})
