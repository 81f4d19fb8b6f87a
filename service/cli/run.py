"""``roofwatch run``: pick the commits, skip what is measured, submit, show progress, summarise."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text
from sqlmodel import select

from roofwatch.common.errors import CheckoutError, SuiteConfigError
from roofwatch.common.redaction import redact
from roofwatch.common.task_names import queue_name
from roofwatch.service.cli.consoles import inert
from roofwatch.service.cli.progress import Purposes, describe
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import RoofwatchError
from roofwatch.service.core.links import dashboard_url
from roofwatch.service.core.models import Change, Measurement, Run, SuiteExecution, TestOutcome
from roofwatch.service.flows import manual
from roofwatch.service.flows.detection import analysis_progress
from roofwatch.service.flows.measure import submit
from roofwatch.service.records.changes import shown
from roofwatch.service.records.repositories import mirror_and_source, resolve_repository
from roofwatch.service.records.runs import find_commit
from roofwatch.service.records.suite_configs import current
from roofwatch.workers import checkout, prerequisites
from roofwatch.workers.activity import Activity, local_activity
from roofwatch.workers.device import probe
from roofwatch.workers.external_suites import choose, parse_suites_file
from roofwatch.workers.suite_config import parse_toml, suites_in

DEFAULT_LAST = 1
OUTPUT_TAIL_LINES = 15  # of a failed suite's output, printed under the summary


@dataclass
class RunRequest:
    repo: str
    revs: list[str] = field(default_factory=list)
    range_spec: str | None = None
    last: int | None = None
    force: bool = False
    wait: bool = True
    device_class: str | None = None
    suites_file: Path | None = None  # one-off suites (TOML), not stored
    suites_from: str | None = None  # backfill REF, resolved where the user's revision names mean what they see


def select_commits(source_repo: Path, request: RunRequest) -> list[str]:
    """SHAs to measure, oldest first, without repeats."""
    shas: list[str] = []
    if request.range_spec:
        shas += checkout.rev_range(source_repo, request.range_spec)
    if request.last:
        for rev in request.revs or ["HEAD"]:
            shas += checkout.recent(source_repo, rev, request.last)
    else:
        shas += [checkout.resolve(source_repo, rev) for rev in request.revs]
    if not shas:
        shas = checkout.recent(source_repo, "HEAD", DEFAULT_LAST)
    return list(dict.fromkeys(shas))


def one_off_suites(suites_file: Path | None, suites_from: str | None, source_repo: Path) -> dict[str, Any]:
    """Job fields (a run's or an A/B's) for ``--suites FILE`` and ``--suites-from REF``, checked before anything runs."""
    fields: dict[str, Any] = {}
    if suites_file is not None:
        text = suites_file.read_text(encoding="utf-8")
        parse_suites_file(text)
        fields |= {"suites_toml": text, "suites_label": f"--suites {suites_file.name}"}
    if suites_from:
        fields["suites_from"] = checkout.resolve(source_repo, suites_from)
    return fields


def gpu_suites(source_repo: Path, sha: str, suites_toml: str) -> list[str]:
    """The suites that say they need a GPU (``gpu = true``), as the newest commit to run declares them.

    The commit's own ``pyproject.toml`` is read from git without checking anything out, and chosen
    between it and ``suites_toml`` (a suites file, stored or one-off) as the worker will choose. A
    file that cannot be read here names no suite: the run itself reports what is wrong with it.
    """
    try:
        try:
            text = checkout.git("show", f"{sha}:pyproject.toml", cwd=source_repo, local_files=True)
        except CheckoutError:  # no pyproject.toml in the commit
            own = None
        else:
            own = suites_in(parse_toml(text, "pyproject.toml"))
        specs, _ = choose(own, suites_toml, "")
    except SuiteConfigError:
        return []
    return [spec.name for spec in specs or [] if spec.gpu]


def execute(request: RunRequest, console: Console, report: Report | None = None) -> int:
    """Run the request; the process exit code (0 ok, 1 failures or errors, 2 bad input).

    Progress goes to ``console``; the per-commit rows to ``report`` (default: a table on ``console``).
    """
    report = report or partial(_summary, console)
    settings = get_settings()
    try:
        with session_scope() as session:
            repository = resolve_repository(session, request.repo)
        mirror, source = mirror_and_source(repository, settings.mirrors_dir)
        shas = select_commits(source, request)
        # In branch order (first-parent position, never dates): each commit is analysed after the ones before it.
        infos = sorted((checkout.commit_info(mirror, sha) for sha in shas), key=lambda i: i.position)
        one_off = one_off_suites(request.suites_file, request.suites_from, source)
    except (RoofwatchError, OSError) as exc:
        console.print(f"[bold red]error:[/] {inert(redact(str(exc)))}")
        return 2

    if settings.embedded:
        # This process measures: a missing sandbox or git, or a GPU that a suite says it needs,
        # would fail every commit the same way.
        with session_scope() as session:
            stored = current(session, repository.id)  # type: ignore[arg-type]
            stored_toml = stored.content if stored else ""
        needing = gpu_suites(source, infos[-1].sha, one_off.get("suites_toml") or stored_toml) if infos else []
        lacking = prerequisites.missing([*prerequisites.for_running(settings), *prerequisites.for_suites(needing)])
        for check in lacking:
            console.print(f"[bold red]error:[/] {escape(check.name)}: {escape(check.found)}\n  fix: {escape(check.fix)}")
        if lacking:
            console.print("nothing was checked out; `roofwatch doctor` lists what this machine has")
            return 2

    device = probe()
    queue = queue_name(request.device_class or device.device_class)
    recorded = manual.plan(repository.id, infos, device.fingerprint, force=request.force,  # type: ignore[arg-type]
                           skip_measured=settings.embedded)
    planned = recorded.queued
    for sha in recorded.skipped:
        console.print(f"[dim]{sha[:12]} already measured on {inert(device.device_class)} (use --force to re-run)[/]")
    if not planned:
        report(_runs_for(infos, repository.id, device.fingerprint))  # type: ignore[arg-type]
        return 0

    mode = "in-process" if settings.embedded else f"queue {queue}"
    console.print(f"[bold]{inert(repository.full_name)}[/]: {len(planned)} commit(s) on {inert(device.device_class)} ({mode})")
    results = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as bar:
        overall = bar.add_task("commits", total=len(planned))
        purposes = Purposes()
        for run_id, sha in planned:
            job, commit = manual.job(run_id, repository, settings, one_off)
            label = f"{sha[:12]} {inert(commit.message.splitlines()[0][:50]) if commit.message else ''}"
            bar.update(overall, description=label)

            def show(activity: Activity, _run_id: int = run_id, _label: str = label) -> None:
                # Follow-ups (bisection runs, confirmation A/Bs) run inside this commit's call:
                # each is named by its own commits and purpose, not by this commit.
                own = _label if activity.kind == "run" and activity.id == _run_id else None
                text = describe(replace(activity, suite=inert(activity.suite)), purposes(activity), own)
                if activity.event != "start":
                    bar.console.print(f"  {text}")
                bar.update(overall, description=text)

            def analysing(run: int, done: int, total: int, _label: str = label) -> None:
                bar.update(overall, description=f"{_label} · analysing run {run}: {done}/{total} benchmarks")

            token = local_activity.set(show)
            analysis_token = analysis_progress.set(analysing)
            try:
                results.append(submit(job, queue))
            except Exception as exc:  # in-process: recorded on the run (state or analysis_state); go on
                bar.console.print(f"  [red]run {run_id}: {escape(type(exc).__name__)}: {escape(str(exc))}[/]")
                bar.advance(overall)
                continue
            finally:
                analysis_progress.reset(analysis_token)
                local_activity.reset(token)
            if settings.embedded or request.wait:
                results[-1].get(propagate=False)
            bar.advance(overall)

    if not settings.embedded and not request.wait:
        console.print(f"enqueued {len(planned)} run(s): " + ", ".join(str(r) for r, _ in planned))
        return 0
    runs = _runs_for(infos, repository.id, device.fingerprint)  # type: ignore[arg-type]
    report(runs)
    return 0 if all(r["state"] in ("succeeded", "skipped") and r["analysis"] != "failed" for r in runs) else 1


def _runs_for(infos: list[checkout.CommitInfo], repository_id: int, fingerprint: str) -> list[dict[str, object]]:
    """The newest run of each commit, with counts for the summary table."""
    rows: list[dict[str, object]] = []
    with session_scope() as session:
        for info in infos:
            commit = find_commit(session, repository_id, info.sha)
            if commit is None:
                continue
            run = session.exec(select(Run).where(Run.commit_id == commit.id)
                               .order_by(Run.id.desc())).first()  # type: ignore[union-attr]
            if run is None:
                continue
            outcomes = session.exec(select(TestOutcome.outcome).where(TestOutcome.run_id == run.id)).all()
            measurements = session.exec(select(Measurement.id).where(Measurement.run_id == run.id)).all()
            changes = session.exec(select(Change).where(Change.detected_run_id == run.id, shown())).all()
            not_passed = session.exec(select(SuiteExecution).where(
                SuiteExecution.run_id == run.id, SuiteExecution.status != "passed")
                .order_by(SuiteExecution.id)).all()  # type: ignore[arg-type]
            rows.append({
                "run": run.id, "sha": info.sha, "title": info.message.splitlines()[0] if info.message else "",
                "state": run.state, "passed": sum(o == "passed" for o in outcomes),
                "failed": sum(o in ("failed", "error") for o in outcomes),
                "benchmarks": len(measurements),
                "changes": sorted({c.kind for c in changes}), "reason": run.error,
                "analysis": run.analysis_state, "analysis_error": run.analysis_error,
                "suites": [{"name": s.name, "status": s.status, "reason": s.reason, "exit_code": s.exit_code,
                            "output_tail": "\n".join(s.output_tail.splitlines()[-OUTPUT_TAIL_LINES:])}
                           for s in not_passed],
            })
    return rows


Report = Callable[[list[dict[str, object]]], None]


def write_json(rows: list[dict[str, object]]) -> None:
    """``--format json``: one object per commit, oldest first (run, sha, title, state, passed,
    failed, benchmarks, changes (kinds detected by that run), reason, analysis ("", pending,
    running, done, failed), analysis_error, suites (each suite that did not pass: name, status,
    reason, exit_code, output_tail: its last lines))."""
    sys.stdout.write(json.dumps(rows, indent=2) + "\n")


STATE_STYLE = {"succeeded": "green", "failed": "red", "errored": "red", "skipped": "yellow"}


def _summary(console: Console, rows: list[dict[str, object]]) -> None:
    table = Table("run", "commit", "state", "tests ok", "failed", "benchmarks", "changes")
    # On a terminal long titles are cut to keep one line per commit; in a log or a pipe they print whole.
    table.add_column("title", max_width=40 if console.is_terminal else None, no_wrap=True, overflow="ellipsis")
    for row in rows:
        style = STATE_STYLE.get(str(row["state"]), "")
        table.add_row(str(row["run"]), str(row["sha"])[:12], f"[{style}]{row['state']}[/]",
                      str(row["passed"]), str(row["failed"]), str(row["benchmarks"]),
                      inert(", ".join(row["changes"])), inert(row["title"]))  # type: ignore[arg-type]
    console.print(table)
    for row in rows:
        if row["reason"] and row["state"] != "succeeded":
            console.print(f"[dim]{str(row['sha'])[:12]}: {inert(row['reason'])}[/]")
        for suite in row["suites"]:  # type: ignore[attr-defined]
            console.print(f"{str(row['sha'])[:12]} suite [bold]{inert(suite['name'])}[/] {suite['status']}: "
                          f"{inert(suite['reason'] or 'no reason recorded')}")
            if suite["output_tail"].strip():
                console.print(Padding(Text(suite["output_tail"], style="dim"), (0, 0, 0, 4)))
        if row["analysis"] == "failed":
            console.print(f"[red]{str(row['sha'])[:12]}: analysis failed, its changes are not known: "
                          f"{inert(row['analysis_error'])}[/]")
        elif row["analysis"] in ("pending", "running"):
            console.print(f"[yellow]{str(row['sha'])[:12]}: analysis {row['analysis']}, its changes are not known yet[/]")
    console.print(f"dashboard: roofwatch serve, then {dashboard_url()}")
