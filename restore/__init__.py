"""Point-in-time restore of topics from the segment archive into any cluster.

A Spark batch job: the driver lists and plans (:mod:`restore.planning`), one
task per partition writes that partition in offset order with the shared exactly-once
writer (:mod:`replicator.core.kafka.writer`), so partitions restore in parallel and a
killed restore, run again with the same arguments, continues after what the destination
already holds and duplicates nothing.
"""
