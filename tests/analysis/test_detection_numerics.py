"""Numerics drift (``flows.detection``): each stored error metric of a passing case is tracked.

Two measured commits on the branch, on one device, in a real (SQLite) database migrated by
Alembic: a case whose share of elements beyond half an ulp grew from 0 to 30 % is a
``numerics-drift`` change on that metric, though its largest errors stayed put; a case whose
share moved by a few percent is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, select

from roofwatch.common.envelope import OutcomeRecord
from roofwatch.service.core.db import make_engine, migrate
from roofwatch.service.core.models import Change, Commit, Device, Repository, Run, TestOutcome
from roofwatch.service.flows.detection import NUMERICS_METRICS, analyze_run

# (max_abs_err, max_rel_err, beyond_half_ulp) per commit.
CASES = {
    "test_softmax[3x1000-fp16-randn-seed0]": [(2e-4, 4e-4, 0.0), (2e-4, 4e-4, 0.30)],
    "test_rmsnorm[7x1000-bf16-randn-seed0]": [(3e-3, 5e-3, 0.48), (3e-3, 5e-3, 0.51)],
}


def test_every_stored_error_metric_is_tracked() -> None:
    stored = {name for name in OutcomeRecord.model_fields if name.startswith(("max_", "beyond_"))}
    assert set(NUMERICS_METRICS) == stored


@pytest.fixture
def session(tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'roofwatch.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        yield session
    engine.dispose()


def test_a_growing_share_beyond_half_an_ulp_is_numerics_drift(session: Session) -> None:
    repo = Repository(full_name="acme/kernels", clone_url="/dev/null")
    device = Device(fingerprint="h100", device_class="NVIDIA H100 80GB HBM3")
    session.add_all([repo, device])
    session.flush()
    runs = []
    for position, sha in enumerate(("a" * 40, "b" * 40)):
        commit = Commit(repository_id=repo.id, sha=sha, parents=["a" * 40] if position else [], position=position)
        session.add(commit)
        session.flush()
        run = Run(repository_id=repo.id, commit_id=commit.id, trigger="push", device_id=device.id,
                  state="succeeded", idempotency_key=f"{sha}:push")
        session.add(run)
        session.flush()
        for test_id, errors in CASES.items():
            max_abs, max_rel, share = errors[position]
            session.add(TestOutcome(run_id=run.id, suite="correctness", test_id=test_id, outcome="passed",
                                    max_abs_err=max_abs, max_rel_err=max_rel, beyond_half_ulp=share))
        runs.append(run)
    session.flush()

    summary = analyze_run(session, runs[1].id, commits_between=lambda good, bad: [bad])  # type: ignore[arg-type]

    drifts = session.exec(select(Change).where(Change.kind == "numerics-drift")).all()
    assert [(c.test_id, c.details["metric"], c.details["before"], c.details["after"]) for c in drifts] == [
        ("test_softmax[3x1000-fp16-randn-seed0]", "beyond_half_ulp", 0.0, 0.30)]
    assert summary.changes == [drifts[0].id]
