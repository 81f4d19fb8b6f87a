"""roofwatch's own kernel suites: correctness (pytest) and benchmarks (pytest-benchmark).

Shared measurement code lives beside them: ``tolerances`` (per-dtype error bounds and the
error measure stored per test) and ``roofline`` (attainable performance and the fraction of it
a benchmark reached).
"""
