import json
import logging

from replicator.logs import JsonFormatter


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
