"""What an unhealthy upstream's warning says: never an empty reason."""

from __future__ import annotations

import concurrent.futures

from confluent_kafka import KafkaError, KafkaException

from relay.health import check_failure


def test_a_check_that_ran_out_of_time_says_so_with_its_timeout():
    # What future.result(timeout) raises when the admin's answer is late: no text of its own
    # (the warning read "upstream us-east-1 is unhealthy: end offsets: ").
    assert str(concurrent.futures.TimeoutError()) == ""
    said = check_failure("end offsets", concurrent.futures.TimeoutError(), 2.0)
    assert said == "end offsets: no answer within 2 s"


def test_a_check_that_failed_otherwise_gives_the_errors_text_or_its_kind():
    refused = KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT, "Broker: Request timed out"))
    assert check_failure("end offsets", refused, 2.0).startswith("end offsets: KafkaError{")
    assert check_failure("end offsets", RuntimeError(), 2.0) == "end offsets: RuntimeError"
