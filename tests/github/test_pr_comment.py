"""The pull-request report: golden comment bodies per verdict, titles, and hostile names and messages.

Each variant's rendered comment is compared byte for byte with ``tests/support/golden/pr_comment/<variant>.md``.
After an intended change to the renderer, regenerate them and review the diff::

    ROOFWATCH_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/github/test_pr_comment.py -q -p no:cacheprovider

With ``ROOFWATCH_UPDATE_GOLDEN=1`` the golden tests rewrite the files instead of comparing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from roofwatch.service.github.comment import (
    MARKER,
    MAX_COMMENT_CHARS,
    ReportContext,
    Summary,
    render_comment,
    summarize,
)

GOLDEN = Path(__file__).parents[1] / "support" / "golden" / "pr_comment"
UPDATE = os.environ.get("ROOFWATCH_UPDATE_GOLDEN") == "1"

BASE_SHA = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
HEAD_SHA = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
CONTEXT = ReportContext(repository="acme/kernels", pr_number=42, base_ref="main",
                        dashboard_url="https://roofwatch.example.com/compare/acme/kernels/7")

KERNELS = ("test_rmsnorm", "test_layernorm", "test_softmax", "test_gelu", "test_rope", "test_silu_mul")
SHAPES = ("1024", "4096", "8192", "16384")
DTYPES = ("fp16", "bf16")
BASE_TIMES = {"test_rmsnorm": 1.21e-05, "test_layernorm": 1.48e-05, "test_softmax": 2.35e-05,
              "test_gelu": 6.1e-06, "test_rope": 9.4e-06, "test_silu_mul": 7.7e-06}


# --- builders ------------------------------------------------------------------------------------


def bench(name: str, change_pct: float = 0.0, *, direction: str = "none", base_median: float | None = None,
          noise_pct: float = 0.8, threshold_pct: float | None = 2.0, mde_pct: float | None = 1.1,
          rounds: int = 5, suite: str = "benchmarks", unit: str = "s", higher_is_better: bool = False,
          roofline: float | None = 0.8) -> dict[str, Any]:
    """One row as ``comparison_report`` writes it; the interval and q follow from the change and noise."""
    kernel = name.split("[", 1)[0]
    base = base_median if base_median is not None else BASE_TIMES.get(kernel, 1.0e-05)
    ratio = 1 + change_pct / 100
    head = base / ratio if higher_is_better else base * ratio
    half = 2.2 * noise_pct
    significant = direction in ("regression", "improvement")
    reason = {"regression": f"{change_pct:+.2f}% beyond ±{threshold_pct}%",
              "improvement": f"{change_pct:+.2f}% beyond ±{threshold_pct}%",
              "inconclusive": f"the interval reaches beyond ±{threshold_pct}%; about 24 rounds at this noise "
                              "would settle it"}.get(direction, "")
    return {
        "benchmark": name, "suite": suite, "unit": unit, "higher_is_better": higher_is_better,
        "base_median": base, "head_median": head, "change_pct": change_pct,
        "ci_low": change_pct - half, "ci_high": change_pct + half,
        "p_value": 1e-6 if significant else 0.4, "q_value": 3e-5 if significant else 0.6,
        "noise_pct": noise_pct, "threshold_pct": threshold_pct, "mde_pct": mde_pct,
        "direction": direction, "reason": reason, "rounds": rounds,
        # A change's interval is held at the level adjusted for the benchmarks compared (3 of 48 here).
        "confidence": 1 - 0.01 * 3 / 48 if significant else 0.99,
        "base_roofline": roofline, "head_roofline": None if roofline is None else roofline * base / head,
    }


def suite_of(count: int = 48, changed: dict[str, dict[str, Any]] | None = None,
             **defaults: Any) -> list[dict[str, Any]]:
    """``count`` kernel benchmarks (kernel × shape × dtype, cycling), no change unless named in ``changed``."""
    grid = [(k, s, d) for k in KERNELS for s in SHAPES for d in DTYPES]
    names = [f"{k}[{s}-{d}]" if i < len(grid) else f"{k}[{s}-{d}-v{i // len(grid)}]"
             for i, (k, s, d) in ((i, grid[i % len(grid)]) for i in range(count))]
    changed = changed or {}
    extra = [n for n in changed if n not in names]
    names = names[:count - len(extra)] + extra
    # A stable, varied spread of small non-significant changes, as a real run has.
    return [changed.get(n) or bench(n, ((i * 37) % 19 - 9) / 10, **defaults) for i, n in enumerate(sorted(names))]


def report(benchmarks: list[dict[str, Any]], verdict: str, *, state: str = "succeeded", rounds: int = 5,
           new_failures: list[dict[str, str]] | None = None, fixed: list[str] | None = None,
           error: str = "", device: str | None = "NVIDIA H200") -> dict[str, Any]:
    mdes = [b["mde_pct"] for b in benchmarks if b["mde_pct"] is not None]
    return {
        "id": 7, "base": BASE_SHA, "head": HEAD_SHA, "state": state, "verdict": verdict, "rounds": rounds,
        "purpose": "pull_request", "device": device, "error": error, "mde_pct": max(mdes, default=None),
        "confidence": 0.99,
        "new_failures": new_failures or [], "fixed": fixed or [], "benchmarks": benchmarks,
    }


def failure(test_id: str, message: str, suite: str = "correctness", tests: list[str] | None = None) -> dict[str, Any]:
    return {"suite": suite, "test_id": test_id, "message": message, "tests": tests or [test_id]}


SOFTMAX_FAILURE = """AssertionError: Tensor-likes are not close!

