"""Peak memory as a benchmark of its own: derived per process, its own min_effect, decided like a time."""

from __future__ import annotations

import pytest

from roofwatch.ab.rounds import round_verdicts
from roofwatch.common.envelope import MeasurementRecord, RoundRecord, SuiteResult
from roofwatch.suite_config.declared import SuiteSpec
from roofwatch.workers.ab import min_effects_for
from roofwatch.workers.memory_suites import with_memory_suites

MIB = 2**20


def _process(side: str, index: int, seconds: float, peak: float) -> RoundRecord:
    timed = MeasurementRecord(name="test_k", median=seconds, iqr=0, min=seconds, mean=seconds, n=5,
                              samples=[seconds] * 5, extra_info={"peak_memory_bytes": peak,
                                                                  "peak_memory_source": "cuda"})
    return RoundRecord(side=side, index=index, suites=with_memory_suites([SuiteResult(  # type: ignore[arg-type]
        name="bench", kind="benchmark", status="passed", measurements=[timed])]))


def _rounds(n: int, head_peak: float, times: list[tuple[float, float]]) -> list[RoundRecord]:
    return [r for i in range(n) for r in (_process("base", i, times[i][0], 4 * MIB),
                                          _process("head", i, times[i][1], head_peak))]


# Per-process times that wander ±20 % on both sides: the time stays undecided while the memory is not.
NOISY = [(1.00, 1.19), (1.21, 0.98), (0.83, 1.02), (1.10, 0.84), (0.95, 1.22)]


@pytest.mark.parametrize(("rounds", "head_peak", "memory"), [
    # an unchanged peak is "no change" at the first verdict; a doubled one a regression once it holds
    # without its most extreme round (the fourth)
    (3, 4 * MIB, "none"),
    (3, 8 * MIB, "inconclusive"),
    (4, 8 * MIB, "regression"),
    (4, 2 * MIB, "improvement"),
    # within the memory min_effect (5 %): it does not count
    (4, 4.1 * MIB, "none"),
])
def test_a_peak_is_decided_on_its_own_whatever_the_time_does(rounds: int, head_peak: float, memory: str) -> None:
    records = _rounds(rounds, head_peak, NOISY)
    effects = min_effects_for(records, [(SuiteSpec(name="bench", kind="benchmark", command="pytest"), "")], 0.02)
    assert effects == {"bench::test_k": 0.02, "bench:memory::test_k": 0.05}
    verdicts = round_verdicts(records, 0.02, effects)
    assert verdicts["bench:memory::test_k"].direction == memory
    assert verdicts["bench::test_k"].direction == "inconclusive"


def test_the_memory_min_effect_is_its_own() -> None:
    records = _rounds(4, 4.1 * MIB, NOISY)  # +2.5 %
    spec = [(SuiteSpec(name="bench", kind="benchmark", command="pytest", min_effect=0.5,
                       min_effects={"test_*": 0.3}), "")]
    effects = min_effects_for(records, spec, 0.02, memory=0.01)
    # the suite's and the patterns' min_effect are for its timings; memory has the repository's memory_min_effect
    assert effects == {"bench::test_k": 0.3, "bench:memory::test_k": 0.01}
    assert round_verdicts(records, 0.02, effects)["bench:memory::test_k"].direction == "regression"


def test_peaks_counted_by_different_allocators_are_not_compared() -> None:
    records = _rounds(4, 8 * MIB, NOISY)
    for record in records:
        if record.side == "head":
            derived = record.suites[1].measurements[0]
            record.suites[1].measurements[0] = derived.model_copy(update={"timing": {"memory_source": "tracemalloc"}})
    assert "bench:memory::test_k" not in round_verdicts(records, 0.02, {})


def test_the_derived_suite_carries_its_parents_status_and_round_selection() -> None:
    timed = MeasurementRecord(name="t", median=1.0, iqr=0, min=1.0, mean=1.0, n=1, extra_info={"peak_memory_bytes": 64})
    parent = SuiteResult(name="bench", kind="benchmark", status="failed", reason="1 test(s) failed", exit_code=1,
                         measurements=[timed], selected=["t"], order_seed=7, output_tail="long output")
    other = SuiteResult(name="checks", kind="correctness", status="passed")
    suites = with_memory_suites([parent, other])
    assert [s.name for s in suites] == ["bench", "checks", "bench:memory"]
    derived = suites[2]
    assert (derived.status, derived.reason, derived.exit_code, derived.selected, derived.order_seed) == (
        "failed", "1 test(s) failed", 1, ["t"], 7)
    assert derived.output_tail == ""  # the parent's output is shown once


@pytest.mark.parametrize(("peak", "source", "tracked"), [
    (512.0, "tracemalloc", False),  # the interpreter's bookkeeping for a call into a preallocated output
    (64 * 1024 - 1, "tracemalloc", False),
    (64 * 1024, "tracemalloc", True),
    (512.0, "cuda", True),  # one allocator block: a real allocation
    (512.0, None, True),  # a benchmark's own report
])
def test_a_traced_peak_below_a_buffer_is_not_tracked(peak: float, source: str | None, tracked: bool) -> None:
    extra: dict[str, object] = {"peak_memory_bytes": peak, **({"peak_memory_source": source} if source else {})}
    record = MeasurementRecord(name="t", median=1.0, iqr=0, min=1.0, mean=1.0, n=1, extra_info=extra)
    suites = with_memory_suites([SuiteResult(name="b", kind="benchmark", status="passed", measurements=[record])])
    assert (len(suites) == 2) is tracked
