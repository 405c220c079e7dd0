"""Compaction: the Spark batch job that merges segments into higher levels."""
