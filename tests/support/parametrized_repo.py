"""A kernel repository whose one commit breaks a parametrized test in eleven parametrizations.

    1 add scale + its tests      (good)
    2 docs                       (good)
    3 scale: fuse the multiply   (wrong for every n: test_scale[1] … test_scale[11] fail; test_empty passes)
    4 changelog                  (still broken)
    5 scale: fix the fused step  (good again)

Eleven failing parametrizations of one function are one bug: one change, bisected once.
"""

from __future__ import annotations

from pathlib import Path

from support.sample_repo import commit, init

SIZES = tuple(range(1, 12))

PYPROJECT = """\
[project]
name = "param-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
timeout = 120
"""

KERNEL = """\
def scale(xs, a):
    return [a * x for x in xs]
"""

BROKEN = """\
def scale(xs, a):
    return [a * x + 1 for x in xs]
"""

CHECKS = f"""\
import pytest

from kernel import scale


@pytest.mark.parametrize("n", {list(SIZES)!r})
def test_scale(n):
    xs = [float(i) for i in range(n)]
    out = scale(xs, 2.0)
    assert out == [2.0 * x for x in xs], f"scale of {{n}} values is off by {{max(abs(o - 2.0 * x) for o, x in zip(out, xs))}}"


def test_empty():
    assert scale([], 2.0) == []
"""


def build(repo: Path) -> dict[str, str]:
    """The five commits; their SHAs by name (good, docs, broken, changelog, fixed)."""
    init(repo)
    return {
        "good": commit(repo, "Add scale", {"pyproject.toml": PYPROJECT, "kernel.py": KERNEL,
                                           "checks/test_kernel.py": CHECKS}, 1),
        "docs": commit(repo, "docs: say what scale does", {"README.md": "scale(xs, a) multiplies.\n"}, 2),
        "broken": commit(repo, "scale: fuse the multiply", {"kernel.py": BROKEN}, 3),
        "changelog": commit(repo, "changelog", {"CHANGES.md": "- fused scale\n"}, 4),
        "fixed": commit(repo, "scale: fix the fused step", {"kernel.py": KERNEL}, 5),
    }


def parametrized_ids(function: str = "test_scale") -> list[str]:
    """The eleven parametrizations' test ids, as roofwatch stores them."""
    return [f"checks.test_kernel::{function}[{n}]" for n in SIZES]
