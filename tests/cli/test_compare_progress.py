"""A ``roofwatch compare`` whose output goes to a pipe says what it measures while it measures, and
the API's comparison moves with it: running from round one, its rounds counted round by round.

The CLI runs in a subprocess with stdout a pipe (as in CI, or ``| tee``), embedded (no broker); the
test reads its lines as they come and, at each one that starts a suite, asks the JSON API — an app
of its own over the same database — where the comparison stands.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.environment import _reset_caches
from support.tests_support import ROOFWATCH, child_env

from roofwatch.ab.abtest import CONFIDENCE
from roofwatch.service.core.units import level_text

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ROUNDS = 4
LINE = re.compile(r"^\[[^\]]+\] compare [0-9a-f]{7}\.\.[0-9a-f]{7} · round (\d+)/(\d+)( · \d+ open[^·]*)? · "
                  r"(base|head) (\S+): (\S+)$")


def test_a_piped_compare_prints_each_round_and_the_api_follows_it(
        sample_history: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = sample_history
    data = tmp_path / "data"
    # The API's app, over the database the CLI will use: made (and migrated) first, so that asking it
    # costs milliseconds while the comparison runs.
    monkeypatch.setenv("ROOFWATCH_DATA_DIR", str(data))
    monkeypatch.delenv("ROOFWATCH_DATABASE_URL", raising=False)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate

    migrate()
    client = TestClient(create_app())
    assert client.get("/api/repositories").json() == []
    env = child_env({"ROOFWATCH_DATA_DIR": str(data), "ROOFWATCH_CALIBRATE": "0"})
    env.pop("COLUMNS", None)
    process = subprocess.Popen(
        [str(ROOFWATCH), "compare", shas["good"], shas["fixed"], "--repo", str(repo),
         "--min-rounds", str(ROUNDS), "--max-rounds", str(ROUNDS)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    lines: list[str] = []
    seen: list[tuple[int, str, str, int]] = []  # (round, "side suite", the API's state, its rounds)
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            found = LINE.match(lines[-1])
            if found is None or found.group(6) != "running":
                continue
            comparison = client.get("/api/comparisons/1").json()["comparison"]
            seen.append((int(found.group(1)), f"{found.group(4)} {found.group(5)}", comparison["state"],
                         comparison["rounds"]))
        assert process.wait(timeout=600) in (0, 3), "\n".join(lines)
    finally:
        if process.poll() is None:
            process.kill()
        _reset_caches()
    output = "\n".join(lines)

    # Progress lines, round by round, before the verdict: both sides of each round. Nothing is decided before
    # three rounds, so rounds 1-3 measure everything; the fourth measures what is still open, if anything.
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("verdict:"))
    progress = [i for i, line in enumerate(lines) if LINE.match(line)]
    assert progress and max(progress) < verdict_at, output
    assert {1, 2, 3} <= {r for r, *_ in seen} <= set(range(1, ROUNDS + 1)), output
    for round_ in (1, 2, 3):
        assert {what for r, what, *_ in seen if r == round_} >= {"base benchmarks", "head benchmarks"}, output
    assert {what for r, what, *_ in seen if r == 1} >= {"base correctness", "head correctness"}, output
    # After round one, the lines say how many benchmarks are still open.
    assert any(re.search(rf"round 2/{ROUNDS} · 2 open", line) for line in lines), output

    # While round N runs the API says "running" and N-1 rounds done (N once that round has just finished);
    # round one included: no longer "queued, rounds: 0" until the first round is over.
    for round_, what, state, rounds in seen:
        finished = state in ("succeeded", "failed") and rounds == ROUNDS == round_
        assert (state == "running" and rounds in (round_ - 1, round_)) or finished, (round_, what, state, rounds)
    assert ("running", 0) in {(state, rounds) for r, _, state, rounds in seen if r == 1}

    # The table names the level the verdicts were decided at, taken from the one constant.
    assert f"{level_text(CONFIDENCE)} interval" in output and "95 %" not in output
