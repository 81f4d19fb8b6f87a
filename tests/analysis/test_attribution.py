"""Why a benchmark moved: what differs between the two sides' records of what it ran, table-driven."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from roofwatch.ab import abtest
from roofwatch.ab.interactions import Process, evidence, modes, order_dependence
from roofwatch.common.envelope import CompiledArtifactRecord, MeasurementRecord, RoundRecord, SuiteResult
from roofwatch.service.analysis.attribution import IDENTICAL, attribute, untraced_files
from roofwatch.service.analysis.causes import causes, judged
from roofwatch.service.analysis.compiled import ArtifactDiff

FILES = {"bench/test_b.py": "11", "pkg/__init__.py": "22", "pkg/b.py": "33"}
SCALE = {"kernel": "pkg.kern._scale_kernel", "source": "aa", "BLOCK": 256, "num_warps": 4, "dtypes": "float32"}


def record(files: dict[str, str] | None = None, kernels: list[dict[str, Any]] | None = None,
           complete: bool = True, **extra: Any) -> dict[str, Any]:
    return {"files": dict(FILES if files is None else files), "kernels": list(kernels or []), "complete": complete,
            **extra}


def both(base: dict[str, Any], head: dict[str, Any], processes: int = 3) -> tuple[list, list]:
    return [base] * processes, [head] * processes


@pytest.mark.parametrize(("head", "cause", "why"), [
    (record(kernels=[SCALE | {"num_warps": 8}]), "kernels", "kernel _scale_kernel: num_warps 4 → 8"),
    (record(kernels=[SCALE | {"source": "bb"}], files=FILES | {"pkg/kern.py": "9"}), "kernels",
     "kernel _scale_kernel: source changed · imported file changed: pkg/kern.py"),
    (record(kernels=[SCALE, {"kernel": "pkg.kern._other", "source": "cc"}]), "kernels", "kernel _other: newly launched"),
    (record(kernels=[]), "kernels", "kernel _scale_kernel: no longer launched"),
    (record(kernels=[SCALE | {"BLOCK": 512, "dtypes": "bfloat16"}]), "kernels",
     "kernel _scale_kernel: BLOCK 256 → 512, dtypes float32 → bfloat16"),
    (record(files=FILES | {"pkg/b.py": "34"}, kernels=[SCALE]), "files", "imported file changed: pkg/b.py"),
    (record(files={**FILES, "pkg/util.py": "1"}, kernels=[SCALE]), "files", "imported file changed: pkg/util.py"),
])
def test_what_differs_is_named(head: dict[str, Any], cause: str, why: str) -> None:
    found = attribute(*both(record(kernels=[SCALE]), head), changed_files=["pkg/b.py"])
    assert (found.cause, found.why) == (cause, why)


def test_the_autotuners_choice_is_named_with_how_often_each_side_made_it() -> None:
    tuned = {"kernel": "pkg.mm._mm", "source": "aa", "BLOCK": 64, "num_warps": 4, "autotuned": "BLOCK=64 num_warps=4"}
    other = tuned | {"BLOCK": 128, "num_warps": 8, "autotuned": "BLOCK=128 num_warps=8"}
    base = [record(kernels=[tuned])] * 4
    head = [record(kernels=[other])] * 3 + [record(kernels=[tuned])]
    found = attribute(base, head, changed_files=[])
    assert found.cause == "kernels"
    assert found.why == ("kernel _mm: autotuned to BLOCK=128 num_warps=8 in 3 of 4 / BLOCK=64 num_warps=4 in 1 of 4 "
                         "(was BLOCK=64 num_warps=4)")


def test_an_environment_change_is_named_before_the_files() -> None:
    found = attribute(*both(record(), record(files=FILES | {"pkg/b.py": "0"})), ["torch 2.4.0 → 2.5.0"], [])
    assert found.cause == "environment"
    assert found.why == "environment: torch 2.4.0 → 2.5.0 · imported file changed: pkg/b.py"


def test_identical_code_with_only_other_python_files_and_docs_changed_is_an_interaction() -> None:
    found = attribute(*both(record(kernels=[SCALE]), record(kernels=[SCALE])),
                      changed_files=["pkg/a.py", "README.md", "docs/usage.md"])
    assert found.identical and found.why == IDENTICAL


@pytest.mark.parametrize(("changed", "untraced"), [
    (["pkg/a.py", "data/table.bin"], ["data/table.bin"]),
    (["csrc/kernel.cu", "pyproject.toml"], ["csrc/kernel.cu", "pyproject.toml"]),
])
def test_a_changed_file_no_record_follows_keeps_it_from_an_interaction(changed: list[str], untraced: list[str]) -> None:
    found = attribute(*both(record(), record()), changed_files=changed)
    assert found.cause == "untraced" and found.untraced == untraced
    assert untraced_files(changed, FILES) == untraced


@pytest.mark.parametrize(("base", "head", "changed"), [
    ([], [record()], []),  # an upload, an older worker: nothing recorded
    ([record(complete=False, notes=["more than 32 distinct launches: 3 not kept"])] * 2, [record()] * 2, []),
    ([record()] * 2, [record(), record(files=FILES | {"pkg/b.py": "0"})], []),  # a side disagreeing with itself
    ([record()] * 2, [record()] * 2, None),  # the commit's changed files are not known
])
def test_without_a_full_record_on_both_sides_the_cause_is_unknown(base: list, head: list, changed: list | None) -> None:
    found = attribute(base, head, changed_files=changed)
    assert found.cause == "unknown" and found.why == "" and found.notes


def verdict(direction: str, change_pct: float, threshold: float = 2.0) -> abtest.ABVerdict:
    return abtest.ABVerdict(change_pct, change_pct - 5, change_pct + 5, 1e-4, 1e-3, 3.0, threshold, 2.0, 8,
                            direction, "")  # type: ignore[arg-type]


@pytest.mark.parametrize(("found", "cause", "direction"), [
    (verdict("regression", 180.0), "identical", "interaction"),
    (verdict("improvement", -3.0), "identical", "interaction"),
    (verdict("inconclusive", 120.0), "identical", "interaction"),  # it moved; its rounds disagree how much
    (verdict("inconclusive", 1.0), "identical", "inconclusive"),  # only noisy: still undecided
    (verdict("none", 0.4), "identical", "none"),
    (verdict("regression", 180.0), "files", "regression"),
    (verdict("regression", 180.0), "unknown", "regression"),
    (verdict("regression", 180.0), "untraced", "regression"),
])
def test_a_move_of_identical_code_is_an_interaction_at_any_size(found: abtest.ABVerdict, cause: str,
                                                                 direction: str) -> None:
    decided = judged(found, {"cause": cause, "evidence": {"line": "modes ≈ 20 ms and ≈ 60 ms"}})
    assert decided.direction == direction
    if direction == "interaction":
        assert decided.reason.startswith(f"interaction ({found.direction} by the numbers")
        assert abtest.overall([decided]) == "no-change"


def processes(base: list[float], head: list[float], before: dict[tuple[str, int], set[str]] | None = None
              ) -> list[Process]:
    """Processes measuring ``test_x``, each after the benchmarks ``before`` names for it."""
    out = []
    for side, values in (("base", base), ("head", head)):
        for i, value in enumerate(values):
            order = [*sorted((before or {}).get((side, i), set())), "test_x"]
            out.append(Process(side, i, value, {name: at for at, name in enumerate(order)}, len(order) - 1))
    return out


def test_the_modes_say_which_side_sat_in_which() -> None:
    """The issue's gelu: identical code, base mostly in the slow mode, head always in the fast one (ms)."""
    found = processes([x / 1e3 for x in (152, 142, 132, 215, 151, 113, 97, 155)],
                      [x / 1e3 for x in (84, 83, 80, 77, 82, 104, 98, 80)])
    shown = evidence(found)
    assert shown["line"] == "modes ≈ 83.5 ms and ≈ 151 ms: base slow in 6 of 8, head fast in 8 of 8"
    assert shown["rounds"][0] == {"round": 1, "base": "slow", "head": "fast"}
    assert "order_dependent" not in shown