Mismatched elements: 1843 / 4194304 (0.0%)
Greatest absolute difference: 0.0107421875 at index (311, 2047) (up to 0.001 allowed)
Greatest relative difference: 0.96484375 at index (311, 2047) (up to 0.016 allowed)
dtype = torch.float16, shape = (1024, 4096)

    @pytest.mark.parametrize("n", [1024, 4096, 8192])
    @pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
    def test_softmax(n, dtype):
        x = torch.randn(1024, n, device="cuda", dtype=dtype)
        expected = torch.softmax(x.float(), dim=-1).to(dtype)
>       torch.testing.assert_close(softmax(x), expected, atol=1e-3, rtol=1.6e-2)
E       AssertionError: Tensor-likes are not close!
E
E       Mismatched elements: 1843 / 4194304 (0.0%)
E       Greatest absolute difference: 0.0107421875 at index (311, 2047) (up to 0.001 allowed)

suites/correctness/test_softmax.py:21: AssertionError"""


def no_change() -> dict[str, Any]:
    rows = suite_of(48, mde_pct=1.1)
    rows[5]["mde_pct"] = 1.4
    return report(rows, "no-change")


def regressions() -> dict[str, Any]:
    changed = {
        "test_rmsnorm[4096-bf16]": bench("test_rmsnorm[4096-bf16]", 17.4, direction="regression", roofline=0.81),
        "test_softmax[8192-fp16]": bench("test_softmax[8192-fp16]", 6.2, direction="regression", noise_pct=1.1,
                                         threshold_pct=2.2, mde_pct=1.4, roofline=None),
        "test_rope[1024-fp16]": bench("test_rope[1024-fp16]", -8.3, direction="improvement", roofline=0.42),
    }
    return report(suite_of(48, changed), "regression")


def improvements() -> dict[str, Any]:
    changed = {
        "test_layernorm[16384-bf16]": bench("test_layernorm[16384-bf16]", -31.0, direction="improvement",
                                            roofline=0.55),
        "test_layernorm[8192-bf16]": bench("test_layernorm[8192-bf16]", -24.6, direction="improvement",
                                           roofline=0.58),
        "test_gelu[4096-fp16]": bench("test_gelu[4096-fp16]", -4.1, direction="improvement", roofline=0.07),
    }
    return report(suite_of(48, changed), "improvement")


def correctness_failure() -> dict[str, Any]:
    return report(suite_of(48), "failure", state="succeeded",
                  new_failures=[failure("suites.correctness.test_softmax::test_softmax[4096-fp16]", SOFTMAX_FAILURE)],
                  fixed=["correctness::suites.correctness.test_rope::test_rope[1024-bf16]"])


def grouped_failures() -> dict[str, Any]:
    """One bug failing eleven parametrizations of test_softmax, and a plain test: two failures, not twelve."""
    function = "suites.correctness.test_softmax::test_softmax"
    tests = [f"{function}[{n}-{d}]" for n in (1024, 4096, 8192, 16384) for d in ("fp16", "bf16", "fp32")][:11]
    return report(suite_of(48), "failure", state="succeeded",
                  new_failures=[failure(function, SOFTMAX_FAILURE, tests=tests),
                                failure("suites.correctness.test_softmax::test_softmax_empty", "assert 1 == 0")],
                  fixed=[f"correctness::suites.correctness.test_rope::test_rope[{n}-bf16]" for n in SHAPES])


def inconclusive() -> dict[str, Any]:
    changed = {
        "test_gelu[1024-fp16]": bench("test_gelu[1024-fp16]", 3.1, direction="inconclusive", noise_pct=4.9,
                                      threshold_pct=2.0, mde_pct=14.2, rounds=10),
        "test_gelu[1024-bf16]": bench("test_gelu[1024-bf16]", -2.4, direction="inconclusive", noise_pct=5.3,
                                      threshold_pct=2.0, mde_pct=15.0, rounds=10),
        "test_silu_mul[1024-fp16]": bench("test_silu_mul[1024-fp16]", 4.0, direction="inconclusive",
                                          noise_pct=3.6, threshold_pct=2.0, mde_pct=10.9, rounds=10),
    }
    return report(suite_of(48, changed, rounds=10), "inconclusive", rounds=10)


def errored() -> dict[str, Any]:
    return report([], "errored", state="errored", rounds=0,
                  error=f"base commit {BASE_SHA} does not exist in acme/kernels")


def missing_on_head() -> dict[str, Any]:
    """A head that raised its own min_effect, dropped one benchmark and renamed another: judged by the base."""
    renamed = bench("test_rope[1024-fp16]", 0.4)
    renamed["head_benchmark"] = "test_rotary[1024-fp16]"
    data = report(suite_of(12, {"test_rope[1024-fp16]": renamed}), "missing")
    data["judged_by"] = "pyproject.toml of the base commit"
    data["settings_changes"] = [{"what": "min_effect", "before": "2 %", "after": "60 %"},
                                {"what": "renamed test_rope[1024-fp16]", "before": "not renamed",
                                 "after": "test_rotary[1024-fp16]"}]
    data["missing_on_head"] = [
        {"suite": "benchmarks", "benchmark": "test_rmsnorm[4096-bf16]",
         "reason": "not reported by the head (deselected, renamed, deleted, or it no longer collects)"},
        {"suite": "benchmarks", "benchmark": "test_rope[1024-fp16]",
         "reason": "renamed to test_rotary[1024-fp16] by the head's own [tool.roofwatch] renamed: paired here, "
                   "counted once accepted", "accepted_by": "keeper", "accepted_at": "2026-11-28T09:00:00+00:00",
         "accepted_via": "comment"},
    ]
    data["new_on_head"] = [{"suite": "benchmarks", "benchmark": "test_rmsnorm_fused[4096-bf16]"}]
    return data


def attributed() -> dict[str, Any]:
    """Each change with its one line of why; a benchmark whose code is identical moved too: an interaction."""
    changed = {
        "test_rmsnorm[4096-bf16]": bench("test_rmsnorm[4096-bf16]", 17.4, direction="regression", roofline=0.81),
        "test_softmax[8192-fp16]": bench("test_softmax[8192-fp16]", 6.2, direction="regression", noise_pct=1.1,
                                         threshold_pct=2.2, mde_pct=1.4, roofline=None),
        "test_rope[1024-fp16]": bench("test_rope[1024-fp16]", -8.3, direction="improvement", roofline=0.42),
        "test_gelu[4096-fp16]": bench("test_gelu[4096-fp16]", -39.4, direction="interaction", roofline=0.07),
    }
    changed["test_rmsnorm[4096-bf16]"] |= {
        "why": "kernel _rms_norm_fwd: num_warps 8 → 4 · compiled _rms_norm_fwd sm_90: registers 64 → 40",
        "cause": "kernels",
        "attribution": {"kernels": ["_rms_norm_fwd: num_warps 8 → 4"], "compiled": ["_rms_norm_fwd sm_90: registers 64 → 40"],
                        "files": ["kernels/rmsnorm.py"]}}
    changed["test_softmax[8192-fp16]"] |= {
        "why": "environment: triton 3.8.0 → 3.9.0", "cause": "environment",
        "attribution": {"environment": ["triton 3.8.0 → 3.9.0"]}}
    changed["test_rope[1024-fp16]"] |= {
        "why": "imported file changed: kernels/rotary.py", "cause": "files",
        "attribution": {"files": ["kernels/rotary.py"]}}
    gelu = changed["test_gelu[4096-fp16]"]
    gelu["reason"] = ("interaction (improvement by the numbers, -39.4 %): nothing it imports or launches changed, "
                      "nor its environment")
    gelu |= {"why": "interaction: nothing it imports or launches changed, nor its environment — what ran before "
                    "it in the process, or the machine, moved it", "cause": "identical",
             "attribution": {"moved": "improvement", "evidence": {
                 "modes": [8.35e-06, 1.515e-05],
                 "line": "modes ≈ 8.35 µs and ≈ 15.2 µs: base slow in 6 of 8, head fast in 8 of 8",
                 "order_dependent": {"after": "test_softmax[8192-fp16]", "mode": "slow",
                                     "line": "order-dependent: slow in 6 of 7 processes where "
                                             "test_softmax[8192-fp16] ran before it, fast in 9 of 9 where it did not"}}}}
    return report(suite_of(48, changed), "regression")


def uploaded_inconclusive() -> dict[str, Any]:
    """Two single runs from the team's CI: a +38 % move inside the ±110 % their noise allows, said as undecided."""
    reason = ("+38.2% is within the ±110.4% noise threshold, and its interval [+11.6, +61.0] reaches beyond the ±5% "
              "that counts: two single runs cannot tell it from a change; an A/B of interleaved rounds can")
    changed = {"test_rmsnorm[8192-bf16]": {**bench("test_rmsnorm[8192-bf16]", 38.2, direction="inconclusive",
                                                   noise_pct=36.4, threshold_pct=110.4, mde_pct=110.4, rounds=0),
                                           "reason": reason, "ci_low": 11.6, "ci_high": 61.0}}
    data = report(suite_of(12, changed, threshold_pct=50.0, mde_pct=50.0, rounds=0), "inconclusive", rounds=0)
    return {**data, "purpose": "upload", "mde_pct": 110.4}


