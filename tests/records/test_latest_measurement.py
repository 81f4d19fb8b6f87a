"""latestmeasurement: kept at ingest, newest branch run wins, backfilled by its migration."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import text
from sqlmodel import Session, select

from roofwatch.common.envelope import DeviceInfo, Envelope
from roofwatch.service.core.db import downgrade, make_engine, migrate
from roofwatch.service.core.models import Commit, LatestMeasurement, Repository, Run
from roofwatch.service.records import latest
from roofwatch.service.records.ingest import ingest_envelope
from roofwatch.service.records.runs import create_run

DEVICE = DeviceInfo(device_class="NVIDIA H200", fingerprint="h200-latest")


def _record(name: str, median: float) -> dict[str, object]:
    return {"name": name, "samples": [median] * 3, "median": median, "iqr": median / 100, "min": median,
            "mean": median, "n": 3, "flops": 1e9, "bytes": 1e6}


def _envelope(run_id: int, key: str, sha: str, medians: dict[str, float]) -> Envelope:
    now = datetime.now(UTC)
    return Envelope(run_id=run_id, idempotency_key=key, repository="acme/latest", sha=sha, status="succeeded",
                    device=DEVICE, started_at=now, finished_at=now,
                    suites=[{"name": "benchmarks", "kind": "benchmark", "status": "passed",  # type: ignore[list-item]
                             "measurements": [_record(n, m) for n, m in medians.items()]}])


def _latest(session: Session, repository_id: int) -> dict[str, tuple[int, float]]:
    rows = session.execute(text("SELECT b.name, l.run_id, l.median FROM latestmeasurement l "
                                "JOIN benchmark b ON b.id = l.benchmark_id WHERE b.repository_id = :r"),
                           {"r": repository_id})
    return {name: (run_id, median) for name, run_id, median in rows}


def _history(session: Session) -> dict[str, int]:
    """A repository with four runs, created in order; the last two never speak for the branch."""
    repository = Repository(full_name=f"acme/latest-{uuid.uuid4().hex[:8]}", clone_url="/nowhere")
    session.add(repository)
    session.flush()
    runs: dict[str, int] = {"repository": repository.id}  # type: ignore[dict-item]
    for i, trigger in enumerate(("push", "push", "pull_request", "bisect")):
        sha = f"{i + 1}" * 40
        commit = Commit(repository_id=repository.id, sha=sha, position=i + 1)  # type: ignore[arg-type]
        session.add(commit)
        session.flush()
        run = create_run(session, repository, commit, f"latest-{uuid.uuid4().hex}", trigger=trigger)
        runs[trigger if trigger != "push" else f"push{i}"] = run.id  # type: ignore[assignment]
    return runs


def _ingest(session: Session, run_id: int, medians: dict[str, float]) -> None:
    run = session.get(Run, run_id)
    assert run is not None
    commit = session.get(Commit, run.commit_id)
    assert commit is not None
    ingest_envelope(session, _envelope(run_id, run.idempotency_key, commit.sha, medians))


def test_ingest_keeps_the_newest_branch_run_of_each_series(database_url: str) -> None:
    migrate(database_url)
    engine = make_engine(database_url)
    with Session(engine) as session:
        runs = _history(session)
        # The newer push arrives first (another GPU finished sooner); the older one must not replace it.
        _ingest(session, runs["push1"], {"test_a": 2.0, "test_b": 4.0})
        _ingest(session, runs["push0"], {"test_a": 1.0, "test_c": 3.0})
        # A pull request's head and a bisection of an old commit are newer runs, and never "latest".
        _ingest(session, runs["pull_request"], {"test_a": 9.0})
        _ingest(session, runs["bisect"], {"test_b": 9.0, "test_d": 9.0})
        kept = _latest(session, runs["repository"])
        assert kept == {"test_a": (runs["push1"], 2.0), "test_b": (runs["push1"], 4.0),
                        "test_c": (runs["push0"], 3.0)}
        # Recomputing from the measurements gives what ingest kept.
        latest.rebuild(session)
        assert _latest(session, runs["repository"]) == kept
        session.commit()
    engine.dispose()


def test_the_migration_backfills_what_ingest_would_have_kept(database_url: str) -> None:
    migrate(database_url)
    engine = make_engine(database_url)
    with Session(engine) as session:
        runs = _history(session)
        _ingest(session, runs["push0"], {"test_a": 1.0})
        _ingest(session, runs["push1"], {"test_a": 2.0, "test_b": 4.0})
        _ingest(session, runs["bisect"], {"test_a": 9.0})
        session.commit()
        kept = _latest(session, runs["repository"])
    engine.dispose()
    downgrade(database_url, "0011")
    migrate(database_url)
    engine = make_engine(database_url)
    with Session(engine) as session:
        assert _latest(session, runs["repository"]) == kept == {"test_a": (runs["push1"], 2.0), "test_b": (runs["push1"], 4.0)}
        assert session.exec(select(LatestMeasurement)).all()  # the model reads the migrated table
    engine.dispose()
