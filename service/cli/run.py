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
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from roofwatch.common.device import probe
from roofwatch.common.redaction import redact
from roofwatch.common.task_names import queue_name
from roofwatch.common.vocabulary import PASSING_STATES
from roofwatch.service.analysis import lifecycle
from roofwatch.service.cli.consoles import inert, inert_lines
from roofwatch.service.cli.progress import Purposes, describe
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.errors import RoofwatchError
from roofwatch.service.core.links import dashboard_url
from roofwatch.service.flows import manual, run_selection
from roofwatch.service.flows.detection import analysis_progress
from roofwatch.service.flows.measure import submit
from roofwatch.workers import prerequisites
from roofwatch.workers.activity import Activity, local_activity

TAIL_SHOWN = 20_000  # characters of those lines printed (a minified line or a tensor dump is cut)


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


def execute(request: RunRequest, console: Console, report: Report | None = None) -> int:
    """Run the request; the process exit code (0 ok, 1 failures or errors, 2 bad input).

    Progress goes to ``console``; the per-commit rows to ``report`` (default: a table on ``console``).
    """
    report = report or partial(_summary, console)
    settings = get_settings()
    try:
        prepared = run_selection.prepare(request.repo, run_selection.Selection(tuple(request.revs), request.range_spec,
                                                                                 request.last),
                                         settings, request.suites_file, request.suites_from)
    except (RoofwatchError, OSError) as exc:
        console.print(f"[bold red]error:[/] {inert_lines(redact(str(exc)))}")
        return 2
    repository, infos, default, off_branch, one_off = (prepared.repository, prepared.infos, prepared.default,
                                                       prepared.off_branch, prepared.one_off)

    if settings.embedded:
        # This process measures: a missing sandbox or git, or a GPU that a suite says it needs,
        # would fail every commit the same way.
        needing = run_selection.suites_needing_a_gpu(prepared)
        lacking = prerequisites.missing([*prerequisites.for_running(settings), *prerequisites.for_suites(needing)])
        for check in lacking:
            console.print(f"[bold red]error:[/] {escape(check.name)}: {escape(check.found)}\n  fix: {escape(check.fix)}")
        if lacking:
            console.print("nothing was checked out; `roofwatch doctor` lists what this machine has")
            return 2

    device = probe()
    queue = queue_name(request.device_class or device.device_class)
    for sha, off in off_branch.items():
        main = default.name if default else "the default branch"
        console.print(f"{sha[:12]} is on {inert(off.branch)}, not on {inert(main)}: measured as a branch run, "
                      f"kept off {inert(main)}'s history")
    recorded = manual.plan(repository.id, infos, device.fingerprint, force=request.force,  # type: ignore[arg-type]
                           skip_measured=settings.embedded, off_branch=off_branch)
    planned = recorded.queued
    for sha in recorded.skipped:
        console.print(f"[dim]{sha[:12]} already measured on {inert(device.device_class)} (use --force to re-run)[/]")
    if not planned:
        report(manual.newest_runs(repository.id, infos))  # type: ignore[arg-type]
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
    runs = manual.newest_runs(repository.id, infos)  # type: ignore[arg-type]
    report(runs)
    return 0 if all(r["state"] in PASSING_STATES and r["analysis"] != "failed" for r in runs) else 1


Report = Callable[[list[dict[str, object]]], None]


def write_json(rows: list[dict[str, object]]) -> None:
    """``--format json``: one object per commit, oldest first (run, sha, title, branch (null for a commit
    of the default branch; else the branch of a commit off it, whose run is kept off the default branch's
    history), branch_base (where that branch left the default branch), state, passed,
    failed, benchmarks, changes (kinds of the changes that run found and an A/B confirmed), candidates
    (steps it showed that no A/B has confirmed: suite, benchmark, step_pct — the median's move, + is
    up, no direction claimed —, phase, good, bad, why: a rejection's reason), reason, analysis ("", pending,
    running, done, failed), analysis_error, suites (each suite that did not pass: name, status,
    reason, exit_code, output_tail: its last lines))."""
    sys.stdout.write(json.dumps(rows, indent=2) + "\n")