VARIANTS: dict[str, Callable[[], dict[str, Any]]] = {
    "no_change": no_change, "regressions": regressions, "improvements": improvements,
    "correctness_failure": correctness_failure, "grouped_failures": grouped_failures, "inconclusive": inconclusive, "errored": errored,
    "missing_on_head": missing_on_head, "attributed": attributed, "uploaded_inconclusive": uploaded_inconclusive,
}


# --- golden files --------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_comment_matches_golden_file(variant: str) -> None:
    body = render_comment(VARIANTS[variant](), CONTEXT)
    path = GOLDEN / f"{variant}.md"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}; run with ROOFWATCH_UPDATE_GOLDEN=1 to create it"
    assert body == path.read_text(encoding="utf-8"), f"{variant} differs from {path}"
    assert body.startswith(MARKER + "\n")


def test_rendering_is_deterministic() -> None:
    for build in VARIANTS.values():
        assert render_comment(build(), CONTEXT) == render_comment(build(), CONTEXT)


# --- the summary ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "conclusion", "title"), [
    ("no_change", "success", "no significant change in 48 benchmarks (detectable ±1.4 %)"),
    ("regressions", "failure", "2 slower (worst +17.4 % test_rmsnorm[4096-bf16]), 1 faster · 48 benchmarks, 5 rounds"),
    ("improvements", "success", "3 faster (best -31.0 % test_layernorm[16384-bf16]) · 48 benchmarks, 5 rounds"),
    ("correctness_failure", "failure",
     "1 new test failure: correctness::suites.correctness.test_softmax::test_softmax[4096-fp16]"),
    ("grouped_failures", "failure",
     "2 new test failures: correctness::suites.correctness.test_softmax::test_softmax (11 parametrizations) and 1 more"),
    ("inconclusive", "neutral", "inconclusive after 10 rounds: 3 benchmarks too noisy to call"),
    ("uploaded_inconclusive", "neutral", "inconclusive: 1 benchmark too noisy to call from two single runs"),
    ("errored", "failure", "could not measure: base commit 9f8e7d6 does not exist in acme/kernels"),
    ("missing_on_head", "failure", "1 benchmark of the base missing on the head: test_rmsnorm[4096-bf16] "
                                   "(a maintainer accepts: /roofwatch accept)"),
])
def test_summary_per_variant(variant: str, conclusion: str, title: str) -> None:
    summary = summarize(VARIANTS[variant]())
    assert (summary.conclusion, summary.title) == (conclusion, title)


