import logging
from pathlib import Path

import pytest

from replicator.core.config import load_config, parse_config, required
from replicator.core.errors import ConfigError
from replicator.core.kafka.clients import client_config, redacted

ROOT = Path(__file__).resolve().parents[2]

MINIMAL = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "127.0.0.1:19092"
"""


def parse(text: str, env: dict[str, str] | None = None):
    return parse_config(text, "test.toml", env or {})


def problems(text: str, env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse(text, env)
    assert str(info.value).startswith("test.toml:")
    return info.value.problems


def test_example_config_loads_with_every_section():
    config = load_config(ROOT / "config.example.toml")
    assert config.s3.endpoint_url == "http://127.0.0.1:4566"
    assert config.region("us-west-1").sqs_queue == "replicator-us-west-1-events"
    topic = required(config, "egress").topics["sensor.events"]
    assert topic.max_segment_bytes == 100 * 1024**2
    assert topic.max_segment_age == 300.0
    assert topic.max_segment_messages == 1_000_000
    source = required(config, "ingress").sources[0]
    assert (source.destination, source.lost_segment_timeout) == ("sensor.events.copy", 3600.0)
    compaction = required(config, "compaction").topics["sensor.events"]
    assert compaction.min_segment_bytes == 1024**3
    assert compaction.max_segment_bytes == 4 * 1024**3
    assert required(config, "compaction").schedule == "0 1 * * *"


def test_config_is_frozen():
    config = parse(MINIMAL)
    with pytest.raises(Exception, match="frozen"):
        config.s3.prefix = "other"


def test_unknown_key_is_named_with_its_path():
    text = (
        MINIMAL + '[egress]\nregion = "us-east-1"\n[egress.topics."a.b"]\nmax_segment_bites = 5\n'
    )
    assert problems(text) == [('egress.topics."a.b".max_segment_bites', "unknown key")]


def test_wrong_type_is_named_with_its_path():
    text = MINIMAL + '[compaction]\nregion = "us-east-1"\nparallelism = "eight"\n'
    [(path, message)] = problems(text)
    assert path == "compaction.parallelism"
    assert "integer" in message


def test_missing_region_reference_lists_known_regions():
    text = MINIMAL + '[egress]\nregion = "eu-west-9"\n'
    assert problems(text) == [
        ("egress.region", "region 'eu-west-9' is not defined under [regions] (us-east-1)")
    ]


def test_missing_required_key():
    text = '[regions.us-east-1]\nbucket = "bucket-east"\n'
    assert problems(text) == [("regions.us-east-1.kafka", "missing required key")]


def test_negative_size_is_rejected():
    text = (
        MINIMAL + '[egress]\nregion = "us-east-1"\n[egress.topics.t]\nmax_segment_bytes = "-1MiB"\n'
    )
    [(path, message)] = problems(text)
    assert path == "egress.topics.t.max_segment_bytes"
    assert "negative size '-1MiB'" in message


def test_unparseable_duration_is_rejected():
    text = (
        MINIMAL
        + '[egress]\nregion = "us-east-1"\n[egress.topics.t]\nmax_segment_age = "5 minutes"\n'
    )
    [(path, message)] = problems(text)
    assert path == "egress.topics.t.max_segment_age"
    assert "unparseable duration '5 minutes'" in message


def test_invalid_cron_schedule_is_rejected():
    text = MINIMAL + '[compaction]\nregion = "us-east-1"\nschedule = "every night"\n'
    [(path, message)] = problems(text)
    assert path == "compaction.schedule"
    assert "invalid cron schedule" in message


def test_invalid_topic_name_is_rejected():
    text = MINIMAL + '[egress]\nregion = "us-east-1"\n[egress.topics."bad/topic"]\n'
    [(path, message)] = problems(text)
    assert path.startswith("egress.topics")
    assert "invalid Kafka topic name 'bad/topic'" in message


def test_ingress_region_needs_a_queue():
    text = MINIMAL + '[ingress]\nregion = "us-east-1"\n'
    assert problems(text) == [
        (
            "regions.us-east-1.sqs_queue",
            "ingress runs in this region and needs its bucket's notification queue",
        )
    ]


def test_every_problem_is_reported_at_once():
    text = (
        MINIMAL
        + '[egress]\nregion = "nowhere"\ncolour = 1\n[compaction]\nregion = "x"\nparallelism = 0\n'
    )
    paths = sorted(path for path, _ in problems(text))
    assert paths == ["compaction.parallelism", "egress.colour"]


def test_toml_syntax_error_names_the_file():
    with pytest.raises(ConfigError, match=r"test\.toml: not valid TOML"):
        parse("[regions\n")


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: file not found"):
        load_config(tmp_path / "nope.toml")


def test_a_reference_outside_the_secret_fields_is_refused_naming_its_key():
    """Expanded there, a secret would be shown in clear (config check prints the
    values, a client id reaches the broker's logs): refused, whether or not set."""
    env = {"AWS_SECRET": "hunter2-secret"}
    for text, key in (
        (MINIMAL.replace('"bucket-east"', '"${AWS_SECRET}"'), "regions.us-east-1.bucket"),
        (
            SASL.replace('"client.id" = "repl"', '"client.id" = "x-${AWS_SECRET}"'),
            'regions.us-east-1.kafka.config."client.id"',
        ),
        (MINIMAL.replace('"bucket-east"', '"${NO_SUCH_VAR}"'), "regions.us-east-1.bucket"),
    ):
        with pytest.raises(ConfigError) as info:
            parse(text, env | {"KAFKA_PASSWORD": "pw"})
        [(where, message)] = info.value.problems
        assert where == key
        assert message.startswith("a ${NAME} reference is expanded only in a secret field")
        assert "hunter2-secret" not in str(info.value)


def test_references_are_expanded_in_secret_fields_and_the_user_name():
    text = SASL.replace('sasl_username = "replicator"', 'sasl_username = "${KAFKA_USER}"')
    kafka = parse(text, {"KAFKA_USER": "ingress", "KAFKA_PASSWORD": "pw"}).region("us-east-1").kafka
    assert kafka.sasl_username == "ingress"
    assert kafka.sasl_password is not None and kafka.sasl_password.get_secret_value() == "pw"


def test_missing_env_variable_is_named_with_its_key_path():
    text = SASL.replace('sasl_username = "replicator"', 'sasl_username = "${NO_SUCH_VAR}"')
    assert problems(text, {"KAFKA_PASSWORD": "pw"}) == [
        ("regions.us-east-1.kafka.sasl_username", "environment variable NO_SUCH_VAR is not set")
    ]


SASL = """
[regions.us-east-1]
bucket = "bucket-east"
kafka.bootstrap_servers = "broker:9096"
kafka.security_protocol = "SASL_SSL"
kafka.sasl_mechanism = "SCRAM-SHA-512"
kafka.sasl_username = "replicator"
kafka.sasl_password = "${KAFKA_PASSWORD}"
kafka.ssl_ca_location = "/etc/ca.pem"
kafka.config = { "client.id" = "repl", "socket.keepalive.enable" = true }
"""


def test_secrets_are_never_shown_in_reprs_or_logged_config():
    config = parse(SASL, {"KAFKA_PASSWORD": "hunter2-secret"})
    kafka = config.region("us-east-1").kafka
    assert "hunter2-secret" not in repr(config)
    assert "hunter2-secret" not in str(config)
    conf = client_config(kafka)
    assert conf["sasl.password"] == "hunter2-secret"
    assert "hunter2-secret" not in repr(redacted(conf))


def test_security_settings_and_raw_config_reach_the_client():
    kafka = parse(SASL, {"KAFKA_PASSWORD": "pw"}).region("us-east-1").kafka
    conf = client_config(kafka, group_id="g")
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert conf["sasl.username"] == "replicator"
    assert conf["ssl.ca.location"] == "/etc/ca.pem"
    assert conf["client.id"] == "repl"
    assert conf["socket.keepalive.enable"] is True
    assert conf["group.id"] == "g"


def test_secret_value_does_not_leak_into_validation_errors():
    text = SASL.replace('kafka.sasl_mechanism = "SCRAM-SHA-512"\n', "")
    with pytest.raises(ConfigError) as info:
        parse(text, {"KAFKA_PASSWORD": "hunter2-secret"})
    assert "needs sasl_mechanism" in str(info.value)
    assert "hunter2-secret" not in str(info.value)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('"sasl.password" = "${KAFKA_PASSWORD}"', "sasl.password holds a secret"),
        ('"ssl.key.password" = "x"', "ssl.key.password holds a secret"),
        ('"sasl.jaas.config" = "x"', "sasl.jaas.config holds a secret"),
        ('"sasl.oauthbearer.client.secret" = "x"', "holds a secret"),
        ('"sasl.oauthbearer.assertion.private.key.passphrase" = "x"', "holds a secret"),
        ('"sasl.oauthbearer.assertion.private.key.pem" = "x"', "holds a secret"),
        ('"ssl.keystore.password" = "x"', "holds a secret"),
        ('"ssl.key.pem" = "x"', "holds a secret"),
        ('"ssl_key" = "x"', "holds a secret"),
        ('"sasl.oauthbearer.config" = "x"', "holds a secret"),
        ('"SASL.OAuthBearer.Client.Credentials.Client.Secret" = "x"', "holds a secret"),
        ('"security.protocol" = "PLAINTEXT"', "set by the typed field security_protocol"),
        ('"sasl.mechanisms" = "PLAIN"', "set by the typed field sasl_mechanism"),
        ('"ssl.ca.location" = "/tmp/other.pem"', "set by the typed field ssl_ca_location"),
    ],
)
def test_the_raw_kafka_table_refuses_secrets_and_security_overrides(entry, message):
    text = SASL.replace('"client.id" = "repl"', f'"client.id" = "repl", {entry}')
    with pytest.raises(ConfigError) as info:
        parse(text, {"KAFKA_PASSWORD": "hunter2-secret"})
    assert message in str(info.value)
    assert "hunter2-secret" not in str(info.value)


