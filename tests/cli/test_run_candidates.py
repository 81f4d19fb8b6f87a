"""`roofwatch run` measures each commit in one process: a step it sees is a candidate, never "slower" or
"faster", until an A/B confirms it. The summary shows candidates as such, with what decides them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from roofwatch.git.checkout import CommitInfo
from roofwatch.service.cli.run import _summary
from roofwatch.service.core.db import migrate, session_scope
from roofwatch.service.core.models import Benchmark, Change, Commit, Device, Repository, Run
from roofwatch.service.flows import manual

GOOD, BAD = "a" * 40, "b" * 40


def _history(phases: dict[str, tuple[str, str]]) -> tuple[int, list[CommitInfo]]:
    """Two measured commits; the second's run detected one change per benchmark: name → (kind, phase)."""
    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels_r", clone_url="/nowhere")
        device = Device(fingerprint="cpu-0", device_class="cpu")
        session.add_all([repository, device])
        session.flush()
        commits = [Commit(repository_id=repository.id, sha=sha, position=i + 1)  # type: ignore[arg-type]
                   for i, sha in enumerate((GOOD, BAD))]
        session.add_all(commits)
        session.flush()
        runs = [Run(repository_id=repository.id, commit_id=c.id, trigger="manual", state="succeeded",  # type: ignore[arg-type]
                    idempotency_key=f"run-{c.sha[:4]}", device_id=device.id, analysis_state="done")
                for c in commits]
        session.add_all(runs)
        session.flush()
        for name, (kind, phase) in phases.items():
            benchmark = Benchmark(fingerprint=name, repository_id=repository.id, suite="benchmarks",  # type: ignore[arg-type]
                                  name=name, device_class="cpu")
            session.add(benchmark)
            session.flush()
            session.add(Change(
                repository_id=repository.id, benchmark_id=benchmark.id, kind=kind, phase=phase,  # type: ignore[arg-type]
                device_id=device.id, range_start_sha=GOOD, range_end_sha=BAD, range_start_position=1,
                range_end_position=2, detected_run_id=runs[1].id, suite="benchmarks",
                details={"before": 1.0e-3, "after": 1.25e-3, "shift": 0.25,
                         **({"rejected": "the interval [-8.1, +31.0] reaches beyond ±2%"} if phase == "rejected" else {})}))
        assert repository.id is not None
        return repository.id, [CommitInfo(sha=c.sha, parents=[], author="", message=f"commit {c.sha[:4]}",
                                          committed_at=None, position=c.position) for c in commits]  # type: ignore[arg-type]


def test_an_unconfirmed_step_is_a_candidate_and_names_no_direction(roofwatch_env: Path) -> None:
    repository_id, infos = _history({"test_waiting": ("perf-regression", "confirming"),
                                     "test_rejected": ("perf-improvement", "rejected"),
                                     "test_confirmed": ("perf-regression", "confirmed")})
    rows = manual.newest_runs(repository_id, infos)
    assert rows[0]["changes"] == [] and rows[0]["candidates"] == []
    assert rows[1]["changes"] == ["perf-regression"]  # the confirmed one only
    candidates = {c["benchmark"]: c for c in rows[1]["candidates"]}  # type: ignore[attr-defined]
    assert set(candidates) == {"test_waiting", "test_rejected"}
    assert candidates["test_waiting"]["step_pct"] == 25.0 and candidates["test_waiting"]["phase"] == "confirming"

    console = Console(record=True, width=300)
    _summary(console, rows)
    out = console.export_text()
    assert (f"{BAD[:12]} candidate step +25.0 % in benchmarks::test_waiting ({GOOD[:12]}..{BAD[:12]}), waiting "
            f"for its A/B; roofwatch compare {GOOD[:12]} {BAD[:12]} decides it") in out
    assert ("candidate step +25.0 % in benchmarks::test_rejected" in out
            and "not confirmed by its A/B: the interval [-8.1, +31.0] reaches beyond ±2%" in out)
    # nothing under the table calls an unconfirmed step a direction
    lines = [line for line in out.splitlines() if line.startswith(f"{BAD[:12]} candidate")]
    assert len(lines) == 2
    assert not any(word in line for line in lines for word in ("slower", "faster", "regression", "improvement"))
    header = next(line for line in out.splitlines() if "commit" in line and "state" in line)
    assert "candidates" in header
