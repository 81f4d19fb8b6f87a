"""``roofwatch compare BASE HEAD``: an interleaved A/B of two commits on this machine's device."""

from __future__ import annotations

import getpass
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from roofwatch.ab import abtest
from roofwatch.common.metrics import is_memory_suite
from roofwatch.common.redaction import redact
from roofwatch.common.task_names import queue_name
from roofwatch.common.vocabulary import RunState
from roofwatch.service.analysis.failure_groups import parametrizations_text
from roofwatch.service.cli import exit_codes
from roofwatch.service.cli.consoles import inert, inert_lines
from roofwatch.service.cli.progress import describe
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.errors import RoofwatchError
from roofwatch.service.core.links import compare_url
from roofwatch.service.core.reports import BenchmarkVerdictRow, ComparisonReport, failing_tests
from roofwatch.service.core.units import level_text, quantity, seconds
from roofwatch.service.flows import ab, manual_compare
from roofwatch.workers.activity import local_activity

ERROR_SHOWN = 20_000  # characters of the error shown: every unfinished suite's reason and last 20 lines


@dataclass(frozen=True)
class CompareRequest:
    asked: manual_compare.Asked
    wait: bool = True  # with a broker: wait for the verdict
    accept_missing: bool = False  # the local user accepts benchmarks of the base missing on the head


def execute(request: CompareRequest, console: Console) -> tuple[int, ComparisonReport | None]:
    """Run the comparison; (exit code, report or None when nothing was compared)."""
    settings = get_settings()
    try:
        prepared = manual_compare.prepare(request.asked, settings)
    except (RoofwatchError, OSError) as exc:
        console.print(f"[bold red]error:[/] {inert_lines(redact(str(exc)))}")
        return 2, None

    job, device_class = prepared.job, prepared.device.device_class
    mode = "in-process" if settings.embedded else f"queue {queue_name(device_class)}"
    console.print(f"[bold]{inert(prepared.repository)}[/] {prepared.base_sha[:12]} (base) vs "
                  f"{prepared.head_sha[:12]} (head) on {inert(device_class)}, "
                  f"{job.min_rounds}–{job.max_rounds} interleaved rounds ({mode})")
    with progress_lines(console) as show:
        token = local_activity.set(lambda activity: show(describe(replace(activity, suite=inert(activity.suite)),
                                                                  "compare")))
        try:
            result = ab.start(job, device_class)
        finally:
            local_activity.reset(token)
        if not settings.embedded and not request.wait:
            console.print(f"enqueued comparison {job.comparison_id}")
            return 0, None
        result.get(propagate=False)
    data = manual_compare.report(job.comparison_id, getpass.getuser() if request.accept_missing else None)
    if data.get("state") == RunState.FAILED:  # a suite did not finish: the verdict rests on what did, so it fails
        return 1, data
    return exit_codes.of_verdict(data["verdict"]), data


@contextmanager
def progress_lines(console: Console) -> Iterator[Callable[[str], None]]:
    """Where a comparison says what it measures: one live line on a terminal; elsewhere (a pipe, a CI log,
    a file), where Rich draws no live display until the end, a plain line for each suite started and
    finished, so a log shows the round and the benchmarks still open while the comparison runs."""
    if console.is_terminal:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("starting", total=None)
            yield lambda text: bar.update(task, description=text)
        return
    started = time.monotonic()
    # ``text`` is Rich markup whose outside parts are escaped (``inert``), as the live line's is.
    yield lambda text: console.print(f"[{seconds(time.monotonic() - started)}] {text}", highlight=False)


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None or (isinstance(value, float) and math.isinf(value)) else format(value, spec)


def _value(row: BenchmarkVerdictRow, key: Literal["base_median", "head_median"]) -> str:
    """A median in the unit that reads best ("4.19 ms", "1.50 MiB"), or with the benchmark's own unit."""
    value = row.get(key)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return escape(quantity(value, str(row.get("unit", "s") or "")))


# Where a person whose unchanged commits stay inconclusive reads why, and what to set.
INCONCLUSIVE_DOCS = "docs/deciding.md#my-unchanged-commits-stay-inconclusive"