def test_a_failure_stored_before_grouping_still_renders_as_its_one_test() -> None:
    data = correctness_failure()
    del data["new_failures"][0]["tests"]
    assert render_comment(data, CONTEXT) == render_comment(correctness_failure(), CONTEXT)


def test_every_interval_label_names_the_level_it_was_decided_at() -> None:
    """No "95 %" anywhere: the table of changes says their adjusted level, the full table the decision's."""
    body = render_comment(regressions(), CONTEXT)
    assert "95 %" not in body
    assert "| 99.9 % interval |" in body and "| 99 % interval |" in body
    assert "\\* a change's interval, at 99.9 %" in body
    quiet = render_comment(no_change(), CONTEXT)
    assert "| 99 % interval |" in quiet and "a change's interval" not in quiet


def test_a_missing_benchmark_follows_the_repository_policy_and_accepted_ones_do_not_count() -> None:
    data = missing_on_head()
    data["missing_policy"] = "neutral"
    assert summarize(data).conclusion == "neutral"
    data["missing_on_head"] = [m for m in data["missing_on_head"] if m.get("accepted_by")]
    data["verdict"] = "no-change"
    assert summarize(data).conclusion == "success"
    body = render_comment(data, CONTEXT)
    assert "#### Missing on the head (1), accepted" in body and "accepted by `keeper`" in body