def test_weakened_certificate_checks_and_plain_passwords_in_clear_are_warned_about(caplog):
    text = SASL.replace(
        '"client.id" = "repl"',
        '"client.id" = "repl", "enable.ssl.certificate.verification" = false',
    )
    with caplog.at_level(logging.WARNING, logger="replicator.core.config"):
        parse(text, {"KAFKA_PASSWORD": "pw"})
        plain = SASL.replace('"SASL_SSL"', '"SASL_PLAINTEXT"').replace('"SCRAM-SHA-512"', '"PLAIN"')
        parse(plain, {"KAFKA_PASSWORD": "pw"})
    messages = [r.getMessage() for r in caplog.records]
    assert any("turns off broker certificate checks" in m for m in messages), messages
    assert any("SASL PLAIN over SASL_PLAINTEXT" in m for m in messages), messages


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        # librdkafka's own aliases of the typed properties (it resolves them to one setting,
        # and the last one set wins over the typed value).
        ('"metadata.broker.list" = "evil:9092"', "set by the typed field bootstrap_servers"),
        ('"sasl.mechanism" = "PLAIN"', "set by the typed field sasl_mechanism"),
        ('"ssl.ca.pem" = "-----BEGIN"', "set by the typed field ssl_ca_location"),
        ('"ssl.certificate.pem" = "x"', "set by the typed field ssl_certificate_location"),
        ('"sasl.oauthbearer.client.credentials.client.secret" = "x"', "holds a secret"),
        # Native code loaded into the process.
        ('"plugin.library.paths" = "/tmp/evil.so"', "loads native code"),
        ('"ssl.engine.location" = "/tmp/engine.so"', "loads native code"),
        ('"ssl.providers" = "/tmp/provider"', "loads native code"),
        ('"sasl.kerberos.kinit.cmd" = "sh -c id"', "runs a command"),
    ],
)
def test_the_raw_kafka_table_refuses_aliases_of_typed_settings_and_native_code(entry, message):
    text = SASL.replace('"client.id" = "repl"', f'"client.id" = "repl", {entry}')
    with pytest.raises(ConfigError) as info:
        parse(text, {"KAFKA_PASSWORD": "hunter2-secret"})
    assert message in str(info.value)
    assert "regions.us-east-1.kafka.config" in str(info.value)