def settle_hint(row: BenchmarkVerdictRow, cap: int | None) -> str:
    """What would settle an inconclusive benchmark: how many rounds (and the option that asks for them), or,
    when no number of rounds would at its min_effect, the min_effect that ``cap`` rounds would settle.

    "" when the row holds no measured noise (fewer rounds than any verdict needs: more rounds is all).
    """
    noise, threshold, change = row.get("noise_pct"), row.get("threshold_pct"), row.get("change_pct")
    rounds = int(row.get("rounds") or 0)
    if noise is None or threshold is None or change is None or rounds < abtest.MIN_ROUNDS:
        return ""
    needed = abtest.rounds_for(change / 100, noise / 100, rounds, threshold / 100)
    if needed is not None:
        return f"more rounds would help: about {needed} would settle it at this noise (--max-rounds {needed})"
    within = max(cap or 0, rounds)
    effect = abtest.min_effect_settled(change / 100, noise / 100, within)
    setting = "memory_min_effect" if is_memory_suite(str(row.get("suite", ""))) else "min_effect"
    return (f"cannot be settled at ±{threshold:g} %: its noise is ±{noise:.1f} % per process; a {setting} of "
            f"{100 * effect:g} % would settle it within {within} rounds ([tool.roofwatch] {setting})")


def _label(row: BenchmarkVerdictRow) -> str:
    """The benchmark's name; its peak-memory twin (same name, suite ``<suite>:memory``) says so."""
    name = row["benchmark"]
    return f"{name} (peak memory)" if is_memory_suite(str(row.get("suite", ""))) else name


STYLE = {"regression": "red", "improvement": "green", "inconclusive": "yellow", "none": "dim", "interaction": "cyan"}


def render_accounting(console: Console, data: ComparisonReport) -> None:
    """What the head changes about its own judgement, and every benchmark of the base it does not report."""
    changes = data.get("settings_changes") or []
    if changes:
        listed = "; ".join(f"{c['what']} {c['before']} → {c['after']}" for c in changes)
        console.print(f"[bold yellow]settings[/] the head changes roofwatch's settings: {escape(listed)}; they take "
                      f"effect after merge (both sides judged by {escape(data.get('judged_by') or 'the base')})")
    for suite, phrases in sorted((data.get("environment_changes") or {}).items()):
        console.print(f"[bold yellow]environment[/] the head's own environment for {escape(suite)} differs: "
                      f"{escape(', '.join(phrases))}")
    for gone in data.get("missing_on_head") or []:
        name = escape(f"{gone.get('suite')}::{gone.get('benchmark')}")
        if gone.get("accepted_by"):
            console.print(f"[dim]missing on the head, accepted by {escape(str(gone['accepted_by']))} at "
                          f"{escape(str(gone.get('accepted_at')))}: {name}: {escape(str(gone.get('reason')))}[/]")
        else:
            console.print(f"[bold red]missing on the head[/] {name}: {escape(str(gone.get('reason')))} "
                          "(--accept-missing accepts it)")
    new = data.get("new_on_head") or []
    if new:
        names = ", ".join(f"{n.get('suite')}::{n.get('benchmark')}" for n in new)
        console.print(f"[dim]new on the head (nothing to compare with): {escape(names)}[/]")


