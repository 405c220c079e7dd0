import json
import logging

from replicator.core.logs import ContextLog, JsonFormatter, partition_fields


def test_json_log_lines_carry_topic_partition_and_offsets_as_fields():
    record = logging.LogRecord(
        "egress.sink", logging.ERROR, __file__, 1, "lost %d offsets", (5,), None
    )
    record.topic, record.partition, record.start, record.end = "orders", 3, 10, 14
    line = JsonFormatter().format(record)
    assert "\n" not in line
    data = json.loads(line)
    assert data["message"] == "lost 5 offsets"
    assert (data["level"], data["logger"]) == ("ERROR", "egress.sink")
    assert (data["topic"], data["partition"], data["start"], data["end"]) == ("orders", 3, 10, 14)


def test_exceptions_stay_on_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    data = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in data["exception"]


def test_partition_logger_adds_its_fields_to_the_calls_own():
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("tests.partition_log")
    logger.addHandler(Keep())
    logger.setLevel(logging.INFO)
    worker_log = ContextLog(logger, partition_fields("us-east-1", "orders", 2))
    worker_log.info("resumes at %d", 42, extra={"offset": 42})
    worker_log.warning("no offsets")
    first, second = (json.loads(JsonFormatter().format(r)) for r in seen)
    assert first["message"] == "resumes at 42"
    assert (first["region"], first["topic"], first["partition"], first["offset"]) == (
        "us-east-1",
        "orders",
        2,
        42,
    )
    assert second["partition"] == 2 and "offset" not in second
