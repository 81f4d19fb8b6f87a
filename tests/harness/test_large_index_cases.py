"""The large-index cases' own logic, on a CPU, at a small boundary instead of 2**31.

``suites/correctness/test_large_index.py`` runs only on a GPU (2**31 elements would take the
interpreter hours). Its checks take the boundary as an argument, so here each one runs under
the interpreter at ``SMALL``: on the unmodified kernels every check passes, and on a copy of
the kernels whose rows past the boundary wrap around to row 0 — what a 32-bit offset does
at 2**31, simulated at the small boundary — the check says which rows differ. The planted
32-bit offsets themselves are caught on a GPU by ``test_planted_bugs_large_index.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.planted_kernels import Plant, planted_tree
from support.tests_support import pytest_env

ROOT = Path(__file__).resolve().parents[2]
# Past the first rows of every family (an 8192-column norm row, a 32-head rotary token), yet
# seconds of interpreted work. The matmul and attention checks have fixed inner sizes (K =
# 4096, 32 heads of 128 x 128) that take the interpreter minutes even at this boundary; they
# run on a GPU only.
SMALL = 3 * 2**15

RUN = """
import sys
from suites.correctness.test_large_index import CASES
boundary = int(sys.argv[1])
for case in CASES:
    if case.family in sys.argv[2:]:
        case.check(boundary)
        print("passed", case.family)
"""


def _run(tree: Path, families: list[str]) -> subprocess.CompletedProcess[str]:
    env = pytest_env(TRITON_INTERPRET="1", PYTHONPATH=f"{tree}:{ROOT}")
    return subprocess.run([sys.executable, "-c", RUN, str(SMALL), *families], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=900)


def test_every_family_has_one_case() -> None:
    from suites.correctness.test_large_index import CASES

    families = [case.family for case in CASES]
    kernels = sorted(path.stem for path in (ROOT / "kernels").glob("*.py") if path.stem != "__init__")
    assert sorted(families) == kernels


INTERPRETED = ["copy", "softmax", "cross_entropy", "rmsnorm", "layernorm", "rotary", "swiglu", "quant"]


def test_checks_pass_on_the_kernels(tmp_path: Path) -> None:
    families = INTERPRETED
    tree = planted_tree(tmp_path / "tree", [], with_suites=True)
    done = _run(tree, families)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [line.split()[1] for line in done.stdout.splitlines() if line.startswith("passed")] == families


# Rows past the small boundary read and write the rows at the start instead, as a wrapped
# 32-bit offset would past 2**31 (softmax: 4096 columns, so the wrap is at row SMALL / 4096;
# the RMSNorm backward: 8192 columns).
WRAPS = [
    Plant(name="softmax-rows-wrap", module="softmax.py",
          find="    # int64 row offsets: rows * stride passes 2**31 elements on large activations.\n"
               "    row = tl.program_id(0).to(tl.int64)\n",
          replace=f"    row = tl.program_id(0).to(tl.int64) % {SMALL // 4096}\n",
          case="softmax", message="softmax: "),
    Plant(name="rmsnorm-backward-rows-wrap", module="rmsnorm.py",
          find="        g = tl.load(g_ptr + row * g_row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n",
          replace=f"        g = tl.load(g_ptr + (row % {SMALL // 8192}) * g_row_stride + cols, mask=mask, other=0.0)"
                  ".to(tl.float32)\n",
          case="rmsnorm", message="dx: "),
]


@pytest.mark.parametrize("plant", WRAPS, ids=lambda p: p.name)
def test_checks_catch_rows_that_wrap(tmp_path: Path, plant: Plant) -> None:
    tree = planted_tree(tmp_path / "tree", [plant], with_suites=True)
    done = _run(tree, [plant.case])
    assert done.returncode != 0, f"{plant.name} went unnoticed:\n{done.stdout[-2000:]}"
    assert plant.message in done.stderr and "differ from the small copy's" in done.stderr, done.stderr[-3000:]