def test_a_regression_wins_over_a_missing_benchmark() -> None:
    data = regressions()
    data["missing_on_head"] = missing_on_head()["missing_on_head"][:1]
    assert summarize(data).conclusion == "failure" and summarize(data).title.startswith("2 slower")


def test_settings_the_head_changes_are_one_line_of_inert_text() -> None:
    data = missing_on_head()
    data["settings_changes"] = [{"what": "suite benchmarks: command", "before": "pytest bench",
                                 "after": "pytest bench -k 'not x' `](javascript:alert(1))"}]
    body = render_comment(data, CONTEXT)
    [line] = [line for line in body.splitlines() if "changes roofwatch's settings" in line]
    assert "``pytest bench -k 'not x' `](javascript:alert(1))``" in line


def test_a_correctness_failure_with_an_improvement_still_fails() -> None:
    data = improvements()
    data.update(verdict="failure", new_failures=[failure("test_rope[1024-fp16]", "AssertionError: mismatch")])
    summary = summarize(data)
    assert summary.conclusion == "failure" and summary.title.startswith("1 new test failure:")
    body = render_comment(data, CONTEXT)
    assert "### roofwatch: **failure** — 1 new test failure, 3 faster" in body
    assert body.index("#### 1 new test failure") < body.index("#### Significant changes")


