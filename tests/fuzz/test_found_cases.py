"""Cases the generative check of the archive path found, kept as fixed tests.

Each is the shrunk workload ``make fuzz`` printed (``Falsifying example: ...``), pasted
as it was, with the defect it found. They run through the same path and oracle as the
generated ones (see tests.fixtures.archive_path)."""

from __future__ import annotations

import pytest

from tests.fixtures.archive_path import End, Rec, Send, Shape, TopicSpec, Workload, run_workload

FOUND: dict[str, list[Workload]] = {
    # An ingress source by topic_pattern in the deployment config: the config handed to
    # Spark's processes wrote the source's unset topic as "", which the model refused.
    # Egress: "egress stopped: ValidationError: 1 validation error for Config".
    "pattern source, egress": [
        Workload(
            topics=(
                TopicSpec(partitions=4, compacted=True, log_append_time=True, small_limit=True),
                TopicSpec(partitions=3, compacted=False, log_append_time=True, small_limit=True),
            ),
            actions=(
                End(txn=0, commit=True),
                End(txn=0, commit=False),
                End(txn=0, commit=False),
                Send(
                    topic=0,
                    partition=0,
                    records=(
                        Rec(key=b"", value_size=None, headers=(), timestamp=None),
                        Rec(key=b"", value_size=None, headers=(), timestamp=("now", -4128)),
                        Rec(key=b"", value_size=None, headers=(), timestamp=None),
                        Rec(key=b"", value_size=None, headers=(), timestamp=None),
                    ),
                    txn=None,
                ),
                End(txn=0, commit=False),
            ),
            shape=Shape(ingress_by_pattern=True, max_segment_messages=1),
        )
    ],
    # The same in restore's tasks: every partition "failed" with the ValidationError
    # (topics without a record: egress's Spark processes never had to read the config).
    "pattern source, restore": [
        Workload(
            topics=(
                TopicSpec(partitions=4, compacted=True, log_append_time=True, small_limit=True),
                TopicSpec(partitions=3, compacted=False, log_append_time=True, small_limit=True),
            ),
            actions=(
                End(txn=0, commit=True),
                End(txn=0, commit=False),
                End(txn=1, commit=False),
                End(txn=1, commit=False),
                End(txn=0, commit=False),
            ),
            shape=Shape(ingress_by_pattern=True, max_segment_messages=1, streaming=True),
        )
    ],
    # A second deployment in the working directory of an earlier one (its own checkpoint,
    # the same state_dir): its batches were taken for the earlier one's, so its
    # descriptors named no export start ("export starts {} for {'1'}") and ingress would
    # have halted the partition as lost.
    "second deployment in one directory": [
        Workload(
            topics=(TopicSpec(partitions=2),),
            actions=(
                Send(topic=0, partition=0, records=(Rec(),) * 5),
                Send(topic=0, partition=1, records=(Rec(key=None),), txn=0),
                End(txn=0, commit=True),
            ),
            shape=Shape(max_segment_messages=1),
        ),
        Workload(
            topics=(
                TopicSpec(partitions=4, compacted=True, log_append_time=True, small_limit=True),
                TopicSpec(partitions=3, compacted=False, log_append_time=True, small_limit=True),
            ),
            actions=(
                End(txn=0, commit=True),
                End(txn=1, commit=False),
                End(txn=0, commit=False),
                End(txn=0, commit=True),
                Send(
                    topic=0,
                    partition=1,
                    records=(Rec(key=b"", value_size=0, headers=(), timestamp=None),),
                    txn=None,
                ),
            ),
            shape=Shape(rename=True, key_prefix_filter="a", max_segment_messages=1),
        ),
    ],
    # Streaming egress stopped short of the source: its last segment (13 records under
    # max_segment_messages = 25, four of about 1 MiB) waited for the default
    # max_segment_age of five minutes. The generator's own gap (it drew no segment age);
    # kept for what it holds: values at the topic's limit in a LogAppendTime compacted
    # topic, a transaction left open until the end, a filter on a NUL key prefix.
    "streaming, values at the limit, a transaction open to the end": [
        Workload(
            topics=(
                TopicSpec(partitions=1, compacted=True, log_append_time=True),
                TopicSpec(partitions=1, small_limit=True),
            ),
            actions=(
                Send(
                    topic=0,
                    partition=0,
                    records=(
                        Rec(
                            key=b"",
                            value_size=1047989,
                            headers=(("h", None),),
                            timestamp=("at", 1000000000000),
                        ),
                    ),
                ),
                Send(
                    topic=0,
                    partition=0,
                    records=(
                        Rec(
                            key=b"\xe9\xd0\xb8I)V\xbf/(I4X",
                            value_size=None,
                            headers=(("", None), ("replicator", None), ("", b"K")),
                            timestamp=("at", 86400000),
                        ),
                        Rec(
                            key=b"",
                            value_size=None,
                            headers=(("h", None), ("ключ", None), ("h", b"_\xec\x8b")),
                            timestamp=("now", 1164),
                        ),
                        Rec(
                            key=b"\xa9\x8c\x97\x9d\x93L",
                            value_size=1048025,
                            headers=(("h", None),),
                            timestamp=("now", -171),
                        ),
                        Rec(key=b"", value_size=None, headers=(("", None),), timestamp=None),
                        Rec(
                            key=b"\xf8\x12\x0fA\x83^",
                            value_size=1048106,
                            headers=(("replicator", None), ("ключ", None)),
                            timestamp=("now", -95),
                        ),
                        Rec(
                            key=b"key",
                            value_size=1048082,
                            headers=(("", None), ("h", b"v\x7f\x90")),
                            timestamp=None,
                        ),
                        Rec(key=b"", value_size=None, headers=(("h", None),), timestamp=None),
                        Rec(key=b"", value_size=29, headers=(), timestamp=("now", -20888)),
                        Rec(
                            key=b"\xc3s\xe4",
                            value_size=0,
                            headers=(("ключ", b"\x01\xd1\xfc\n"), ("h", None), ("env", None)),
                            timestamp=("at", 0),
                        ),
                        Rec(
                            key=b"",
                            value_size=0,
                            headers=(
                                ("replicator", b"\x0c\xaa("),
                                ("env", None),
                                ("replicator", None),
                            ),
                            timestamp=None,
                        ),
                        Rec(
                            key=b"",
                            value_size=47,
                            headers=(("env", None), ("", None)),
                            timestamp=("now", -18119430),
                        ),
                    ),
                    txn=0,
                ),
                End(txn=1, commit=True),
            ),
            shape=Shape(
                key_prefix_filter="\x00", max_segment_messages=25, streaming=True, restore_cut=5
            ),
        )
    ],
}
"""Each case: workloads run one after another in one working directory, as deployments."""


@pytest.mark.parametrize("case", sorted(FOUND))
def test_a_found_case_goes_through_the_archive_path_exactly(
    local_stack, spark, tmp_path, unique, case
):
    for number, workload in enumerate(FOUND[case]):
        run_workload(local_stack, spark, tmp_path / f"run-{number}", unique("found"), workload)