def test_one_spread_is_not_two_modes() -> None:
    found = processes([0.0100, 0.0102, 0.0099, 0.0101], [0.0103, 0.0098, 0.0100, 0.0102])
    assert modes(found) is None
    assert evidence(found)["line"].startswith("one mode: base ≈ 10")


def test_the_benchmark_whose_running_earlier_decides_the_mode_is_named() -> None:
    """Slow exactly in the processes where test_a ran before it, whichever side."""
    after_a = {("base", 1), ("base", 3), ("head", 0), ("head", 1), ("head", 3)}
    before = {key: ({"test_a", "test_c"} if key in after_a else {"test_c"}) for key in
              [(s, i) for s in ("base", "head") for i in range(4)]}
    values = {key: 0.060 if key in after_a else 0.020 for key in before}
    found = processes([values[("base", i)] for i in range(4)], [values[("head", i)] for i in range(4)], before)
    order = order_dependence(found, modes(found))  # type: ignore[arg-type]
    assert order is not None and order["after"] == "test_a" and order["mode"] == "slow"
    assert order["line"] == ("order-dependent: slow in 5 of 5 processes where test_a ran before it, "
                             "fast in 3 of 3 where it did not")


# --- the compile suite's diff joins the line -----------------------------------------------------

WIDER = ArtifactDiff("pkg.kern._scale_kernel", "fp32, BLOCK=256, w4 → fp32, BLOCK=256, w8", "sm_90", "changed",
                     changes=(("registers", 64, 40), ("spill_bytes", 0, 96)))


