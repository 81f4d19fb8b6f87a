"""Every change names what changed under it; a move of identical code is an interaction, never a regression.

The repository's timings are set by its commits, so the answer is certain on any host:

- ``pkg/a.py``'s ``a`` sleeps 50 ms; ``pkg/b.py``'s ``b`` sleeps 50 ms, or 150 ms once the file
  ``leftover.flag`` exists in its working directory. Each has its own benchmark module.
- Commit ``slower_a`` changes ``a`` only: it sleeps 75 ms and leaves ``leftover.flag`` behind. ``b``'s
  code is byte-identical, yet on the head it sleeps three times as long once ``a`` has run.
- Commit ``faster_a`` changes ``a`` only the other way: 25 ms, and the same leftover.

The sleeps are long enough that a loaded host's late wake-ups (tens of milliseconds, added to every
call alike) cannot shrink a's ±50 % below the 10 % that counts.

``roofwatch compare`` must attribute ``a``'s change to ``pkg/a.py``, report ``b``'s as an
interaction with its evidence, and let ``a`` alone decide the check: red for ``slower_a``, green for
``faster_a`` — whatever ``b`` did. Every process's benchmark order is stored, and the same seed
gives the same order again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlmodel import Session, select
from support.sample_repo import commit, git, init
from support.tests_support import pytest_env, roofwatch

from roofwatch.service.github.comment import summarize
from roofwatch.workers.rounds.install import Selection, install_plugin, plugin_args, read_record

PYPROJECT = """\
[project]
name = "leftovers"
version = "0.0.1"

[tool.roofwatch]
min_effect = "10%"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
"""
A = """\
import time
from pathlib import Path


def a():
    time.sleep({seconds})
{leftover}"""
LEAVES = '    Path("leftover.flag").write_text("a was here")\n'
B = """\
import os
import time


def b():
    time.sleep(0.150 if os.path.exists("leftover.flag") else 0.050)
"""
BENCH_A = "from pkg.a import a\n\n\ndef test_a(benchmark):\n    benchmark(a)\n"
BENCH_B = "from pkg.b import b\n\n\ndef test_b(benchmark):\n    benchmark(b)\n"


@pytest.fixture(scope="module")
def leftovers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    repo = tmp_path_factory.mktemp("leftovers") / "repo"
    init(repo)
    shas = {"base": commit(repo, "a and b", {
        "pyproject.toml": PYPROJECT, "pkg/__init__.py": "", "pkg/a.py": A.format(seconds=0.050, leftover=""),
        "pkg/b.py": B, "bench/test_a.py": BENCH_A, "bench/test_b.py": BENCH_B}, 1)}
    for when, (name, seconds) in enumerate((("slower_a", 0.075), ("faster_a", 0.025)), start=2):
        git(repo, "checkout", "-q", "-b", name, shas["base"])
        shas[name] = commit(repo, f"a: {name}", {"pkg/a.py": A.format(seconds=seconds, leftover=LEAVES)}, when)
    git(repo, "checkout", "-q", "main")
    shas["path"] = str(repo)
    return shas


def compare(repo: dict[str, str], tmp_path: Path, head: str) -> tuple[int, dict[str, Any]]:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
           "ROOFWATCH_AB_MIN_ROUNDS": "4", "ROOFWATCH_AB_MAX_ROUNDS": "8"}
    done = roofwatch(["compare", repo["base"], repo[head], "--repo", repo["path"], "--format", "json"], env,
                     check=False)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["benchmark"]: row for row in report["benchmarks"]}


def test_a_leftover_is_an_interaction_and_the_check_follows_the_changed_function(
        leftovers: dict[str, str], tmp_path: Path) -> None:
    code, report = compare(leftovers, tmp_path, "slower_a")
    a, b = rows(report)["test_a"], rows(report)["test_b"]
    assert a["direction"] == "regression" and a["cause"] == "files", a
    assert a["why"] == "imported file changed: pkg/a.py", a
    assert b["direction"] == "interaction" and b["cause"] == "identical", b
    # By the numbers a slowdown (or, when the head ran b before a in round one, an inconclusive one).
    assert b["attribution"]["moved"] in ("regression", "inconclusive") and b["change_pct"] > 50, b
    assert b["why"].startswith("interaction: nothing it imports or launches changed"), b
    evidence = b["attribution"]["evidence"]
    assert "head slow" in evidence["line"] and "base fast" in evidence["line"], evidence
    assert {r["base"] for r in evidence["rounds"]} == {"fast"}, evidence["rounds"]
    # The check is a's: one slower benchmark, named; b is neither a regression nor in the title.
    assert code == 1 and report["verdict"] == "regression"
    summary = summarize(report)
    assert summary.conclusion == "failure" and "1 slower" in summary.title and "test_a" in summary.title, summary

    _orders_are_stored_and_seeded(tmp_path, leftovers)


def test_an_interaction_never_turns_the_check_red(leftovers: dict[str, str], tmp_path: Path) -> None:
    code, report = compare(leftovers, tmp_path, "faster_a")
    a, b = rows(report)["test_a"], rows(report)["test_b"]
    assert a["direction"] == "improvement" and "pkg/a.py" in a["why"], (a["reason"], a.get("attribution"))
    assert b["direction"] == "interaction" and b["attribution"]["moved"] in ("regression", "inconclusive"), \
        (b["reason"], b.get("attribution"))
    assert code == 0 and report["verdict"] == "improvement", report
    assert summarize(report).conclusion == "success"


def _orders_are_stored_and_seeded(tmp_path: Path, repo: dict[str, str]) -> None:
    """Every process's order is stored with its seed; collecting the suite again with that seed repeats it."""
    from roofwatch.service.core.models import Comparison

    engine = create_engine(f"sqlite:///{tmp_path / 'rw.db'}")
    with Session(engine) as session:
        comparison = session.exec(select(Comparison)).one()
    engine.dispose()
    processes = comparison.details["rounds_run"]
    assert len(processes) == 2 * comparison.rounds
    tree = tmp_path / "again"
    git(Path(repo["path"]), "worktree", "add", "-q", "--detach", str(tree), repo["base"])
    for process in processes:
        (suite,) = process["suites"]
        assert suite["order"] and suite["order_seed"] is not None, process
        assert set(suite["order"]) <= {"bench/test_a.py::test_a", "bench/test_b.py::test_b"}, suite
        selected = frozenset(suite["selected"]) if "selected" in suite else None
        assert _collected(tree, Selection(selected, suite["order_seed"]), tmp_path) == suite["order"], process
    assert any(len(p["suites"][0]["order"]) == 2 for p in processes)


