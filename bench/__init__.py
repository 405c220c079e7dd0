"""Benchmarks: the project's numbers next to a baseline measured in the same run."""