@pytest.mark.parametrize(("head", "compiled", "cause", "why"), [
    # the launch change and what it compiled to, in one line
    (record(kernels=[SCALE | {"num_warps": 8}]), [WIDER], "kernels",
     "kernel _scale_kernel: num_warps 4 → 8 · compiled _scale_kernel sm_90: registers 64 → 40, spills 0 B → 96 B"),
    # no launch recorded differently (the same launch compiled by the head's code): the binary is the cause
    (record(kernels=[SCALE]), [WIDER], "kernels", "compiled _scale_kernel sm_90: registers 64 → 40, spills 0 B → 96 B"),
    # two specializations with the same brief line are named once
    (record(kernels=[SCALE]), [WIDER, replace(WIDER, specialization="fp16, BLOCK=256, w4 → fp16, BLOCK=256, w8")],
     "kernels", "compiled _scale_kernel sm_90: registers 64 → 40, spills 0 B → 96 B"),
    # the compile suite found nothing that differs: the line is what the records say
    (record(kernels=[SCALE | {"num_warps": 8}]), [], "kernels", "kernel _scale_kernel: num_warps 4 → 8"),
])
def test_the_compiled_diff_joins_the_line(head: dict[str, Any], compiled: list[ArtifactDiff], cause: str,
                                          why: str) -> None:
    found = attribute(*both(record(kernels=[SCALE]), head), changed_files=["pkg/kern.py"], compiled=compiled)
    assert (found.cause, found.why) == (cause, why)
    assert found.as_json().get("compiled", []) == list(dict.fromkeys(d.brief() for d in compiled))


def _artifact(kernel: str, tests: list[str], registers: int, toolchain: str = "triton 3.9.0, ptxas 12.9.86",
              ) -> CompiledArtifactRecord:
    return CompiledArtifactRecord(kernel=kernel, specialization="fp32, w4", target="sm_90", status="compiled",
                                  registers=registers, spill_bytes=0, shared_bytes=0, sass_hash=f"{kernel}{registers}",
                                  toolchain=toolchain, tests=tests)


def _ab_round(side: str, index: int, artifacts: list[CompiledArtifactRecord]) -> RoundRecord:
    ran = record(kernels=[SCALE])
    measured = SuiteResult(name="bench", kind="benchmark", status="passed", measurements=[
        MeasurementRecord(name=name, median=1.0, iqr=0.0, min=1.0, mean=1.0, n=1, ran=ran)
        for name in ("test_norm", "test_copy")])
    compiled = [SuiteResult(name="compiled", kind="compile", status="passed", artifacts=artifacts)] if index == 0 else []
    return RoundRecord(side=side, index=index, suites=[measured, *compiled])  # type: ignore[arg-type]


@pytest.mark.parametrize(("head_norm", "toolchain", "norm_why"), [
    (40, "triton 3.9.0, ptxas 12.9.86", "compiled _norm sm_90: registers 64 → 40"),
    (64, "triton 3.9.0, ptxas 12.9.86", IDENTICAL),
    # another compiler on the head: its binaries say nothing about the commit
    (40, "triton 3.10.0, ptxas 12.9.86", IDENTICAL),
])
def test_each_benchmark_gets_the_binaries_its_own_tests_launched(head_norm: int, toolchain: str,
                                                                 norm_why: str) -> None:
    base = [_artifact("pkg.k._norm", ["test_norm"], 64), _artifact("pkg.k._copy", ["test_copy"], 32)]
    head = [_artifact("pkg.k._norm", ["test_norm"], head_norm, toolchain),
            _artifact("pkg.k._copy", ["test_copy"], 32, toolchain)]
    rounds = [_ab_round("base", 0, base), _ab_round("head", 0, head), _ab_round("base", 1, []), _ab_round("head", 1, [])]
    why = causes(rounds, {}, changed_files=["docs/index.md"])
    assert why["bench::test_norm"]["why"] == norm_why
    assert why["bench::test_copy"]["why"] == IDENTICAL