def _collected(tree: Path, selection: Selection, scratch: Path) -> list[str]:
    """The order the rounds plugin gives the suite for ``selection``, collected afresh."""
    folder = scratch / f"collect-{len(list(scratch.glob('collect-*')))}"
    folder.mkdir()
    args, record = plugin_args(selection, folder)
    env = pytest_env(PYTHONPATH=os.pathsep.join([str(tree), str(install_plugin(folder))]))
    subprocess.run([sys.executable, "-m", "pytest", "bench", "-q", "-p", "no:cacheprovider", "--collect-only",
                    *args], cwd=tree, env=env, check=True, capture_output=True)
    return read_record(record).order


TRITON_PYPROJECT = """\
[project]
name = "warps"
version = "0.0.1"

[tool.roofwatch]
min_effect = "10%"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
env = { TRITON_INTERPRET = "1" }
timeout = 300

# The same benchmark compiled for Hopper (recorded launches, real ptxas): its binary joins the why.
[[tool.roofwatch.suites]]
name = "compiled"
kind = "compile"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-disable"
targets = ["sm_90"]
timeout = 600
"""
# The interpreter runs a kernel the same whatever its num_warps: the host wrapper's sleep, set by the
# same constant, is what makes the head slower, so the timing follows the launch change for certain.
# The sleeps (100 ms against 200 ms) dwarf the interpreter's few milliseconds, and five calls a process
# keep its median off the first call's tracing: a base process is read as the head's only if three of
# its calls are held up by 100 ms each (a loaded CI host held 40 ms sleeps up by 40 ms).
SCALE = """\
import time

import torch
import triton
import triton.language as tl

NUM_WARPS = {warps}


@triton.jit
def _scale_kernel(x_ptr, out_ptr, factor, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def scale(x, factor):
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, factor, x.numel(), BLOCK=256, num_warps=NUM_WARPS)
    time.sleep(0.025 * NUM_WARPS)
    return out
"""
BENCH_SCALE = """\
import torch

from kernels.scale import scale

X = torch.randn(1000)


def test_scale(benchmark):
    benchmark(scale, X, 2.0)
"""


def test_a_launch_change_under_the_interpreter_names_the_kernel_its_num_warps_and_its_binary(tmp_path: Path) -> None:
    repo = tmp_path / "warps"
    init(repo)
    base = commit(repo, "scale", {"pyproject.toml": TRITON_PYPROJECT, "kernels/__init__.py": "",
                                  "kernels/scale.py": SCALE.format(warps=4), "bench/test_scale.py": BENCH_SCALE}, 1)
    head = commit(repo, "scale: 8 warps", {"kernels/scale.py": SCALE.format(warps=8)}, 2)
    code, report = compare({"base": base, "head": head, "path": str(repo)}, tmp_path, "head")
    row = rows(report)["test_scale"]
    assert row["direction"] == "regression" and code == 1, (row["reason"], row["attribution"])
    assert row["cause"] == "kernels", row
    assert row["why"].startswith("kernel _scale_kernel: num_warps 4 → 8 · compiled _scale_kernel sm_90: "), row["why"]
    assert row["attribution"]["kernels"] == ["_scale_kernel: num_warps 4 → 8"], row["attribution"]
    [binary] = row["attribution"]["compiled"]
    assert binary.startswith("_scale_kernel sm_90: ") and binary in row["why"], row["attribution"]
    assert row["attribution"]["files"] == ["kernels/scale.py"], row["attribution"]
