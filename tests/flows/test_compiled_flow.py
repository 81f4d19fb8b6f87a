"""Compiled artifacts through the whole flow: `roofwatch run` on a Triton repository stores them,
`roofwatch artifacts` lists them, a kernel that stops compiling is a change with the compiler's
reason, the PR comment shows what a bigger tile did, and a timing move on identical binaries is
held back. Real compiles for sm_90 on this CPU-only machine, PostgreSQL, the real console script.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select
from support.environment import _reset_caches, engine_for
from support.tests_support import roofwatch
from support.triton_repo import build_history

from roofwatch.common.envelope import CompiledArtifactRecord, RoundRecord, SuiteResult
from roofwatch.service.analysis import lifecycle
from roofwatch.service.core.models import Benchmark, Change, Commit, Comparison, ComparisonResult, Device, Repository
from roofwatch.service.flows import confirmation
from roofwatch.service.github.comment import ReportContext, render_comment
from roofwatch.service.records import compiled_artifacts

GOLDEN = Path(__file__).parents[1] / "support" / "golden" / "pr_comment" / "compiled_changed.md"
UPDATE = os.environ.get("ROOFWATCH_UPDATE_GOLDEN") == "1"
# The golden comment holds real register and shared-memory numbers: they are this toolchain's.
GOLDEN_TOOLCHAIN = "triton 3.9.0, ptxas 12.9.86"


@pytest.fixture(scope="module")
def stored(postgres_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], dict[str, str]]:
    root = tmp_path_factory.mktemp("compiled-flow")
    repo = root / "tiles"
    shas = build_history(repo)
    env = {"ROOFWATCH_DATA_DIR": str(root / "data"), "ROOFWATCH_DATABASE_URL": postgres_url}
    roofwatch(["db", "upgrade"], env)
    done = roofwatch(["run", "--repo", str(repo), "--last", "4"], env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # the last commit's kernel no longer compiles
    return repo, shas, env


def artifacts(stored: tuple[Path, dict[str, str], dict[str, str]], name: str) -> dict[str, dict[str, Any]]:
    repo, shas, env = stored
    listing = json.loads(roofwatch(["artifacts", "--repo", str(repo), "--commit", shas[name][:10],
                                    "--format", "json"], env).stdout)
    return {row["kernel"].rsplit(".", 1)[-1]: row for row in listing}


def session_for(url: str) -> Session:
    return Session(engine_for(url))


def test_artifacts_lists_every_kernel_with_its_numbers(stored: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    rows = artifacts(stored, "base")
    assert set(rows) == {"_matmul_kernel", "_scale_kernel"}
    matmul = rows["_matmul_kernel"]
    assert matmul["commit"] == stored[1]["base"]
    assert {"kernel", "specialization", "target", "registers", "spill_bytes", "shared_bytes", "sass_hash",
            "instructions", "toolchain"} <= set(matmul)
    assert matmul["target"] == "sm_90" and matmul["registers"] > 0 and matmul["instructions"]["wgmma"] > 0


def test_comment_only_commit_keeps_every_hash(stored: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    base, comment = artifacts(stored, "base"), artifacts(stored, "comment")
    assert {k: r["sass_hash"] for k, r in base.items()} == {k: r["sass_hash"] for k, r in comment.items()}


def test_a_kernel_that_stops_compiling_is_a_change_with_the_reason(
        stored: tuple[Path, dict[str, str], dict[str, str]]) -> None:
    repo, shas, env = stored
    # This repository's changes only: under xdist a module's fixture can be made twice in one worker (its tests
    # interleaved with another module's), and the same history, stored again from a new path, has the same SHAs
    stored_changes = json.loads(roofwatch(["regressions", "--repo", str(repo), "--format", "json"], env).stdout)
    changes = [c for c in stored_changes if c["kind"] == "compiled-code" and c["commit"] == shas["too_big"]]
    [change] = changes
    assert change["benchmark"].startswith("tiles._matmul_kernel[bf16, BLOCK_M=128 BLOCK_N=128 BLOCK_K=64, w4 s3 → ")
    assert "out of resource: shared memory, Required: 525312, Hardware limit: 232448" in change["details"]["explanation"]
    # The neutral and the bigger-tile commits change nothing that matters before a timing.
    assert not [c for c in stored_changes
                if c["kind"] == "compiled-code" and c["commit"] in (shas["comment"], shas["bigger"])]


def test_pr_comment_shows_the_bigger_tile(stored: tuple[Path, dict[str, str], dict[str, str]],
                                          postgres_url: str) -> None:
    _, shas, _ = stored
    sides = {"base": artifacts(stored, "comment"), "head": artifacts(stored, "bigger")}
    assert sides["head"]["_matmul_kernel"]["toolchain"] == GOLDEN_TOOLCHAIN, "toolchain changed: regenerate the golden"
    rounds = [RoundRecord(side=side, index=0, suites=[SuiteResult(
        name="compiled", kind="compile", status="passed",
        artifacts=[CompiledArtifactRecord.model_validate(row) for row in rows.values()])])
        for side, rows in sides.items()]
    summary = compiled_artifacts.ab_summary(rounds)
    report = {"id": 7, "base": shas["comment"], "head": shas["bigger"], "state": "succeeded", "verdict": "no-change",
              "rounds": 5, "purpose": "pull_request", "device": "CPU", "error": "", "mde_pct": None,
              "new_failures": [], "fixed": [], "benchmarks": [], "compiled": summary}
    body = render_comment(report, ReportContext(repository="acme/tiles", pr_number=3, base_ref="main",
                                                dashboard_url="https://roofwatch.example.com/compare/acme/tiles/7"))
    assert "registers 72 → 205, shared 50176 B → 99328 B, wgmma 4 → 8" in body
    if UPDATE:
        GOLDEN.write_text(body)
    assert body == GOLDEN.read_text()


def _confirm(session: Session, repository: Repository, good: str, bad: str, change_pct: float) -> tuple[Comparison, Change]:
    """A finished confirmation A/B of ``good..bad`` that measured ``change_pct`` on test_matmul, and the
    candidate waiting for it."""
    commits = {c.sha: c for c in session.exec(select(Commit).where(Commit.repository_id == repository.id))}
    tag = f"compiled-flow-{bad[:8]}-{change_pct}"
    device = Device(device_class="NVIDIA H100", fingerprint=tag)
    benchmark = Benchmark(fingerprint=tag, repository_id=repository.id, suite="benchmarks",  # type: ignore[arg-type]
                          name="test_matmul", device_class="NVIDIA H100")
    session.add_all([device, benchmark])
    session.flush()
    comparison = Comparison(repository_id=repository.id, base_commit_id=commits[good].id,  # type: ignore[arg-type]
                            head_commit_id=commits[bad].id, device_id=device.id, purpose="confirm",  # type: ignore[arg-type]
                            state="succeeded", idempotency_key=tag, finished_at=datetime.now(UTC))
    change = Change(repository_id=repository.id, device_id=device.id, benchmark_id=benchmark.id,  # type: ignore[arg-type]
                    suite="benchmarks", kind="perf-regression", phase=lifecycle.CONFIRMING,
                    range_start_sha=good, range_end_sha=bad)
    session.add_all([comparison, change])
    session.flush()
    session.add(ComparisonResult(comparison_id=comparison.id, benchmark_id=benchmark.id,  # type: ignore[arg-type]
                                 base_values=[1.0] * 5, head_values=[1.0 + change_pct / 100] * 5,
                                 base_median=1.0, head_median=1.0 + change_pct / 100,
                                 change_pct=change_pct, threshold_pct=4.0, direction="regression", q_value=0.01))
    session.flush()
    return comparison, change


def test_a_noisy_timing_candidate_on_identical_binaries_is_held_back(
        stored: tuple[Path, dict[str, str], dict[str, str]], postgres_url: str) -> None:
    repo, shas, _ = stored
    with session_for(postgres_url) as session:
        repository = session.exec(select(Repository).where(Repository.clone_url == str(repo.resolve()))).one()
        comparison, noisy = _confirm(session, repository, shas["base"], shas["comment"], 5.0)
        assert confirmation.apply(session, comparison.id) == []  # type: ignore[arg-type]
        assert noisy.phase == lifecycle.REJECTED and noisy.details["held_back"] is True
        assert noisy.details["binary_identical"] is True
        assert "compiled code identical on both sides (sm_90)" in noisy.details["rejected"]
        assert "held back: 5.0 % < 8.0 %" in noisy.details["rejected"]

        comparison, large = _confirm(session, repository, shas["base"], shas["comment"], 12.0)
        assert confirmation.apply(session, comparison.id) == [large.id]  # type: ignore[arg-type]
        assert "reported anyway" in large.details["explanation"]

        comparison, real = _confirm(session, repository, shas["comment"], shas["bigger"], 5.0)
        assert confirmation.apply(session, comparison.id) == [real.id]  # type: ignore[arg-type]
        assert real.phase == lifecycle.CONFIRMED and real.details["binary_identical"] is False
        assert "registers 72 → 205" in real.details["explanation"]
        session.rollback()


def test_dashboard_shows_the_kernel_history_and_the_run(stored: tuple[Path, dict[str, str], dict[str, str]],
                                                        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas, env = stored
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _reset_caches()
    from roofwatch.service.api.app import create_app

    client = TestClient(create_app())
    with session_for(postgres_url) as session:
        repository = session.exec(select(Repository).where(Repository.clone_url == str(repo.resolve()))).one()
    listing = client.get(f"/compiled/{repository.id}")
    assert listing.status_code == 200
    assert "out of resource: shared memory" in listing.text  # the newest commit's matmul no longer fits
    page = client.get(f"/compiled/{repository.id}/kernel", params={"name": "tiles._matmul_kernel"})
    assert page.status_code == 200
    history = page.text[page.text.index('id="compiled-history"'):]
    # Newest first: the failure, then the bigger tile (a changed binary, marked), then the two identical ones.
    assert history.count('class="changed"') == 2  # the bigger tile, and the tile that no longer compiles
    assert "<td>205</td><td>0</td><td>99328</td>" in history and "<td>72</td><td>0</td><td>50176</td>" in history
    assert client.get(f"/compiled/{repository.id}/kernel", params={"name": "nope"}).status_code == 404
    _reset_caches()
