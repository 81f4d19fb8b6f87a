"""``bench.norm_backward --fake``: the GPU report's control flow, through the Triton interpreter."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import triton.language as tl
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from bench.norm_backward import Row, constexprs, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_before_after_and_sweep_on_the_interpreter(tmp_path: Path) -> None:
    before = tmp_path / "before"
    before.mkdir()
    # The kernels as they stand serve as "before": the report must read any folder of them.
    for name in ("rmsnorm.py", "layernorm.py"):
        (before / name).write_text((ROOT / "kernels" / name).read_text())
    report, markdown = tmp_path / "report.json", tmp_path / "report.md"
    done = subprocess.run([sys.executable, "-m", "bench.norm_backward", "--fake", "--before", str(before),
                           "--sweep", "--sweep-budget-s", "20", "--json", str(report), "--markdown", str(markdown)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    measured = {(r["norm"], r["kernels"], r["shape"], r["call"]) for r in data["rows"]}
    assert len(measured) == 2 * 2 * 2 * 2  # norms x before/after x a fused and a streamed shape x two calls
    assert all(r["median_us"] > 0 and r["of_copy"] > 0 for r in data["rows"])
    # Every other launch gave the default launch's dx, or says why not.
    assert data["sweep"] and all(r["error"] == "" for r in data["sweep"]), data["sweep"]
    assert "## Other launches of the new backward" in markdown.read_text()


def _backward(x_ptr, n_cols, BLOCK: tl.constexpr, STAGES: tl.constexpr):  # noqa: N803 (Triton's spelling)
    pass


def test_compiled_kernels_are_told_apart_by_their_constexprs() -> None:
    # Triton specializes n_cols == 1 into a constant too; only the declared constexprs name a variant.
    source = ASTSource(JITFunction(_backward), {"x_ptr": "*bf16", "n_cols": "constexpr", "BLOCK": "constexpr",
                                                "STAGES": "constexpr"}, constexprs={"n_cols": 1, "BLOCK": 8192, "STAGES": 3})
    assert constexprs(SimpleNamespace(src=source)) == "BLOCK=8192, STAGES=3"
    assert constexprs(SimpleNamespace()) == ""  # a kernel loaded without its source


def test_a_rejected_launch_reads_as_rejected_not_as_nan() -> None:
    rejected = Row("rmsnorm", "streamed block 4096 w8 stages 3, 2/SM", "4096x16384", "backward", math.nan, math.nan,
                   math.nan, error="AssertionError: dx differs from the default launch's, by up to 0.0156")
    timed = Row("rmsnorm", "streamed block 2048 w8 stages 3, 1/SM", "4096x16384", "backward", 268.0, 1500.0, 0.35)
    text = markdown("NVIDIA H200", 4255.0, [], [rejected, timed], [])
    assert "| 4096x16384 | – | – | AssertionError: dx differs from the default launch's, by up to 0.0156 |" in text
    assert "| 4096x16384 | 268.0 | 35% |  |" in text and "nan" not in text
    assert "| kernels | norm | kernel | constexprs | warps | Triton num_stages |" in text
