"""``roofwatch compare BASE HEAD``: an interleaved A/B of two commits on this machine's device."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from roofwatch.common.redaction import redact
from roofwatch.common.task_names import queue_name
from roofwatch.service.cli.consoles import inert
from roofwatch.service.cli.progress import describe
from roofwatch.service.cli.run import one_off_suites
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import RoofwatchError
from roofwatch.service.core.keys import comparison_key, comparison_key_prefix, next_attempt
from roofwatch.service.core.links import compare_url
from roofwatch.service.core.models import Comparison, Repository
from roofwatch.service.core.reports import BenchmarkVerdictRow, ComparisonReport
from roofwatch.service.core.units import seconds
from roofwatch.service.flows import ab
from roofwatch.service.records.comparisons import comparison_report
from roofwatch.service.records.repositories import mirror_and_source, resolve_repository
from roofwatch.service.records.runs import upsert_commit
from roofwatch.workers import checkout
from roofwatch.workers.activity import Activity, local_activity
from roofwatch.workers.device import probe

# Exit codes: a CI step can gate on them.
EXIT = {"no-change": 0, "improvement": 0, "regression": 1, "failure": 1, "inconclusive": 3, "errored": 2}


@dataclass
class CompareRequest:
    repo: str
    base: str
    head: str
    min_rounds: int | None = None
    max_rounds: int | None = None
    wait: bool = True
    suites_file: Path | None = None  # one-off suites (TOML), not stored, as for `run`
    suites_from: str | None = None


def execute(request: CompareRequest, console: Console) -> tuple[int, ComparisonReport | None]:
    """Run the comparison; (exit code, report or None when nothing was compared)."""

    settings = get_settings()
    try:
        with session_scope() as session:
            repository = resolve_repository(session, request.repo)
        mirror, source = mirror_and_source(repository, settings.mirrors_dir)
        base_sha, head_sha = checkout.resolve(source, request.base), checkout.resolve(source, request.head)
        infos = [checkout.commit_info(mirror, sha) for sha in (base_sha, head_sha)]
        one_off = one_off_suites(request.suites_file, request.suites_from, source)
    except (RoofwatchError, OSError) as exc:
        console.print(f"[bold red]error:[/] {inert(redact(str(exc)))}")
        return 2, None

    device = probe()
    with session_scope() as session:
        repo_row = session.get(Repository, repository.id)
        assert repo_row is not None
        base, head = (upsert_commit(session, repo_row, info) for info in infos)
        attempt = next_attempt(session, Comparison, comparison_key_prefix(
            repo_row, base.sha, head.sha, device.fingerprint, "manual"))
        key = comparison_key(repo_row, base.sha, head.sha, device.fingerprint, "manual", attempt)
        # The revision asked for as the base, so the dashboard's rendering of the PR comment names it.
        _, job = ab.prepare(session, repo_row, base, head, key, purpose="manual", details={"base_ref": request.base},
                            max_rounds=request.max_rounds, min_rounds=request.min_rounds)
        job = replace(job, **one_off)

    queue = queue_name(device.device_class)
    mode = "in-process" if settings.embedded else f"queue {queue}"
    console.print(f"[bold]{inert(repository.full_name)}[/] {base_sha[:12]} (base) vs {head_sha[:12]} (head) on "
                  f"{inert(device.device_class)}, {job.min_rounds}–{job.max_rounds} interleaved rounds ({mode})")
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task("starting", total=None)

        def show(activity: Activity) -> None:
            bar.update(task, description=describe(replace(activity, suite=inert(activity.suite)), "compare"))

        token = local_activity.set(show)
        try:
            result = ab.start(job, device.device_class)
        finally:
            local_activity.reset(token)
        if not settings.embedded and not request.wait:
            console.print(f"enqueued comparison {job.comparison_id}")
            return 0, None
        result.get(propagate=False)
    with session_scope() as session:
        data = comparison_report(session, job.comparison_id)
    if data.get("state") == "failed":  # a suite did not finish: the verdict rests on what did, so it fails
        return 1, data
    return EXIT.get(data["verdict"], 2), data


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None or (isinstance(value, float) and math.isinf(value)) else format(value, spec)


def _value(row: BenchmarkVerdictRow, key: Literal["base_median", "head_median"]) -> str:
    """A median in the unit that reads best ("4.19 ms"), or with the benchmark's own unit."""
    value = row.get(key)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return seconds(value) if row.get("unit", "s") == "s" else f"{value:.4g} {escape(str(row.get('unit') or ''))}".strip()


STYLE = {"regression": "red", "improvement": "green", "inconclusive": "yellow", "none": "dim"}


def render(console: Console, data: ComparisonReport) -> None:
    table = Table("benchmark", "base", "head", "Δ time %", "interval", "noise", "detects", "counts from", "verdict")
    for row in data["benchmarks"]:
        style = STYLE.get(row["direction"], "")
        table.add_row(  # parametrized names ("test_matmul[naive]") are text, not Rich markup
            escape(row["benchmark"]), _value(row, "base_median"), _value(row, "head_median"),
            _fmt(row["change_pct"], "+.2f"), f"[{_fmt(row['ci_low'], '+.1f')}, {_fmt(row['ci_high'], '+.1f')}]",
            "±" + _fmt(row.get("noise_pct"), ".1f") + "%", "±" + _fmt(row.get("mde_pct"), ".1f") + "%",
            "±" + _fmt(row["threshold_pct"], ".1f") + "%",
            f"[{style}]{row['direction']}[/]",
        )
    console.print(table)
    for row in data["benchmarks"]:
        if row["direction"] == "inconclusive":
            console.print(f"[yellow]inconclusive[/] {escape(row['benchmark'])}: {escape(str(row.get('reason', '')))}")
    for failure in data["new_failures"]:
        first_line = (failure["message"].strip().splitlines() or [""])[0]
        console.print(f"[bold red]new failure[/] {escape(failure['suite'])}::{escape(failure['test_id'])}: "
                      f"{escape(first_line)}")
    if data["error"]:
        console.print(f"[dim]{escape(data['error'])}[/]")
    if data.get("suites_source"):
        console.print(f"[dim]suites: {escape(data['suites_source'])}[/]")
    mde = _fmt(data["mde_pct"], ".1f")
    spent = data.get("spent_s")
    budget = data.get("budget_s")
    used = f" in {spent:.0f} s" + (f" of a {budget:.0f} s budget" if budget else "") if spent is not None else ""
    driver = data.get("mde_benchmark")
    console.print(f"verdict: [bold]{data['verdict']}[/] after {data['rounds']} round(s){used}"
                  + (f"; smallest detectable change ±{mde}%" if mde else "")
                  + (f" (set by the noisiest, {escape(driver)})" if mde and driver and len(data["benchmarks"]) > 1 else ""))
    if (comparison_id := data.get("id")) is not None:
        console.print(f"dashboard: {compare_url(comparison_id)}", highlight=False)
