"""The smallest change that counts, as a repository declares it: per repository, suite and benchmark.

```toml
[tool.roofwatch]
min_effect = "2%"                      # the repository's default (also 0.02)

[[tool.roofwatch.suites]]
name = "benchmarks"
min_effect = "3%"                      # this suite's benchmarks
min_effects = { "test_matmul[*]" = "5%", "test_copy[tiny-*]" = "10%" }   # fnmatch patterns
```

The most specific wins: a benchmark pattern (first match in the order written), the suite's
value, the repository's, then ``DEFAULT_MIN_EFFECT``. Noise never changes it (DESIGN §6): it
is what the team says matters, and the A/B only decides whether the data shows it.

Peak memory (the derived ``<suite>:memory`` benchmarks) has its own, ``[tool.roofwatch]
memory_min_effect``, default ``DEFAULT_MEMORY_MIN_EFFECT``: a memory figure barely moves between
processes, so what counts there is not what counts for a time, and the time's patterns (written
for timings) do not apply to it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fnmatch import fnmatchcase

DEFAULT_MIN_EFFECT = 0.02
# A buffer a twentieth larger: smaller moves of an allocator's peak are mostly its rounding (the
# CUDA caching allocator rounds every block to 512 bytes, and up to 2 MiB for large ones).
DEFAULT_MEMORY_MIN_EFFECT = 0.05
# Below this nothing can be told apart by timing at all; above it nothing is "small".
SMALLEST, LARGEST = 0.001, 1.0


def parse_min_effect(value: object) -> float:
    """``0.02``, ``"2%"`` or ``"0.02"`` as a fraction; ``ValueError`` with the reason otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"min_effect must be a fraction or a percentage, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError as exc:
            raise ValueError(f"min_effect {value!r} is not a number or a percentage like \"2%\"") from exc
    elif isinstance(value, (int, float)):
        number = float(value)
    else:
        raise ValueError(f"min_effect must be a fraction or a percentage, got {value!r}")
    if not math.isfinite(number) or not SMALLEST <= number <= LARGEST:
        raise ValueError(f"min_effect {value!r} must lie between {SMALLEST:.1%} and {LARGEST:.0%}")
    return number


def resolve(benchmark: str, patterns: Mapping[str, float], suite: float | None, repository: float | None) -> float:
    """The min_effect of one benchmark (its pytest-benchmark name, e.g. ``test_rmsnorm[4096-bf16]``)."""
    for pattern, value in patterns.items():
        if fnmatchcase(benchmark, pattern):
            return value
    if suite is not None:
        return suite
    return repository if repository is not None else DEFAULT_MIN_EFFECT