def test_a_run_whose_suites_did_not_finish_is_not_green() -> None:
    data = no_change()
    data.update(state="failed", error="suites did not finish: correctness")
    assert summarize(data) == Summary("failure", "incomplete: suites did not finish: correctness")
    body = render_comment(data, CONTEXT)
    assert "### roofwatch: **incomplete**" in body and "**Incomplete run:**" in body
    # The reason carries each suite's own reason and last lines below its first: titles keep the first.
    data.update(error="suites did not finish: correctness\nhead correctness: errored: exit 3\nImportError: no gelu")
    assert summarize(data) == Summary("failure", "incomplete: suites did not finish: correctness")


def test_too_few_rounds_and_throughput_units_read_plainly() -> None:
    few = bench("test_gelu[1024-fp16]", 0.0, direction="inconclusive", threshold_pct=None, mde_pct=None, rounds=2)
    few.update(ci_low=0.0, ci_high=0.0, reason="only 2 paired round(s); need 3")
    bandwidth = bench("test_copy[1GiB]", -12.0, direction="improvement", unit="GB/s", higher_is_better=True,
                      base_median=2412.0)
    body = render_comment(report(suite_of(48, {few["benchmark"]: few, "test_copy[1GiB]": bandwidth}),
                                 "inconclusive", rounds=2), CONTEXT)
    assert "- `test_gelu[1024-fp16]`: only 2 paired round(s); need 3" in body
    assert "| `test_gelu[1024-fp16]` | 6.10 µs | 6.10 µs | +0.0 % | – | 0.8 % | – |" in body  # no fake 0..0 interval
    assert "| `test_copy[1GiB]` | 2,412 GB/s | 2,741 GB/s | **-12.0 %** |" in body


@pytest.mark.parametrize("build", [
    lambda name: report(suite_of(48, {name: bench(name, 250.0, direction="regression")}), "regression"),
    lambda name: report(suite_of(48, {name: bench(name, -75.0, direction="improvement")}), "improvement"),
    lambda name: report(suite_of(3), "failure", new_failures=[failure(name, "boom"), failure(name + "2", "x")]),
    lambda name: report([], "errored", state="errored", rounds=0, error=f"head: {name}\nwith\nnewlines"),
])
def test_titles_stay_within_140_characters_and_one_line(build: Callable[[str], dict[str, Any]]) -> None:
    name = "test_fused_attention[" + "-".join(f"seq{i}" for i in range(80)) + "]"
    title = summarize(build(name)).title
    assert len(title) <= 140 and "\n" not in title
    assert title.endswith(("…", ")", "more", "rounds", "newlines"))


def test_a_long_name_keeps_the_counts_in_the_title() -> None:
    name = "test_" + "x" * 300
    title = summarize(report(suite_of(48, {name: bench(name, 12.0, direction="regression")}), "regression")).title
    assert len(title) == 140 and title.endswith("…) · 48 benchmarks, 5 rounds") and "+12.0 %" in title


# --- hostile input -------------------------------------------------------------------------------