@pytest.mark.parametrize(
    "value", ["false", "False", "FALSE", "f", "F", "0", "false_as_bool", "0_as_int"]
)
def test_certificate_checks_off_are_warned_about_in_every_spelling_librdkafka_reads(value, caplog):
    toml = {"false_as_bool": "false", "0_as_int": "0"}.get(value, f'"{value}"')
    text = SASL.replace(
        '"client.id" = "repl"',
        f'"client.id" = "repl", "enable.ssl.certificate.verification" = {toml}',
    )
    with caplog.at_level(logging.WARNING, logger="replicator.core.config"):
        parse(text, {"KAFKA_PASSWORD": "pw"})
    messages = [r.getMessage() for r in caplog.records]
    assert any("turns off broker certificate checks" in m for m in messages), (value, messages)


@pytest.mark.parametrize("value", ['"true"', '"t"', '"1"', "1", "true"])
def test_certificate_checks_left_on_are_not_warned_about(value, caplog):
    text = SASL.replace(
        '"client.id" = "repl"',
        f'"client.id" = "repl", "enable.ssl.certificate.verification" = {value}',
    )
    with caplog.at_level(logging.WARNING, logger="replicator.core.config"):
        parse(text, {"KAFKA_PASSWORD": "pw"})
    assert not [r for r in caplog.records if "certificate checks" in r.getMessage()]


