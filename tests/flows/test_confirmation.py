"""Confirmation A/Bs decide exactly what was asked, on numbers the test sets (no timing involved)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select

from roofwatch.service.core.db import migrate, session_scope
from roofwatch.service.core.keys import comparison_key
from roofwatch.service.core.models import (
    Benchmark,
    Change,
    Commit,
    Comparison,
    ComparisonResult,
    Device,
    Measurement,
    Repository,
    Run,
    utcnow,
)
from roofwatch.service.flows import confirmation

NAMES = ("rmsnorm", "softmax", "matmul", "copy")


@pytest.fixture
def pair(roofwatch_env: Path) -> dict[str, int]:
    """Two adjacent commits (positions 4 and 5); candidates: rmsnorm slower, softmax faster."""
    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels_x", clone_url="/nowhere")
        device = Device(fingerprint="cpu-0", device_class="cpu")
        session.add_all([repository, device])
        session.flush()
        good = Commit(repository_id=repository.id, sha="a" * 40, position=4)  # type: ignore[arg-type]
        bad = Commit(repository_id=repository.id, sha="b" * 40, position=5)  # type: ignore[arg-type]
        session.add_all([good, bad])
        session.flush()
        ids = {"repository": repository.id, "device": device.id, "good": good.id, "bad": bad.id}
        for name in NAMES:
            benchmark = Benchmark(fingerprint=name, repository_id=repository.id, suite="benchmarks",  # type: ignore[arg-type]
                                  name=name, device_class="cpu")
            session.add(benchmark)
            session.flush()
            ids[name] = benchmark.id  # type: ignore[assignment]
        for name, kind in (("rmsnorm", "perf-regression"), ("softmax", "perf-improvement")):
            change = Change(repository_id=repository.id, benchmark_id=ids[name], kind=kind, phase="confirming",  # type: ignore[arg-type]
                            device_id=device.id, range_start_sha=good.sha, range_end_sha=bad.sha,
                            range_start_position=4, range_end_position=5, first_bad_commit_id=bad.id)
            session.add(change)
            session.flush()
            ids[f"change:{name}"] = change.id  # type: ignore[assignment]
        return ids  # type: ignore[return-value]


def _ab(ids: dict[str, int], ratios: dict[str, float], attempt: int = 0, inconclusive: tuple[str, ...] = (),
        interactions: tuple[str, ...] = (), why: dict[str, str] | None = None) -> int:
    """A finished confirm A/B whose head/base medians are ``ratios``; beyond 1.1× is significant."""
    with session_scope() as session:
        repository = session.get(Repository, ids["repository"])
        assert repository is not None
        comparison = Comparison(
            repository_id=ids["repository"], base_commit_id=ids["good"], head_commit_id=ids["bad"],
            device_id=ids["device"], purpose="confirm", state="succeeded", finished_at=utcnow(),
            idempotency_key=comparison_key(repository, "a" * 40, "b" * 40, "cpu-0", "confirm", attempt))
        session.add(comparison)
        session.flush()
        for name, ratio in ratios.items():
            direction = "regression" if ratio > 1.1 else "improvement" if ratio < 1 / 1.1 else "none"
            direction = "inconclusive" if name in inconclusive else direction
            attribution = {"cause": "files", "why": (why or {})[name]} if name in (why or {}) else {}
            if name in interactions:
                direction, attribution = "interaction", {"cause": "identical", "why": "interaction: …",
                                                         "moved": direction}
            session.add(ComparisonResult(attribution=attribution,
                comparison_id=comparison.id, benchmark_id=ids[name], base_median=1.0, head_median=ratio,  # type: ignore[arg-type]
                change_pct=(ratio - 1) * 100, q_value=1e-4 if direction != "none" else 0.5,
                threshold_pct=5.0, direction=direction, reason=direction, base_values=[1.0] * 3,
                head_values=[ratio] * 3))
        return comparison.id  # type: ignore[return-value]


def _own_run(ids: dict[str, int], commit: str, medians: dict[str, float]) -> None:
    """A separate main-branch run of one of the two commits."""
    with session_scope() as session:
        run = Run(repository_id=ids["repository"], commit_id=ids[commit], device_id=ids["device"],
                  state="succeeded", idempotency_key=f"own:{commit}")
        session.add(run)
        session.flush()
        for name, median in medians.items():
            session.add(Measurement(run_id=run.id, benchmark_id=ids[name], samples=[median], median=median,  # type: ignore[arg-type]
                                    iqr=0.0, min=median, mean=median, n=1, cv=0.0))


def _changes() -> dict[tuple[str, str], str]:
    with session_scope() as session:
        rows = session.exec(select(Change, Benchmark.name).where(Change.benchmark_id == Benchmark.id)).all()
        return {(name, change.kind): change.phase for change, name in rows}


def test_each_candidate_is_decided_on_its_own_benchmark(pair: dict[str, int]) -> None:
    comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 1.0, "matmul": 1.0, "copy": 1.0})
    with session_scope() as session:
        confirmed = confirmation.apply(session, comparison)
    assert confirmed == [pair["change:rmsnorm"]]
    assert _changes() == {("rmsnorm", "perf-regression"): "confirmed", ("softmax", "perf-improvement"): "rejected"}


@pytest.mark.parametrize(("own_runs", "phase"), [
    ({"good": 1.0, "bad": 0.2}, "confirmed"),  # its own runs moved the same way: two sightings agree
    ({"good": 1.0, "bad": 1.0}, "rejected"),   # its own runs did not move
    (None, "rejected"),                        # never measured apart from the A/B
])
def test_a_benchmark_nobody_asked_about_needs_its_own_runs_to_agree(
        pair: dict[str, int], own_runs: dict[str, float] | None, phase: str) -> None:
    if own_runs is not None:
        _own_run(pair, "good", {"matmul": own_runs["good"]})
        _own_run(pair, "bad", {"matmul": own_runs["bad"]})
    comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 0.5, "matmul": 0.2, "copy": 1.0})
    with session_scope() as session:
        confirmation.apply(session, comparison)
    assert _changes()[("matmul", "perf-improvement")] == phase
    assert _changes()[("rmsnorm", "perf-regression")] == "confirmed"


def test_one_side_moved_by_a_common_factor_is_the_machine_and_is_measured_again(pair: dict[str, int]) -> None:
    comparison = _ab(pair, dict.fromkeys(NAMES, 1.5))
    with session_scope() as session:
        assert confirmation.apply(session, comparison) == []
        device = session.get(Device, pair["device"])
        assert device is not None and device.environment_shifts == 1
        again = confirmation.pending(session, pair["repository"])
    assert [(c.good_sha[0], c.bad_sha[0], c.attempt) for c in again] == [("a", "b", 1)]
    assert set(_changes().values()) == {"confirming"}  # nothing decided on a shifted machine

    # Measured again on a quiet machine: only the real step remains.
    comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 1.0, "matmul": 1.0, "copy": 1.0}, attempt=1)
    with session_scope() as session:
        confirmation.apply(session, comparison)
    assert _changes() == {("rmsnorm", "perf-regression"): "confirmed", ("softmax", "perf-improvement"): "rejected"}


def test_the_same_shift_twice_in_fresh_processes_is_the_code(pair: dict[str, int]) -> None:
    for attempt in (0, 1):
        comparison = _ab(pair, dict.fromkeys(NAMES, 1.5), attempt=attempt)
        with session_scope() as session:
            confirmation.apply(session, comparison)
    assert _changes()[("rmsnorm", "perf-regression")] == "confirmed"
    with session_scope() as session:
        device = session.get(Device, pair["device"])
        assert device is not None and device.environment_shifts == 1


def test_an_inconclusive_result_is_measured_again_and_rejected_only_after_the_last_attempt(pair: dict[str, int]) -> None:
    """Rounds that errored leave too few pairs: that is no evidence against the step."""
    for attempt in range(confirmation.MAX_ATTEMPTS):
        comparison = _ab(pair, {"rmsnorm": 1.0, "softmax": 0.5, "matmul": 1.0, "copy": 1.0}, attempt=attempt,
                         inconclusive=("rmsnorm",))
        with session_scope() as session:
            confirmation.apply(session, comparison)
            again = confirmation.pending(session, pair["repository"])
        if attempt + 1 < confirmation.MAX_ATTEMPTS:
            assert _changes()[("rmsnorm", "perf-regression")] == "confirming"
            assert [c.attempt for c in again] == [attempt + 1]
    assert _changes() == {("rmsnorm", "perf-regression"): "rejected", ("softmax", "perf-improvement"): "confirmed"}


def test_a_move_of_identical_code_is_never_confirmed_and_a_confirmed_one_says_why(pair: dict[str, int]) -> None:
    """The confirming A/B found softmax 2× faster, but nothing it runs changed: an interaction, not its improvement."""
    comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 0.5, "matmul": 1.0, "copy": 1.0}, interactions=("softmax",),
                     why={"rmsnorm": "imported file changed: kernels/rmsnorm.py"})
    with session_scope() as session:
        assert confirmation.apply(session, comparison) == [pair["change:rmsnorm"]]
        rmsnorm = session.get(Change, pair["change:rmsnorm"])
        softmax = session.get(Change, pair["change:softmax"])
        assert rmsnorm is not None and softmax is not None
        assert rmsnorm.details["why"] == "imported file changed: kernels/rmsnorm.py"
        assert rmsnorm.details["attribution"] == {"cause": "files"}
        assert softmax.phase == "rejected" and softmax.details["rejected"] == "interaction"
        # What `roofwatch regressions --format json` and /api/changes list: the confirmed change, with its why.
        from roofwatch.service.records.queries import change_rows

        listed = change_rows(session, pair["repository"])
        assert [(row["kind"], row["why"]) for row in listed] == [
            ("perf-regression", "imported file changed: kernels/rmsnorm.py")]
    assert ("softmax", "perf-improvement") in _changes() and _changes()[("softmax", "perf-improvement")] == "rejected"


def _candidate(ids: dict[str, int], name: str) -> None:
    """A slowdown of ``name`` raised at the pair after its A/B (a later run saw it)."""
    with session_scope() as session:
        session.add(Change(repository_id=ids["repository"], benchmark_id=ids[name], kind="perf-regression",
                           phase="confirming", device_id=ids["device"], range_start_sha="a" * 40,
                           range_end_sha="b" * 40, range_start_position=4, range_end_position=5,
                           first_bad_commit_id=ids["bad"]))


def test_a_candidate_raised_after_its_pairs_ab_is_measured_not_rejected_unseen(pair: dict[str, int]) -> None:
    comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 1.0})
    with session_scope() as session:
        confirmation.apply(session, comparison)
    _candidate(pair, "matmul")
    with session_scope() as session:
        again = confirmation.pending(session, pair["repository"])
        assert [(c.good_sha[0], c.bad_sha[0], c.attempt) for c in again] == [("a", "b", 1)]
        assert confirmation.candidate_keys(session, again[0]) == ("benchmarks::matmul",)
    assert _changes()[("matmul", "perf-regression")] == "confirming"

    comparison = _ab(pair, {"matmul": 2.0}, attempt=1)
    with session_scope() as session:
        assert confirmation.apply(session, comparison)
    assert _changes() == {("rmsnorm", "perf-regression"): "confirmed", ("softmax", "perf-improvement"): "rejected",
                          ("matmul", "perf-regression"): "confirmed"}


def test_after_the_last_ab_of_a_pair_an_unmeasured_candidate_is_rejected_with_the_reason(pair: dict[str, int]) -> None:
    for attempt in range(confirmation.MAX_ATTEMPTS):
        comparison = _ab(pair, {"rmsnorm": 2.0, "softmax": 1.0}, attempt=attempt)
        with session_scope() as session:
            confirmation.apply(session, comparison)
    _candidate(pair, "copy")
    with session_scope() as session:
        assert confirmation.pending(session, pair["repository"]) == []
        change = session.exec(select(Change).where(Change.benchmark_id == pair["copy"])).one()
        assert change.phase == "rejected" and change.details["rejected"] == "not measured by the A/B"
