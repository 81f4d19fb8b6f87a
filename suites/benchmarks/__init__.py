"""Benchmark suite: pytest-benchmark timings with FLOPs and bytes per call in ``extra_info``."""
