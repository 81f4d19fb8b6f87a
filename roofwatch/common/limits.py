"""How much of what a commit or a suite hands roofwatch it reads: each limit, spelled once.

A file a commit controls (``pyproject.toml``, a setup input, a test file ``roofwatch init``
reads) and a result file a suite writes are read within these; past one, that file's reader
says which limit, and only that commit's run or that suite errors. docs/security.md and the
README state each number; ``tests/project/test_limits_documented.py`` holds them to these.
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# A JUnit XML or compile-artifacts file, and a benchmark JSON that is not strict JSON (it holds
# NaN or Infinity, as Python's json writes them): each is read whole.
RESULT_FILE_LIMIT = 256 * MIB
# A benchmark JSON in strict JSON is streamed one benchmark at a time, so it may be larger:
# 64 benchmarks of 200,000 rounds each, every round kept, are 300 MB.
BENCHMARK_FILE_LIMIT = 1 * GIB
# One string or number in a benchmark JSON, in bytes as written (escapes included). The
# streaming lexer re-reads a token from its start at every read that ends inside it, so a
# token's cost grows with the square of its length: a 32 MB string took 14 s, 400 MB minutes.
JSON_TOKEN_LIMIT = 64 * KIB
# Nesting of a benchmark JSON: pytest-benchmark writes 5 levels, extra_info may add a few.
JSON_DEPTH_LIMIT = 64
# Benchmarks one suite's result file (or one uploaded file) may report: the default of
# ROOFWATCH_MAX_BENCHMARKS, which the host that reads the file may raise.
MAX_BENCHMARKS = 10_000
# A commit's pyproject.toml, checked before it is parsed.
PYPROJECT_LIMIT = 1 * MIB
# Each file a suite's setup_inputs names (hashed to key the setup cache).
SETUP_INPUT_LIMIT = 64 * MIB
# Each test file and the pyproject.toml that `roofwatch init` reads to propose suites.
INIT_FILE_LIMIT = 1 * MIB


def size_text(limit: int) -> str:
    """``limit`` bytes the way the docs write it: ``1 GiB``, ``64 KiB``, ``300 bytes``."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"