STATE_STYLE = {"succeeded": "green", "failed": "red", "errored": "red", "skipped": "yellow"}


def _summary(console: Console, rows: list[dict[str, object]]) -> None:
    table = Table("run", "commit", "state", "tests ok", "failed", "benchmarks", "changes", "candidates")
    # On a terminal long titles are cut to keep one line per commit; in a log or a pipe they print whole.
    table.add_column("title", max_width=40 if console.is_terminal else None, no_wrap=True, overflow="ellipsis")
    for row in rows:
        style = STATE_STYLE.get(str(row["state"]), "")
        table.add_row(str(row["run"]), str(row["sha"])[:12], f"[{style}]{row['state']}[/]",
                      str(row["passed"]), str(row["failed"]), str(row["benchmarks"]),
                      inert(", ".join(row["changes"])), str(len(row["candidates"]) or ""),  # type: ignore[arg-type]
                      inert(row["title"]))
    console.print(table)
    for row in rows:
        if row["branch"]:
            base = str(row["branch_base"] or "")[:12]
            said = f"branch run on {inert(row['branch'])}, kept off the default branch's history"
            if base:
                said += f"; roofwatch compare {base} {str(row['sha'])[:12]} measures it against where it left"
            console.print(f"[dim]{str(row['sha'])[:12]}: {said}[/]")
        if row["reason"] and row["state"] != "succeeded":
            console.print(f"[dim]{str(row['sha'])[:12]}: {inert_lines(row['reason'])}[/]")
        for suite in row["suites"]:  # type: ignore[attr-defined]
            console.print(f"{str(row['sha'])[:12]} suite [bold]{inert(suite['name'])}[/] {suite['status']}: "
                          f"{inert_lines(suite['reason'] or 'no reason recorded')}")
            if suite["output_tail"].strip():
                # As printed, indented, every line its own (a padded block would fill each line to the width of
                # a log's console with spaces), its controls written out (a suite's colours stay in the suite).
                console.print(f"[dim]    {inert_lines(suite['output_tail'], indent='    ', limit=TAIL_SHOWN)}[/]",
                              highlight=False)
        for candidate in row["candidates"]:  # type: ignore[attr-defined]
            console.print(f"[dim]{str(row['sha'])[:12]} {_candidate_line(candidate)}[/]")
        if row["analysis"] == "failed":
            console.print(f"[red]{str(row['sha'])[:12]}: analysis failed, its changes are not known: "
                          f"{inert_lines(row['analysis_error'])}[/]")
        elif row["analysis"] in ("pending", "running"):
            console.print(f"[yellow]{str(row['sha'])[:12]}: analysis {row['analysis']}, its changes are not known yet[/]")
    console.print(f"dashboard: roofwatch serve, then {dashboard_url()}")


PHASE_WORDS = {lifecycle.CANDIDATE: "waiting for its A/B", lifecycle.NARROWING: "being narrowed to one commit",
               lifecycle.CONFIRMING: "waiting for its A/B", lifecycle.REJECTED: "not confirmed by its A/B"}


def _candidate_line(candidate: dict[str, Any]) -> str:
    """``candidate step +12.3 % in benchmarks::test_x (a1b2..c3d4), not confirmed by its A/B: …``: a median's
    move, which one process per commit cannot call slower or faster; ``roofwatch compare`` can."""
    step = candidate["step_pct"]
    size = f"{step:+.1f} % " if isinstance(step, float) else ""
    good, bad = str(candidate["good"] or "")[:12], str(candidate["bad"] or "")[:12]
    line = (f"candidate step {size}in {inert(candidate['suite'])}::{inert(candidate['benchmark'])} ({good}..{bad}), "
            f"{PHASE_WORDS.get(candidate['phase'], candidate['phase'])}")
    if candidate["why"]:
        line += f": {inert(candidate['why'])}"
    return line + f"; roofwatch compare {good} {bad} decides it"