def render(console: Console, data: ComparisonReport) -> None:
    level = data.get("confidence") or abtest.CONFIDENCE
    # The level every verdict was decided at; a change's interval is held at a higher one (marked *).
    adjusted = sorted({c for row in data["benchmarks"] if (c := row.get("confidence", level)) != level})
    table = Table("benchmark", "base", "head", "Δ %", f"{level_text(level)} interval", "noise", "detects",
                  "counts from", "verdict")
    for row in data["benchmarks"]:
        style = STYLE.get(row["direction"], "")
        mark = "*" if row.get("confidence", level) != level else ""
        table.add_row(  # parametrized names ("test_matmul[naive]") are text, not Rich markup
            escape(_label(row) + (f" → {row['head_benchmark']}" if row.get("head_benchmark") else "")),
            _value(row, "base_median"), _value(row, "head_median"),
            _fmt(row["change_pct"], "+.2f"), f"[{_fmt(row['ci_low'], '+.1f')}, {_fmt(row['ci_high'], '+.1f')}]{mark}",
            "±" + _fmt(row.get("noise_pct"), ".1f") + "%", "±" + _fmt(row.get("mde_pct"), ".1f") + "%",
            "±" + _fmt(row["threshold_pct"], ".1f") + "%",
            f"[{style}]{row['direction']}[/]",
        )
    console.print(table)
    for row in data["benchmarks"]:
        if row["direction"] in ("regression", "improvement") and row.get("why"):
            console.print(f"[{STYLE[row['direction']]}]{row['direction']}[/] {escape(_label(row))}: "
                          f"why: {escape(str(row['why']))}")
    for row in data["benchmarks"]:
        if row["direction"] == "interaction":
            evidence = (row.get("attribution") or {}).get("evidence") or {}
            facts = [f"{_fmt(row['change_pct'], '+.1f')} % by the numbers, not counted",
                     *(str(evidence[k]) for k in ("line",) if evidence.get(k)),
                     *(str(order["line"]) for order in [evidence.get("order_dependent") or {}] if order.get("line"))]
            console.print(f"[cyan]interaction[/] {escape(_label(row))}: nothing it imports or launches changed, nor "
                          f"its environment: {escape('; '.join(facts))}")
    if adjusted:
        console.print(f"[dim]* a change's interval, at {' / '.join(level_text(c) for c in adjusted)}: the "
                      f"{level_text(level)} level adjusted for the number of benchmarks compared "
                      "(false-coverage rate), the level that called it[/]", highlight=False)
    undecided = [row for row in data["benchmarks"] if row["direction"] == "inconclusive"]
    for row in undecided:
        console.print(f"[yellow]inconclusive[/] {escape(_label(row))}: {escape(str(row.get('reason', '')))}")
        if hint := settle_hint(row, data.get("max_rounds")):
            console.print(f"  {escape(hint)}")
    if undecided:
        console.print(f"[dim]why unchanged commits stay inconclusive, and the min_effect that settles them: "
                      f"{INCONCLUSIVE_DOCS}[/]", highlight=False)
    if data.get("stop_reason") == "budget":
        console.print("[yellow]stopped at the time budget[/] with the benchmarks above open: --max-rounds, "
                      "[tool.roofwatch] ab_budget_s or ROOFWATCH_AB_BUDGET_S give them more time")
    for failure in data["new_failures"]:
        first_line = (str(failure.get("message", "")).strip().splitlines() or [""])[0]
        tests = parametrizations_text(failing_tests(failure))
        console.print(f"[bold red]new failure[/] {inert(failure.get('suite', ''))}::{inert(failure.get('test_id', ''))}"
                      + (f" ({inert(tests)}; the first)" if tests else "") + f": {inert(first_line)}")
    render_accounting(console, data)
    if data["error"]:
        # Each unfinished suite's reason and the last lines it printed, as it printed them (a table stays a table).
        console.print(f"[dim]{inert_lines(data['error'], indent='', limit=ERROR_SHOWN)}[/]", highlight=False)
    if data.get("suites_source"):
        console.print(f"[dim]suites: {escape(data['suites_source'])}[/]")
    mde = _fmt(data["mde_pct"], ".1f")
    spent = data.get("spent_s")
    budget = data.get("budget_s")
    used = f" in {spent:.0f} s" + (f" of a {budget:.0f} s budget" if budget else "") if spent is not None else ""
    driver = data.get("mde_benchmark")
    # A suite that did not finish fails the comparison (exit 1) whatever the finished ones say, as the
    # PR comment says: the line says so first, so a "no-change" of the rest is never read as the answer.
    verdict = f"{data['verdict']}[/]"
    if data.get("state") == "failed" and data["verdict"] in ("no-change", "improvement", "inconclusive"):
        verdict = f"incomplete[/] (the suites that finished: {data['verdict']})"
    console.print(f"verdict: [bold]{verdict} after {data['rounds']} round(s){used}"
                  + (f"; smallest detectable change ±{mde}%" if mde else "")
                  + (f" (set by the noisiest, {escape(driver)})" if mde and driver and len(data["benchmarks"]) > 1 else ""))
    if (comparison_id := data.get("id")) is not None:
        console.print(f"dashboard: {compare_url(comparison_id)}", highlight=False)