def test_a_value_librdkafka_would_not_read_as_a_boolean_is_refused():
    text = SASL.replace(
        '"client.id" = "repl"', '"client.id" = "repl", "enable.ssl.certificate.verification" = "no"'
    )
    with pytest.raises(
        ConfigError, match=r"enable\.ssl\.certificate\.verification = 'no' is not a boolean"
    ):
        parse(text, {"KAFKA_PASSWORD": "pw"})


def test_the_ssl_key_password_is_a_typed_secret():
    text = SASL.replace(
        'kafka.ssl_ca_location = "/etc/ca.pem"',
        'kafka.ssl_ca_location = "/etc/ca.pem"\nkafka.ssl_key_password = "${KEY_PASSWORD}"',
    )
    config = parse(text, {"KAFKA_PASSWORD": "pw", "KEY_PASSWORD": "key-secret"})
    assert "key-secret" not in repr(config)
    assert client_config(config.region("us-east-1").kafka)["ssl.key.password"] == "key-secret"


def test_sasl_without_credentials_is_rejected():
    text = SASL.replace('kafka.sasl_password = "${KAFKA_PASSWORD}"\n', "")
    [(path, message)] = problems(text)
    assert path == "regions.us-east-1.kafka"
    assert "needs sasl_username and sasl_password" in message


def test_sse_kms_needs_a_key_id():
    [(path, message)] = problems('[s3]\nsse = "SSE-KMS"\n' + MINIMAL)
    assert path == "s3"
    assert "sse_kms_key_id" in message


def test_part_size_below_the_s3_minimum_is_rejected():
    [(path, message)] = problems('[s3]\nmultipart_part_size = "1MiB"\n' + MINIMAL)
    assert path == "s3"
    assert "between 5MiB and 5GiB" in message


def test_a_missing_required_section_names_the_file_and_the_key():
    config = parse(MINIMAL)
    for section in ("egress", "ingress", "compaction"):
        with pytest.raises(ConfigError) as info:
            required(config, section)
        assert info.value.problems == [(section, f"missing [{section}] section")]
        assert str(info.value) == f"test.toml: {section}: missing [{section}] section"


def test_the_example_config_names_its_file_in_errors():
    config = load_config(ROOT / "config.example.toml")
    assert config.source.endswith("config.example.toml")
    assert required(config, "egress").region == "us-east-1"


RELAY = """
[regions.east-b]
kafka.bootstrap_servers = "127.0.0.1:39092"
[regions.west]
kafka.bootstrap_servers = "127.0.0.1:49092"
[relay]
mode = "failover"
sources = ["us-east-1", "east-b"]
destination = "west"
[[relay.topics]]
source_topic = "orders"
"""


