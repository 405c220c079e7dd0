from egress.job import root_cause
from replicator.core.errors import ReplicatorError, error_names

SPARK_FAILURE = (
    (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: "
        "[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source "
        "perform latestOffset: "
    )
    + """Traceback (most recent call last):
  File "/x/python_streaming_source_runner.py", line 281, in main
  File "/x/kafka_source.py", line 9, in latestOffset
egress.errors.DataLossError: data loss: topic t partition 3: offsets 5..9 will not be exported
 SQLSTATE: 38000 SQLSTATE: XXKST
=== Streaming Query ===
"""
)


def test_root_cause_is_the_replicator_error_inside_a_spark_failure():
    assert root_cause(SPARK_FAILURE) == (
        "data loss: topic t partition 3: offsets 5..9 will not be exported"
    )


def test_root_cause_of_a_foreign_error_keeps_its_type():
    text = "Traceback (most recent call last):\nKeyError: 'x'\n"
    assert root_cause(text) == "KeyError: 'x'"


def test_every_error_of_the_class_tree_counts_as_ours_including_new_ones():
    names = error_names()
    for expected in ("StorageError", "ObjectNotFoundError", "BrokerError", "DataLossError"):
        assert expected in names
    assert "CorruptSegmentError" in names and "RecordTooLargeError" in names

    class ShinyNewError(ReplicatorError):
        pass

    text = "Traceback\nmodule.ShinyNewError: the reason\nKeyError: 'later'\n"
    assert root_cause(text) == "the reason"


def test_every_error_name_ends_in_error():
    assert all(name.endswith("Error") for name in error_names())
