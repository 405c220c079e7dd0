"""``replicator config check`` and the configuration reference: a file checked against
the local stack (everything answers), against a wrong endpoint (that check fails naming
why), and with a secret whose variable is not set (named, exit 1, never shown); the
reference and the JSON Schema come from the model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.ports import free_port
from replicator.config_check import check, effective, render
from replicator.core.config import parse_config
from replicator.core.config_reference import human_duration, human_size, markdown, undocumented
from tests.fixtures.stack import SOURCE

DOCS = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_the_local_stack_answers_every_check(local_stack, tmp_path):
    result = check(local_stack.config_path, connect_to=True, write_probe=True)
    assert result.ok, render(result)
    whats = {(p.service, p.what) for p in result.probes}
    assert ("ingress", "kafka metadata") in whats
    assert ("ingress", "bucket write+delete") in whats
    assert ("ingress", "queue") in whats
    assert render(result).endswith("OK")


def test_a_wrong_endpoint_fails_its_check_naming_why(local_stack, tmp_path):
    nowhere = f"127.0.0.1:{free_port()}"
    path = tmp_path / "wrong.toml"
    path.write_text(
        local_stack.config_path.read_text().replace(local_stack.bootstrap(SOURCE), nowhere)
    )
    done = cli("config", "check", "--config", str(path), "--connect", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    failed = [p for p in report["connect"] if not p["ok"]]
    assert failed and all(nowhere in p["target"] for p in failed), failed
    assert "Failed to get metadata" in failed[0]["reason"]
    assert [p for p in report["connect"] if p["ok"]], "the rest was not checked"


def test_a_secret_is_shown_as_its_reference_and_an_unset_one_fails(local_stack, tmp_path):
    text = re.sub(
        r'secret_access_key = "[^"]*"',
        'secret_access_key = "${CHECK_S3_SECRET}"',
        local_stack.config_path.read_text(),
    )
    path = tmp_path / "secret.toml"
    path.write_text(text)
    unset = cli("config", "check", "--config", str(path))
    assert unset.returncode == 1
    assert "FAIL: ${CHECK_S3_SECRET} is referenced but not set" in unset.stdout
    assert "${CHECK_S3_SECRET} (NOT SET: CHECK_S3_SECRET)" in unset.stdout

    env = {**os.environ, "CHECK_S3_SECRET": "hunter2-very-secret"}
    done = cli("config", "check", "--config", str(path), env=env)
    assert done.returncode == 0, done.stdout
    assert "s3.secret_access_key = ${CHECK_S3_SECRET} (set)" in done.stdout
    assert "hunter2-very-secret" not in done.stdout + done.stderr


def test_the_reference_is_generated_from_the_model_and_current():
    assert undocumented() == []
    assert DOCS.read_text() == markdown(), "run python -m replicator.core.config_reference --write"
    assert "| `origin` | text |" in markdown()


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.25, "250ms"), (30.0, "30s"), (300.0, "5m"), (604800.0, "7d")]
)
def test_durations_are_written_as_the_file_would(seconds, text):
    assert human_duration(seconds) == text


def test_sizes_are_written_as_the_file_would():
    assert human_size(16 * 1024**2) == "16MiB"
    assert human_size(4 * 1024**3) == "4GiB"
    assert human_size(1000) == "1000"


def test_the_schema_describes_every_section():
    done = cli("config", "schema")
    schema = json.loads(done.stdout)
    assert set(schema["properties"]) >= {"s3", "regions", "egress", "ingress", "relay"}
    relay = schema["$defs"]["RelayConfig"]["properties"]
    assert relay["checkpoint_interval"]["anyOf"] == [{"type": "string"}, {"type": "number"}]
    assert "description" in relay["origin"]


CHECKED = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "127.0.0.1:19092"
kafka.config = { "client.id" = "egress" }
[egress]
region = "us-east-1"
"""


def test_a_secret_referenced_outside_the_secret_fields_is_refused_never_printed(tmp_path):
    path = tmp_path / "leaky.toml"
    path.write_text(CHECKED.replace('"client.id" = "egress"', '"client.id" = "${CHECK_AWS}"'))
    env = {**os.environ, "CHECK_AWS": "hunter2-very-secret"}
    done = cli("config", "check", "--config", str(path), env=env)
    assert "hunter2-very-secret" not in done.stdout + done.stderr
    assert done.returncode != 0, done.stdout
    assert 'regions.us-east-1.kafka.config."client.id": a ${NAME} reference' in done.stderr


def test_raw_kafka_properties_that_hold_secrets_are_never_shown():
    """Refused at load; were one there all the same (a model built in code), the check
    shows it redacted, by librdkafka's list of sensitive properties and by its name."""
    config = parse_config(CHECKED, "checked.toml", {})
    region = config.region("us-east-1")
    raw = {
        "client.id": "egress",
        "sasl.oauthbearer.assertion.private.key.passphrase": "hunter2-passphrase",
        "ssl.key.pem": "-----BEGIN PRIVATE KEY-----hunter2",
        "my.pem": "hunter2-pem",
        "ssl.keystore.password": "hunter2-keystore",
    }
    kafka = region.kafka.model_copy(update={"config": raw})
    regions = {"us-east-1": region.model_copy(update={"kafka": kafka})}
    shown = json.dumps(effective(config.model_copy(update={"regions": regions}), {}))
    assert "hunter2" not in shown, shown
    assert '"client.id": "egress"' in shown