def test_a_relay_config_names_clusters_by_kafka_settings_alone():
    config = parse(MINIMAL + RELAY)
    relay = required(config, "relay")
    assert (relay.origin, relay.topics[0].destination) == ("us-east-1", "orders")
    assert config.region("east-b").bucket is None


def test_relay_mistakes_are_reported_with_their_key():
    found = problems(MINIMAL + RELAY.replace('"east-b"]', '"east-b", "nowhere"]'))
    assert (
        "relay.sources[2]",
        "region 'nowhere' is not defined under [regions] (east-b, us-east-1, west)",
    ) in found
    single = RELAY.replace('sources = ["us-east-1", "east-b"]', 'sources = ["us-east-1"]')
    assert ("relay.sources", "failover needs at least two different upstreams") in problems(
        MINIMAL + single
    )
    loop = RELAY.replace('destination = "west"', 'destination = "east-b"')
    assert any("would be relayed into itself" in m for _, m in problems(MINIMAL + loop))


def test_a_region_that_egress_uses_needs_its_bucket():
    text = MINIMAL + RELAY + '[egress]\nregion = "east-b"\n'
    assert ("regions.east-b.bucket", "egress.region needs this region's bucket") in problems(text)


FILTERED = """
[[relay.topics.filters]]
plugin = "replicator.core.filters.builtin:by_header"
config = { name = "h" }
[[relay.topics.filters]]
plugin = "os:system"
"""


def test_a_filter_plugin_outside_the_allowed_modules_is_refused_before_it_is_imported():
    """A plugin is code the service runs: only the built-in filters and the modules
    [filters] allowed_modules names may be loaded."""
    found = problems(MINIMAL + RELAY + FILTERED)
    assert found == [
        (
            "relay.topics[0].filters[1].plugin",
            "module 'os' is not among [filters] allowed_modules (nor a built-in filter): "
            "a filter plugin is code run with the service's rights; list the module or its "
            "package there to allow it",
        )
    ]
    allowed = parse(MINIMAL + RELAY + FILTERED + '[filters]\nallowed_modules = ["os"]\n')
    assert required(allowed, "relay").topics[0].filters[1].plugin == "os:system"
    # A prefix is a whole package name: "mypkg" allows mypkg.filters, not mypkgevil.
    text = (MINIMAL + RELAY + FILTERED).replace("os:system", "mypkgevil.x:f")
    assert problems(text + '[filters]\nallowed_modules = ["mypkg"]\n')
    text = (MINIMAL + RELAY + FILTERED).replace("os:system", "mypkg.filters:f")
    parse(text + '[filters]\nallowed_modules = ["mypkg"]\n')


def test_a_secret_whose_variable_is_unset_fails_where_it_is_used_not_at_load():
    """A process is given only the secrets it uses (one Secret per workload): the
    config's other secrets name variables it lacks, and it loads regardless. Using such
    a secret fails, naming the variable and the key; nothing runs with an empty one."""
    text = SASL + '[regions.us-west-1]\nbucket = "b-west"\nkafka.bootstrap_servers = "w:9092"\n'
    text += (
        'kafka.security_protocol = "SASL_SSL"\nkafka.sasl_mechanism = "SCRAM-SHA-512"\n'
        'kafka.sasl_username = "r"\nkafka.sasl_password = "${WEST_PASSWORD}"\n'
    )
    config = parse(text, {"KAFKA_PASSWORD": "pw"})
    assert client_config(config.region("us-east-1").kafka)["sasl.password"] == "pw"
    with pytest.raises(ConfigError) as info:
        client_config(config.region("us-west-1").kafka)
    assert str(info.value) == (
        "test.toml: regions.us-west-1.kafka.sasl_password: environment variable "
        "WEST_PASSWORD is not set"
    )
    assert "WEST_PASSWORD" in repr(config.region("us-west-1").kafka.sasl_password)
    assert parse(text, {"KAFKA_PASSWORD": "pw"}) == config


def test_a_non_secret_value_whose_variable_is_unset_still_fails_at_load():
    text = SASL.replace('sasl_username = "replicator"', 'sasl_username = "${NO_USER}"')
    found = problems(text, {})
    assert (
        "regions.us-east-1.kafka.sasl_username",
        "environment variable NO_USER is not set",
    ) in found
