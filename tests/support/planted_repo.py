"""A kernel repository whose history plants known changes among neutral commits.

Commits, oldest first (names are the keys of the returned dict):

- ``base``      three kernels (rmsnorm, softmax, matmul) with checks and benchmarks
- ``docs``      neutral: a README
- ``slow``      rmsnorm recomputes its scale and output ten times: a 10× slowdown of ``test_rmsnorm``
- ``refactor``  neutral: a comment and a rename inside a kernel
- ``bug``       softmax takes the last element out of its denominator: a correctness failure at
                the fix's cost (one subtraction more, against 20 000 exponentials)
- ``tidy``      neutral: another comment
- ``bugfix``    softmax fixed again
- ``fast``      matmul stops repeating its work ten times: a 10× speedup of ``test_matmul``
- ``notes``     neutral: README again

The kernels are plain Python so timings do not depend on a BLAS or a GPU. The planted
changes are 10× because on a shared CPU host one process can run ~45 % slower than the next at
random, and with every core taken by other tests far more: in one fresh-clone test run the A/B
measured 52 % noise and held changes to a 250 % threshold (3.5×), so a planted 3× slowdown went
unreported. 10× lies far beyond any threshold seen; on a GPU the 2 % floor rules. The repository
declares ``min_effect = "25%"``, so a neutral commit is never judged on a few percent of CPU noise.
"""

from __future__ import annotations

from pathlib import Path

from support.sample_repo import commit, init

# The smallest change that counts, as a team declares it: a quarter, far beyond what a neutral commit's A/B can
# show on a loaded CPU host and far within the planted 10x. At the 2 % default a neutral commit is judged on
# whether a few rounds of real CPU timing, some processes landing slow at random, stay within ±2 %: the bug
# commit's softmax once came out +4.2 % [+0.2, +8.3] on 8 rounds with the head slow in some of them and the
# base in none. What such A/Bs say of identical code is measured on A/A simulations (bench.verdicts), not here.
PYPROJECT = """\
[project]
name = "planted-kernels"
version = "0.0.1"

[tool.roofwatch]
min_effect = "25%"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
timeout = 120

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=20 --benchmark-max-time=0.1 --benchmark-warmup=on --benchmark-warmup-iterations=3"
timeout = 300
"""

KERNELS = """\
import math

REPEAT = 10
RMSNORM_REPEAT = 1


def rmsnorm(xs, eps=1e-6):
    for _ in range(RMSNORM_REPEAT):
        scale = 1.0 / math.sqrt(sum(x * x for x in xs) / len(xs) + eps)
        out = [x * scale for x in xs]
    return out


def softmax(xs):
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    total = sum(exps)
    return [e / total for e in exps]


def matmul(a, b):
    n, k, m = len(a), len(b), len(b[0])
    for _ in range(REPEAT):
        out = [[sum(a[i][p] * b[p][j] for p in range(k)) for j in range(m)] for i in range(n)]
    return out
"""

CHECKS = """\
import math

from kernels import matmul, rmsnorm, softmax


def test_rmsnorm(record_property):
    xs = [float(i % 7) - 3.0 for i in range(64)]
    rms = math.sqrt(sum(x * x for x in xs) / len(xs) + 1e-6)
    err = max(abs(o - x / rms) for o, x in zip(rmsnorm(xs), xs))
    record_property("max_abs_err", err)
    assert err < 1e-12


def test_softmax(record_property):
    xs = [0.5 * i for i in range(16)]
    exps = [math.exp(x) for x in xs]
    err = max(abs(o - e / sum(exps)) for o, e in zip(softmax(xs), exps))
    record_property("max_abs_err", err)
    assert err < 1e-12


def test_matmul():
    assert matmul([[1.0, 2.0]], [[3.0], [4.0]]) == [[11.0]]
"""

BENCH = """\
from kernels import matmul, rmsnorm, softmax

XS = [float(i % 13) / 13.0 for i in range(20000)]
A = [[float((i + j) % 5) for j in range(24)] for i in range(24)]


def test_rmsnorm(benchmark):
    benchmark.extra_info.update(flops=3 * len(XS), bytes=16 * len(XS), dtype="fp64", shape=str(len(XS)))
    benchmark(rmsnorm, XS)


def test_softmax(benchmark):
    benchmark.extra_info.update(flops=4 * len(XS), bytes=16 * len(XS), dtype="fp64", shape=str(len(XS)))
    benchmark(softmax, XS)


def test_matmul(benchmark):
    benchmark.extra_info.update(flops=2 * 24 ** 3, bytes=3 * 8 * 24 ** 2, dtype="fp64", shape="24x24x24")
    benchmark(matmul, A, A)
"""

SLOW_RMSNORM = KERNELS.replace("RMSNORM_REPEAT = 1\n", "RMSNORM_REPEAT = 10  # recompute, to be sure\n")
REFACTORED = SLOW_RMSNORM.replace("def softmax(xs):\n", "# Numerically stable: subtract the max.\ndef softmax(xs):\n")
# The bug costs what the fix costs: slicing off the last term copied the 20 000-element list,
# a real 3.7 % slowdown that a quiet host measured and reported beside the correctness failure.
BUGGY = REFACTORED.replace("    total = sum(exps)\n", "    total = sum(exps) - exps[-1]\n")
TIDY = BUGGY.replace("def matmul(a, b):\n", "# Naive triple loop.\ndef matmul(a, b):\n")
FIXED = TIDY.replace("    total = sum(exps) - exps[-1]\n", "    total = sum(exps)\n")
FAST = FIXED.replace("\nREPEAT = 10\n", "\nREPEAT = 1\n")


def build_planted_history(repo: Path) -> dict[str, str]:
    init(repo)
    steps = [
        ("base", "Add rmsnorm, softmax and matmul kernels", {
            "pyproject.toml": PYPROJECT, "kernels.py": KERNELS,
            "checks/test_kernels.py": CHECKS, "bench/test_kernels.py": BENCH,
        }),
        ("docs", "Document the kernels", {"README.md": "Planted kernels.\n"}),
        ("slow", "rmsnorm: recompute the scale", {"kernels.py": SLOW_RMSNORM}),
        ("refactor", "softmax: explain the max subtraction", {"kernels.py": REFACTORED}),
        ("bug", "softmax: sum fewer terms", {"kernels.py": BUGGY}),
        ("tidy", "matmul: comment", {"kernels.py": TIDY}),
        ("bugfix", "softmax: sum every term again", {"kernels.py": FIXED}),
        ("fast", "matmul: compute once", {"kernels.py": FAST}),
        ("notes", "README: notes", {"README.md": "Planted kernels, with notes.\n"}),
    ]
    return {name: commit(repo, message, files, when) for when, (name, message, files) in enumerate(steps, start=1)}
