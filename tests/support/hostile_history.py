"""A small history whose every suite-controlled string is markup: for the dashboard's escaping and CSP tests.

Benchmark names, dtypes, shapes, impls, suite names, test ids, error messages, commit titles and
authors, compiled kernels' specializations and targets: each one a payload that would become a
link, an image, a script or a blanked page if any layer let it through as markup.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlmodel import Session

from roofwatch.service.core.db import make_engine, migrate
from roofwatch.service.core.models import (
    Benchmark,
    Change,
    Commit,
    Comparison,
    ComparisonResult,
    CompiledArtifact,
    Device,
    Measurement,
    Repository,
    Run,
    TestOutcome,
)
from roofwatch.service.records import latest

DEVICE = "NVIDIA H200"
LINK = '<a href="https://evil.example/">dtype</a>'
# Each closes or comments out a script element, or is an element with a handler, in HTML.
NAMES = {
    "comment": "b2<!--<script>",
    "close": "k</script><script>alert(1)</script>",
    "image": "<img src=x onerror=alert(1)>",
}
SHAPE = "<svg onload=alert(2)>"
IMPL = "<b>impl</b>"
SUITE = "suite<!--"
TEST_ID = "test_x[<iframe src=https://evil.example/>]"
MESSAGE = "AssertionError: </pre><script>alert(3)</script>"
TITLE = 'fix <a href="https://evil.example/">this</a> & that\u2028line'
AUTHOR = "Mallory <mallory@evil.example>"
SPECIALIZATION = '<span style="font-size:80px">BLOCK=64</span>'
KERNEL = "kernels.evil.<b>kernel</b>"
# Strings that must never reach a page's HTML or a figure as they are (the payloads' active parts).
RAW_MARKUP = ("<a href", "<img", "<script", "<!--", "<svg", "<iframe", "<span style", "</pre>", "<b>impl", "<b>kernel")
PUSHES = 4


def _add(session: Session, row: Any) -> Any:
    session.add(row)
    session.flush()
    return row


def _history(session: Session) -> dict[str, Any]:
    repo = _add(session, Repository(full_name="acme/hostile", clone_url="/dev/null"))
    device = _add(session, Device(fingerprint="h200", device_class=DEVICE, hostname="gpu-box-1",
                                  peak_bandwidth=4.0e12, peak_flops={"fp32": 50e12, "bf16": 700e12},
                                  peaks_source="measured"))
    benchmarks = {
        key: _add(session, Benchmark(fingerprint=f"fp-{key}", repository_id=repo.id, suite=SUITE, name=name,
                                     dtype=LINK, shape=SHAPE, impl=IMPL if key == "image" else "",
                                     device_class=DEVICE, flops=2e9 * (i + 1), bytes=1e8))
        for i, (key, name) in enumerate(NAMES.items())
    }
    start = datetime(2026, 1, 1, tzinfo=UTC)
    runs = []
    for i in range(PUSHES):
        commit = _add(session, Commit(repository_id=repo.id, sha=f"{i + 10:x}" * 40, message=f"{TITLE} {i}\n\nbody",
                                      author=AUTHOR, committed_at=start + timedelta(hours=i), position=i))
        run = _add(session, Run(repository_id=repo.id, commit_id=commit.id, trigger="push", device_id=device.id,
                                state="succeeded", idempotency_key=f"push-{i}", error=MESSAGE if i == 1 else ""))
        runs.append(run)
        for j, benchmark in enumerate(benchmarks.values()):
            median = (100e-6 if i < 2 else 130e-6) * (j + 1)
            _add(session, Measurement(run_id=run.id, benchmark_id=benchmark.id, samples=[median] * 3, median=median,
                                      iqr=0.0, min=median, mean=median, n=3, cv=0.0,
                                      achieved_flops=benchmark.flops / median, roofline_fraction=0.5))
        _add(session, TestOutcome(run_id=run.id, suite=SUITE, test_id=TEST_ID, outcome="failed", message=MESSAGE))
        _add(session, CompiledArtifact(run_id=run.id, suite=SUITE, kernel=KERNEL, specialization=SPECIALIZATION,
                                       target="sm_90<b>", status="compiled", registers=64 + 8 * (i // 2),
                                       spill_bytes=0, shared_bytes=1024, sass_instructions=500 + i,
                                       instructions={"<b>HMMA</b>": 10}, sass_hash=f"{i:x}" * 16,
                                       toolchain="triton <3.1>"))
    first = next(iter(benchmarks.values()))
    _add(session, Change(phase="confirmed", repository_id=repo.id, benchmark_id=first.id, suite=SUITE,
                         kind="perf-regression", first_bad_commit_id=runs[2].commit_id, change_pct=30.0,
                         ci_low=25.0, ci_high=35.0, p_value=0.001, detected_run_id=runs[2].id,
                         details={"triage": [{"from": "new", "to": "acknowledged", "note": MESSAGE, "by": AUTHOR,
                                              "at": "2026-01-02T10:00:00+00:00"}]}))
    _add(session, Change(phase="confirmed", repository_id=repo.id, suite=SUITE, test_id=TEST_ID,
                         kind="correctness-failure", first_bad_commit_id=runs[1].commit_id))
    comparison = _add(session, Comparison(repository_id=repo.id, base_commit_id=runs[1].commit_id,
                                          head_commit_id=runs[2].commit_id, device_id=device.id, state="succeeded",
                                          verdict="regression", rounds=5, idempotency_key="ab-hostile",
                                          error=MESSAGE))
    for j, benchmark in enumerate(benchmarks.values()):
        base = [v * 1e-6 * (j + 1) for v in (100, 101, 99, 100, 102)]
        head = [v * 1.3 for v in base]
        _add(session, ComparisonResult(comparison_id=comparison.id, benchmark_id=benchmark.id, base_values=base,
                                       head_values=head, base_median=base[0], head_median=head[0],
                                       direction="regression", change_pct=30.0, ci_low=25.0, ci_high=35.0,
                                       reason=MESSAGE))
    latest.rebuild(session)  # what ingest keeps as it stores runs, for rows added through the ORM
    return {"repository": repo.id, "runs": [r.id for r in runs], "comparison": comparison.id,
            "benchmarks": {key: b.id for key, b in benchmarks.items()}}


def build(url: str) -> dict[str, Any]:
    """Migrate the database at ``url`` and write the history; the ids pages are reached by."""
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        ids = _history(session)
        session.commit()
    engine.dispose()
    return ids