def test_pipes_and_backticks_in_a_name_do_not_break_the_table() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    name = "test_mm[a|b`c``d|`]"
    body = render_comment(report(suite_of(48, {name: bench(name, 9.0, direction="regression")}), "regression"),
                          CONTEXT)
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(body)
    widths: list[int] = []
    cells = 0
    for token in tokens:
        if token.type == "tr_open":
            cells = 0
        elif token.type in ("th_open", "td_open"):
            cells += 1
        elif token.type == "tr_close":
            widths.append(cells)
    assert set(widths) == {6, 9}  # the significant-changes table and the full table, every row whole
    code = [child.content for t in tokens if t.type == "inline" for child in t.children or []
            if child.type == "code_inline"]
    assert code.count(name) == 2  # the exact name, once in each table


def test_backticks_in_a_failure_message_stay_inside_its_code_block() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    message = "AssertionError: bad output\n```\n# escaped? @octocat\n````\n**bold** <b>html</b>\nlast line"
    body = render_comment(report(suite_of(3), "failure", new_failures=[failure("test_x", message)]), CONTEXT)
    tokens = markdown_it.MarkdownIt("commonmark").parse(body)
    blocks = [t.content for t in tokens if t.type == "fence"]
    assert blocks == [message + "\n"]
    assert not any(t.type == "inline" and "**bold**" in t.content for t in tokens)


def test_long_failure_output_is_cut_to_its_first_lines_and_its_location() -> None:
    message = "\n".join(f"line {i}" for i in range(199)) + "\nsuites/correctness/test_x.py:21: AssertionError"
    body = render_comment(report(suite_of(3), "failure", new_failures=[failure("test_x", message)]), CONTEXT)
    assert ("line 12\n[… 186 lines omitted, full output on the dashboard …]\n"
            "suites/correctness/test_x.py:21: AssertionError\n```") in body
    assert "line 13" not in body


def test_5000_benchmarks_stay_under_githubs_limit() -> None:
    changed = {f"test_rmsnorm[{i}-bf16]": bench(f"test_rmsnorm[{i}-bf16]", 5.0 + i / 10, direction="regression")
               for i in range(40)}
    body = render_comment(report(suite_of(5000, changed), "regression"), CONTEXT)
    assert len(body) <= MAX_COMMENT_CHARS
    assert body.startswith(MARKER + "\n") and "#### Significant changes" in body
    assert "| `test_rmsnorm[39-bf16]` | 12.1 µs | 13.2 µs | **+8.9 %** |" in body  # the worst, first
    assert re.search(r"_… \d+ more rows on the dashboard\._\n\n\\\* a change's interval, at [\d.]+ %[^\n]*\n\n</details>",
                     body)
    assert body.rstrip().endswith("(https://roofwatch.example.com/compare/acme/kernels/7)")


def test_everything_at_once_still_fits() -> None:
    rows = [bench(f"test_k{i}[{'n' * 60}]", 30.0, direction="regression") for i in range(5000)]
    failures = [failure(f"test_broken_{i}", "E   " + "x" * 500 + "\n" * 30) for i in range(3000)]
    body = render_comment(report(rows, "failure", new_failures=failures, fixed=[f"c::t{i}" for i in range(500)]),
                          CONTEXT)
    assert len(body) <= MAX_COMMENT_CHARS and body.startswith(MARKER)
    assert "#### 3000 new test failures" in body and "#### Significant changes" in body
    assert "more failures on the dashboard" in body and "All 5000 benchmarks" in body
    assert "#### Fixed (500)" in body and "more tests on the dashboard" in body


def test_the_noisiest_benchmark_is_named_as_what_sets_the_smallest_detectable_change() -> None:
    data = no_change()
    data["mde_benchmark"] = "test_softmax[4096]"
    body = render_comment(data, CONTEXT)
    assert "(on every benchmark, at 80 % power; the noisiest, `test_softmax[4096]`, sets it)" in body
    alone = report([bench("test_only")], "none")
    alone["mde_benchmark"] = "test_only"  # one benchmark: nothing to single out
    assert "(on every benchmark, at 80 % power)." in render_comment(alone, CONTEXT)
