"""bench.time_to_verdict's own pieces: the repository it builds and the table it prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.time_to_verdict import NOISY, QUIET, SLOWED, Outcome, build, design, table


def test_the_design_slows_two_benchmarks_and_makes_a_tenth_noisy() -> None:
    times, noise, slowed = design(100)
    assert len(times) == 100 and len(slowed) == 2 and all(0.015 <= t <= 0.025 for t in times.values())
    assert [noise[name] for name in slowed] == [SLOWED, SLOWED]
    assert sum(v == NOISY for v in noise.values()) == 10 and sum(v == QUIET for v in noise.values()) == 88
    assert design(3)[2] == ["k000"]


def test_the_head_is_five_percent_slower_on_exactly_the_slowed_benchmarks(tmp_path: Path) -> None:
    base, head, slowed = build(tmp_path / "repo", 12)
    assert slowed == ["test_kernel[k001]", "test_kernel[k002]"]
    scope: dict[str, dict[str, object]] = {}
    for sha in (base, head):
        text = subprocess.run(["git", "show", f"{sha}:kernels.py"], cwd=tmp_path / "repo", check=True,
                              capture_output=True, text=True).stdout
        scope[sha] = {}
        exec(compile(text, "kernels.py", "exec"), scope[sha])  # noqa: S102 - the bench's own generated file
    before, after = scope[base]["TIMES"], scope[head]["TIMES"]
    assert isinstance(before, dict) and isinstance(after, dict)
    ratios = {name: after[name] / before[name] for name in before}
    assert {name for name, r in ratios.items() if abs(r - 1.05) < 1e-9} == {"k001", "k002"}
    assert all(r == 1.0 for name, r in ratios.items() if name not in ("k001", "k002"))
    assert sys.executable  # the suites run under this interpreter


def test_the_table_says_how_many_verdicts_agree_and_the_ratios() -> None:
    before = Outcome({"a": "none", "b": "regression"}, 10, 2000, 400.0, 420.0, "regression")
    after = Outcome({"a": "none", "b": "regression"}, 10, 400, 100.0, 120.0, "regression")
    _, markdown = table("t", before, after, ["b"])
    text = "\n".join(markdown)
    assert "| benchmark measurements | 2000 | 400 | 5.0× |" in text
    assert "| suite seconds | 400 | 100 | 4.0× |" in text and "| same verdict per benchmark | 2 of 2 |  |  |" in text
