"""The pull-request report: one living PR comment and the one-line status summary.

Both are pure functions of the dict ``roofwatch.service.records.comparisons.comparison_report`` returns: no I/O,
no clock, so the same comparison always renders the same bytes and re-posting an unchanged
report is a no-op edit.

Everything a pull request controls — benchmark and test names, failure output, error text — is
put in code spans or fenced blocks, whose fences are made longer than any backtick run inside,
so a name or a message cannot break the table, leave its block, or inject Markdown.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from roofwatch.ab.abtest import CONFIDENCE, MIN_ROUNDS
from roofwatch.service.analysis.failure_groups import (
    PARAMETRIZATIONS_NAMED,
    FailureGroup,
    group_failures,
    parametrization,
)
from roofwatch.service.core.reports import (
    BenchmarkVerdictRow,
    ComparisonReport,
    MissingBenchmark,
    NewFailure,
    failing_tests,
)
from roofwatch.service.core.units import level_text, quantity, seconds
from roofwatch.service.github.compiled_section import render_compiled

MARKER = "<!-- roofwatch:pull-request-report -->"  # hidden marker by which the comment is found again and edited
MAX_COMMENT_CHARS = 65_000  # GitHub rejects comment bodies over 65,536 characters
MAX_TITLE_CHARS = 140  # GitHub's commit-status description limit

ELLIPSIS = "…"
DASH = "–"  # an unknown value in a table
FAILURE_LINES = 15  # the head of a pytest failure: its message and the assertion, not the whole traceback
LINE_CHARS = 300  # one minified source line or tensor dump must not eat the comment
ERROR_CHARS = 2_000
FAILURES_WITH_OUTPUT = 10  # beyond these, new failures are listed by name only
SETTINGS_SHOWN = 6  # settings changes named in the comment's one line; the rest on the dashboard
MORE_RESERVE = 80  # room kept for the "… N more rows on the dashboard" line
SLACK = 200  # separators between sections and rounding: the body must never reach GitHub's limit
WHY_CHARS = 160  # one change's "why" in the table
SHA = re.compile(r"\b[0-9a-f]{40}\b")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

Conclusion = Literal["success", "failure", "neutral"]


@dataclass(frozen=True)
class ReportContext:
    repository: str  # "acme/kernels"
    pr_number: int
    base_ref: str  # target branch, e.g. "main"
    dashboard_url: str  # the dashboard's compare page for this comparison


@dataclass(frozen=True)
class Summary:
    conclusion: Conclusion  # check-run conclusion; commit statuses map neutral → success
    title: str  # one line, at most MAX_TITLE_CHARS


@dataclass(frozen=True)
class _View:
    """The report, sorted once into what every section needs."""

    report: ComparisonReport
    rows: list[BenchmarkVerdictRow]
    slower: list[BenchmarkVerdictRow]  # worst first
    faster: list[BenchmarkVerdictRow]  # biggest first
    unsure: list[BenchmarkVerdictRow]
    interactions: list[BenchmarkVerdictRow]  # moved by the numbers, identical code: they decide nothing
    failures: list[NewFailure]  # one per test function
    fixed: list[FailureGroup]  # the tests fixed, one per test function
    multi_suite: bool
    missing: list[MissingBenchmark]  # not accepted by a maintainer: they keep the check from green
    accepted: list[MissingBenchmark]

    @classmethod
    def of(cls, report: ComparisonReport) -> _View:
        rows = list(report.get("benchmarks") or [])
        by_direction = {d: [r for r in rows if r.get("direction") == d]
                        for d in ("regression", "improvement", "inconclusive", "interaction")}
        # change_pct is monotone in the time ratio, so sorting by it sorts by size of the change.
        slower = sorted(by_direction["regression"], key=lambda r: (-_num(r.get("change_pct")), _name(r)))
        faster = sorted(by_direction["improvement"], key=lambda r: (_num(r.get("change_pct")), _name(r)))
        gone = list(report.get("missing_on_head") or [])
        suites = {r.get("suite") for r in rows} | {m.get("suite") for m in gone}
        interactions = sorted(by_direction["interaction"], key=lambda r: (-abs(_num(r.get("change_pct"))), _name(r)))
        return cls(report, rows, slower, faster, by_direction["inconclusive"], interactions,
                   list(report.get("new_failures") or []),
                   group_failures((str(name), "") for name in report.get("fixed") or []),
                   len(suites) > 1, [m for m in gone if not m.get("accepted_by")],
                   [m for m in gone if m.get("accepted_by")])

    @property
    def errored(self) -> bool:
        return self.report.get("state") == "errored" or self.report.get("verdict") == "errored"

    @property
    def incomplete(self) -> bool:
        # A suite that timed out or crashed leaves no outcomes, and a missing outcome is not a
        # "new failure": without this a head whose correctness suite hangs would pass.
        return self.report.get("state") == "failed"

    @property
    def rounds(self) -> int:
        return int(self.report.get("rounds") or 0)

    def label(self, row: BenchmarkVerdictRow | MissingBenchmark) -> str:
        name = str(row.get("benchmark") or "")
        renamed = row.get("head_benchmark")
        if renamed:
            name = f"{name} → {renamed}"
        return f"{row.get('suite')}::{name}" if self.multi_suite else name


# --- the one-line summary -------------------------------------------------------------------------


def summarize(report: ComparisonReport) -> Summary:
    """The check-run conclusion and a ≤140-character title for ``report``."""
    view = _View.of(report)
    if view.errored:
        return Summary("failure", _clip("could not measure: " + _error_line(report), MAX_TITLE_CHARS))
    if view.failures or report.get("verdict") == "failure":
        return Summary("failure", _failure_title(view))
    if view.slower:
        return Summary("failure", _change_title(view, view.slower, "slower", "worst"))
    if view.incomplete:
        return Summary("failure", _clip("incomplete: " + _error_line(report), MAX_TITLE_CHARS))
    if view.missing:
        conclusion: Conclusion = "neutral" if report.get("missing_policy") == "neutral" else "failure"
        return Summary(conclusion, _missing_title(view))
    if view.unsure:
        return Summary("neutral", _inconclusive_title(view))
    if view.faster:
        return Summary("success", _change_title(view, view.faster, "faster", "best"))
    return Summary("success", _no_change_title(view))


def _failure_title(view: _View) -> str:
    if not view.failures:
        return "new test failures (see the pull-request comment)"
    first = view.failures[0]
    name, tests = f"{first.get('suite')}::{first.get('test_id')}", failing_tests(first)
    count = f" ({len(tests)} parametrizations)" if len(tests) > 1 else ""
    if len(view.failures) == 1:
        return _with_name("1 new test failure: ", name, count)
    return _with_name(f"{len(view.failures)} new test failures: ", name, f"{count} and {len(view.failures) - 1} more")


def _change_title(view: _View, rows: list[BenchmarkVerdictRow], word: str, extreme: str) -> str:
    first = rows[0]
    others = []
    if word == "slower" and view.faster:
        others.append(f"{len(view.faster)} faster")
    if view.unsure:
        others.append(f"{len(view.unsure)} inconclusive")
    scope = f" · {_count(len(view.rows), 'benchmark')}, {_count(view.rounds, 'round')}"
    tail = "".join(", " + o for o in others) + scope
    return _with_name(f"{len(rows)} {word} ({extreme} {_pct(first.get('change_pct'))} ", view.label(first), ")" + tail)


def _missing_title(view: _View) -> str:
    first, more = view.missing[0], len(view.missing) - 1
    return _with_name(f"{_count(len(view.missing), 'benchmark')} of the base missing on the head: ", view.label(first),
                      (f" and {more} more" if more else "") + " (a maintainer accepts: /roofwatch accept)")


def _inconclusive_title(view: _View) -> str:
    n = len(view.unsure)
    if _uploaded(view):
        title = f"inconclusive: {_count(n, 'benchmark')} too noisy to call from two single runs"
    else:
        title = f"inconclusive after {_count(view.rounds, 'round')}: {_count(n, 'benchmark')} too noisy to call"
    if view.faster:
        title += f" · {len(view.faster)} faster"
    return _clip(title, MAX_TITLE_CHARS)


def _no_change_title(view: _View) -> str:
    if not view.rows:
        return "no benchmarks to compare; no new test failures"
    title = f"no significant change in {_count(len(view.rows), 'benchmark')}"
    mde = view.report.get("mde_pct")
    if _finite(mde):
        title += f" (detectable ±{mde:.1f} %)"
    if view.interactions:
        title += f" · {_count(len(view.interactions), 'interaction')}, not counted"
    return _clip(title, MAX_TITLE_CHARS)


def _with_name(prefix: str, name: str, suffix: str) -> str:
    """A title whose one long part is the name: shorten the name, keep the counts readable."""
    room = MAX_TITLE_CHARS - len(prefix) - len(suffix)
    return _clip(prefix + _clip(_one_line(name), max(room, 12)) + suffix, MAX_TITLE_CHARS)


def _first_line(error: object) -> str:
    """An error's first line: its summary (what follows is each suite's reason and output)."""
    return (str(error or "").strip().splitlines() or [""])[0]


def _error_line(report: ComparisonReport) -> str:
    error = _one_line(_first_line(report.get("error"))) or "no reason was recorded"
    return SHA.sub(lambda m: m.group(0)[:7], error)  # 40-hex shas would take a third of the title


# --- the comment ---------------------------------------------------------------------------------


def render_comment(report: ComparisonReport, context: ReportContext) -> str:
    """The body of the pull request's one roofwatch comment (GitHub-flavoured Markdown)."""
    view = _View.of(report)
    header = _header(view, context)
    link = _link(view, context)
    if view.errored:
        return _join([MARKER, header, _errored(view), link])
    notice = _incomplete_notice(view) if view.incomplete else _quiet(view)
    if _uploaded(view):
        notice = _join([uploaded_notice(view), notice]).strip()
    notice = _join([_settings_notice(view), _environment_notice(view), notice]).strip()
    mde = _mde(view)
    budget = MAX_COMMENT_CHARS - SLACK - sum(len(s) for s in (MARKER, header, notice, mde, link))
    # Failures decide the check, so they come first and may take the most; the full table, which
    # the dashboard has anyway, gets whatever is left and is truncated first.
    failures = _failures(view, budget * 3 // 10)
    left = budget - len(failures)
    missing = _missing(view, min(left, budget // 10))
    left -= len(missing)
    unsure = _inconclusive(view, min(left, budget // 10))
    left -= len(unsure)
    significant = _significant(view, left - budget // 5)
    left -= len(significant)
    interactions = _interactions(view, min(left, budget // 10))
    left -= len(interactions)
    compiled = render_compiled(report.get("compiled") or {}, min(left, budget // 10), _code)
    left -= len(compiled)
    new = _new_on_head(view, min(left, budget // 20))
    left -= len(new)
    details = _details(view, left)
    return _join([MARKER, header, notice, failures, missing, significant, interactions, compiled, unsure, new, mde,
                  details, link])


def comment_for(report: ComparisonReport, repository: str, pr_number: int, base_ref: str, dashboard_url: str) -> str:
    """``render_comment`` with its context spelled out: what the dashboard's compare page shows."""
    return render_comment(report, ReportContext(repository=repository, pr_number=pr_number, base_ref=base_ref,
                                                dashboard_url=dashboard_url))


def _join(sections: Sequence[str]) -> str:
    return "\n\n".join(s for s in sections if s) + "\n"


def _header(view: _View, context: ReportContext) -> str:
    word = _verdict_word(view)
    report = view.report
    facts = [f"head {_short(report.get('head'))} vs {_short(report.get('base'))} "
             f"(merge-base with {_code(context.base_ref)})", _one_line(str(report.get("device") or "unknown device"))]
    if view.rounds:
        facts.append(_count(view.rounds, "interleaved round"))
    if report.get("purpose") == "upload":
        facts.append("uploaded, not re-measured")
    return f"### roofwatch: **{word}** — {_headline(view)}\n" + " · ".join(facts)


def _verdict_word(view: _View) -> str:
    verdict = str(view.report.get("verdict") or "unknown")
    if view.incomplete and verdict in ("no-change", "improvement", "inconclusive"):
        return "incomplete"
    return "missing benchmarks" if verdict == "missing" else verdict


def _headline(view: _View) -> str:
    if view.errored:
        return "could not measure"
    parts = []
    if view.failures:
        parts.append(_count(len(view.failures), "new test failure"))
    if view.slower:
        parts.append(f"{len(view.slower)} slower")
    if view.faster:
        parts.append(f"{len(view.faster)} faster")
    if view.unsure:
        parts.append(f"{len(view.unsure)} too noisy to call")
    if view.interactions and parts:
        parts.append(f"{_count(len(view.interactions), 'interaction')} (not counted)")
    if view.incomplete:
        parts.append("suites did not finish")
    if view.missing:
        parts.append(f"{len(view.missing)} of the base missing on the head")
    if parts:
        return ", ".join(parts)
    if not view.rows:
        return "no benchmarks to compare"
    return f"no significant change in {_count(len(view.rows), 'benchmark')}"


def _errored(view: _View) -> str:
    error = _clip(str(view.report.get("error") or "no reason was recorded"), ERROR_CHARS)
    return ("roofwatch could not measure this pull request, so there is no verdict on its speed or "
            "correctness:\n\n" + _block(error) + "\n\nOnce the cause is fixed, the next push (or a re-run) updates "
            "this comment in place.")


def _incomplete_notice(view: _View) -> str:
    error = _clip(_one_line(_first_line(view.report.get("error"))), ERROR_CHARS) or "a suite did not finish"
    return (f"> **Incomplete run:** {_code(error)}. A suite that crashes or times out reports no test "
            "outcomes, so a broken kernel could hide behind it; this check fails until every suite finishes.")


def _settings_notice(view: _View) -> str:
    """One line: what the head would change about how roofwatch judges it, and that it waits for the merge."""
    changes = list(view.report.get("settings_changes") or [])
    if not changes:
        return ""
    shown = [f"{_code(c['what'])} {_code(c['before'])} → {_code(c['after'])}" for c in changes[:SETTINGS_SHOWN]]
    if len(changes) > SETTINGS_SHOWN:
        shown.append(f"and {len(changes) - SETTINGS_SHOWN} more on the dashboard")
    judged = _one_line(str(view.report.get("judged_by") or "the merge-base"))
    return (f"> **This pull request changes roofwatch's settings:** {'; '.join(shown)}. They take effect after "
            f"merge; this check measured and judged both sides by {_code(judged)}.")


def _environment_notice(view: _View) -> str:
    """One line per suite whose own environment the head changes: a version bump is a cause of its own."""
    changes = dict(view.report.get("environment_changes") or {})
    lines = [f"> **The head's environment differs** (suite {_code(suite)}): "
             + ", ".join(_code(phrase) for phrase in phrases[:SETTINGS_SHOWN])
             + (f" and {len(phrases) - SETTINGS_SHOWN} more" if len(phrases) > SETTINGS_SHOWN else "")
             + ". Every change below happened with it."
             for suite, phrases in sorted(changes.items()) if phrases]
    return "\n>\n".join(lines)


def _missing(view: _View, budget: int) -> str:
    """The base's benchmarks the head does not report comparably: each keeps the check from green until accepted."""
    if not (view.missing or view.accepted):
        return ""
    lines = []
    if view.missing:
        lines.append(f"#### Missing on the head ({len(view.missing)}): not a green check\n\n"
                     "The merge-base reports these and the head does not (or not comparably), so a regression "
                     "in them could not be seen. A maintainer accepts them with a comment "
                     "`/roofwatch accept` (all) or `/roofwatch accept NAME …`; a declared rename pairs the "
                     "two names instead (`[tool.roofwatch] renamed`).\n")
    else:
        lines.append(f"#### Missing on the head ({len(view.accepted)}), accepted\n")
    rows = [(m, "") for m in view.missing] + [(m, _accepted(m)) for m in view.accepted]
    for index, (row, accepted) in enumerate(rows):
        line = f"- {_code(view.label(row))}: {_one_line(str(row.get('reason') or ''))}{accepted}"
        if _size(lines, "\n") + len(line) + 1 + MORE_RESERVE > budget:
            lines.append("\n" + _more(len(rows) - index, "benchmark"))
            break
        lines.append(line)
    return "\n".join(lines)


def _accepted(row: MissingBenchmark) -> str:
    via = {"comment": "a comment", "api": "the API", "cli": "roofwatch compare"}.get(str(row.get("accepted_via")), "")
    return (f" — accepted by {_code(str(row.get('accepted_by') or ''))} at {_one_line(str(row.get('accepted_at')))}"
            + (f" through {via}" if via else ""))


def _new_on_head(view: _View, budget: int) -> str:
    new = list(view.report.get("new_on_head") or [])
    if not new:
        return ""
    names = [_code(f"{n.get('suite')}::{n.get('benchmark')}" if view.multi_suite else str(n.get("benchmark")))
             for n in new]
    line = f"New on the head ({len(new)}), nothing to compare with yet: "
    kept: list[str] = []
    for index, name in enumerate(names):
        if len(line) + _size(kept, ", ") + len(name) + 2 + MORE_RESERVE > budget:
            return line + ", ".join(kept) + f" and {len(names) - index} more."
        kept.append(name)
    return line + ", ".join(kept) + "."


def _quiet(view: _View) -> str:
    """What did not happen, said outright: silence would leave the reader guessing whether it was checked."""
    return "" if view.failures else "No new test failures."


def _failures(view: _View, budget: int) -> str:
    parts: list[str] = []
    room = budget - (budget // 6 if view.fixed else 0)  # a flood of failures must not hide what was fixed
    if view.failures:
        parts.append(f"#### {_count(len(view.failures), 'new test failure')}\n\n"
                     "Failing on head but not on the merge-base. A correctness failure fails this check "
                     "whatever the timings say.")
        for index, failure in enumerate(view.failures):
            name = _code(f"{failure.get('suite')}::{failure.get('test_id')}") + _parametrizations(failure)
            entry = (f"{name}\n\n{_excerpt(str(failure.get('message') or ''))}"
                     if index < FAILURES_WITH_OUTPUT else f"- {name}")
            if _size(parts) + len(entry) + 2 + MORE_RESERVE > room:
                parts.append(_more(len(view.failures) - index, "failure"))
                break
            parts.append(entry)
    if view.fixed:
        parts.append(_fixed(view, budget - _size(parts) - 2))
    return "\n\n".join(p for p in parts if p)


def _parametrizations(failure: NewFailure) -> str:
    """`` — 11 parametrizations fail: `[a]`, `[b]`, … and 3 more; the first:`` for a group, "" for one test."""
    tests = failing_tests(failure)
    if len(tests) <= 1:
        return ""
    ids = [_code(f"[{parametrization(t)}]") for t in tests[:PARAMETRIZATIONS_NAMED]]
    more = f" and {len(tests) - PARAMETRIZATIONS_NAMED} more" if len(tests) > PARAMETRIZATIONS_NAMED else ""
    return f" — {len(tests)} parametrizations fail: {', '.join(ids)}{more}; the first:"


def _fixed(view: _View, budget: int) -> str:
    count = sum(len(group.tests) for group in view.fixed)
    heading = f"#### Fixed ({count})\n\nFailing on the merge-base, passing on head:\n"
    lines = [heading]
    for index, group in enumerate(view.fixed):
        line = f"- {_code(group.name)}" + (f" ({len(group.tests)} parametrizations)" if len(group.tests) > 1 else "")
        if _size(lines, "\n") + len(line) + 1 + MORE_RESERVE > budget:
            lines.append("\n" + _more(len(view.fixed) - index, "test"))
            break
        lines.append(line)
    return "\n".join(lines) if budget > len(heading) + MORE_RESERVE else ""


def _excerpt(message: str) -> str:
    lines = [CONTROL.sub("", line.rstrip()) for line in message.strip("\n").splitlines()]
    while lines and not lines[0].strip():
        lines.pop(0)
    if len(lines) > FAILURE_LINES:
        # pytest ends with "path.py:21: AssertionError": keep that pointer to the failing line.
        hidden = len(lines) - FAILURE_LINES + 1
        lines = lines[:FAILURE_LINES - 2] + [f"[… {_count(hidden, 'line')} omitted, full output on the dashboard …]",
                                             lines[-1]]
    return _block("\n".join(_clip(line, LINE_CHARS) for line in lines) or "(no failure output)")


def _significant(view: _View, budget: int) -> str:
    rows = view.slower + view.faster
    if not rows:
        # Under a failure headline nothing else says the timings were looked at and are fine.
        return f"No significant change in {_count(len(view.rows), 'benchmark')}." if view.failures else ""
    heading = "#### Significant changes\n\n"
    levels = _levels(view, rows)
    legend = ("\n\nBase and head are medians; Δ is the paired change over the interleaved rounds, + is slower "
              f"(or less throughput). Listed when significant — the {levels} interval (the {_level(view)} level "
              "adjusted for the number of benchmarks compared) excludes zero — *and* larger than the change that "
              "counts (min_effect).")
    header: tuple[str, ...] = ("benchmark", "base", "head", "Δ", f"{levels} interval", "% of roofline")
    cells = [[_code(view.label(r), cell=True), _value(r, "base_median"), _value(r, "head_median"),
              f"**{_pct(r.get('change_pct'))}**", _interval(r), _roofline(r)] for r in rows]
    if any(r.get("why") for r in rows):
        # One line of why per change: the kernel, environment or imported files that differ.
        header += ("why",)
        for row, line in zip(rows, cells, strict=True):
            line.append(_code(_clip(str(row.get("why")), WHY_CHARS), cell=True) if row.get("why") else DASH)
        legend += " *why*: what differs between what the benchmark ran on the two sides."
    table = _table(header, "l", cells, budget - len(heading) - len(legend), text_after=6)
    return heading + table + legend


def _interactions(view: _View, budget: int) -> str:
    """Moves of identical code: shown with their evidence, counted for nothing."""
    if not view.interactions:
        return ""
    lines = [f"#### Interactions ({len(view.interactions)}): not counted against this pull request\n\n"
             "These moved by the numbers, but nothing they import or launch changed, nor their environment: "
             "what ran before them in the process, or the machine, moved them. They never fail this check.\n"]
    for index, row in enumerate(view.interactions):
        evidence = (row.get("attribution") or {}).get("evidence") or {}
        facts = [f"{_pct(row.get('change_pct'))} by the numbers"]
        if evidence.get("line"):
            facts.append(_one_line(str(evidence["line"])))
        order = evidence.get("order_dependent") or {}
        if order.get("line"):
            facts.append(_one_line(str(order["line"])))
        line = f"- {_code(view.label(row))}: " + "; ".join(facts)
        if _size(lines, "\n") + len(line) + 1 + MORE_RESERVE > budget:
            lines.append("\n" + _more(len(view.interactions) - index, "benchmark"))
            break
        lines.append(line)
    return "\n".join(lines)


def _inconclusive(view: _View, budget: int) -> str:
    if not view.unsure:
        return ""
    uploaded = _uploaded(view)
    if uploaded:
        why = ("Two single uploaded runs could neither call these a change nor show them to lie within the "
               "change that counts; interleaved rounds of both commits on one runner could. Why each:\n")
    else:
        why = ("roofwatch adds interleaved rounds while a benchmark is undecided, up to its round cap and time "
               f"budget{_spent(view.report)}; after {_count(view.rounds, 'round')} these could neither be called "
               "a change nor shown to lie within the change that counts. What would settle each:\n")
    lines = [f"#### Inconclusive ({len(view.unsure)}): not a green check\n\n{why}"]
    for index, row in enumerate(view.unsure):
        line = f"- {_code(view.label(row))}: {_why_unsure(row, uploaded)}"
        if _size(lines, "\n") + len(line) + 1 + MORE_RESERVE > budget:
            lines.append("\n" + _more(len(view.unsure) - index, "benchmark"))
            break
        lines.append(line)
    if view.report.get("stop_reason") == "budget":
        lines.append("\nThe rounds stopped at the time budget with these open: `ab_budget_s` under "
                     "`[tool.roofwatch]` (or `ROOFWATCH_AB_BUDGET_S` on the service) gives them more time.")
    return "\n".join(lines)


def _why_unsure(row: BenchmarkVerdictRow, uploaded: bool = False) -> str:
    reason = _one_line(str(row.get("reason") or f"fewer than {MIN_ROUNDS} paired rounds"))
    if uploaded:
        # an upload stores the series' run-to-run spread as its noise, 0 while too few earlier uploads exist
        noise = row.get("noise_pct")
        return f"{reason} (run-to-run noise {_plain_pct(noise) if noise else 'not yet known'})"
    return f"{reason} (noise {_plain_pct(row.get('noise_pct'))} per process)"


def _spent(report: ComparisonReport) -> str:
    spent, budget = report.get("spent_s"), report.get("budget_s")
    if _finite(spent) and _finite(budget):
        return f" ({spent:.0f} s of {budget:.0f} s spent)"
    return f" ({spent:.0f} s spent)" if _finite(spent) else ""


def _uploaded(view: _View) -> bool:
    return view.report.get("purpose") == "upload"


def uploaded_notice(view: _View) -> str:
    """Results from the team's own CI: two separate runs, so less is known than after an A/B."""
    return ("> **Uploaded, not re-measured.** Base and head are single runs from your CI, not interleaved "
            "rounds on one device, so the noise between runs is estimated from the series' history and "
            "only changes beyond the threshold below are called; a smaller move beyond the change that counts "
            "is inconclusive, not \"no change\".")


def _mde(view: _View) -> str:
    mde = view.report.get("mde_pct")
    if _uploaded(view) and _finite(mde):
        return f"Smallest change this comparison could call: **±{mde:.1f} %** (the largest threshold of any benchmark)."
    if _finite(mde):
        driver = view.report.get("mde_benchmark")
        noisiest = f"; the noisiest, {_code(str(driver))}, sets it" if driver and len(view.rows) > 1 else ""
        return (f"Smallest change this run could detect: **±{mde:.1f} %** (on every benchmark, at 80 % power"
                f"{noisiest}).")
    if not view.rows:
        return "Smallest change this run could detect: none — no benchmarks were measured."
    return (f"Smallest change this run could detect: none — no benchmark had the {MIN_ROUNDS} paired rounds "
            "a verdict needs.")


def _details(view: _View, budget: int) -> str:
    if not view.rows:
        return ""
    opening = f"<details><summary>All {_count(len(view.rows), 'benchmark')}</summary>\n\n"
    changes = [r for r in view.rows if _confidence(view, r) != _confidence(view)]
    marked = {id(r) for r in changes}
    closing = ("\n\n\\* a change's interval, at " + _levels(view, changes) + ": adjusted for the number of benchmarks "
               "compared, the level that called it." if changes else "") + "\n\n</details>"
    header = ("benchmark", "base", "head", "Δ", f"{_level(view)} interval", "noise", "counts from", "% of roofline",
              "verdict")
    cells = [[_code(view.label(r), cell=True), _value(r, "base_median"), _value(r, "head_median"), _delta(r),
              _interval(r) + ("\\*" if id(r) in marked else ""), _plain_pct(r.get("noise_pct")), _threshold(r),
              _roofline(r), _verdict(r)]
             for r in view.rows]
    return opening + _table(header, "l", cells, budget - len(opening) - len(closing)) + closing


def _link(view: _View, context: ReportContext) -> str:
    url = context.dashboard_url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    number = view.report.get("id")
    where = f"comparison #{number}" if number is not None else "this comparison"
    return f"[Open {where} on the roofwatch dashboard]({url})"


# --- tables --------------------------------------------------------------------------------------


def _table(header: Sequence[str], first_align: str, rows: Sequence[Sequence[str]], budget: int,
           text_after: int | None = None) -> str:
    """A Markdown table of as many rows as fit in ``budget`` characters, then how many were left out.

    Columns from ``text_after`` on hold text and are left-aligned."""
    aligns = [":--" if first_align == "l" else "--:"] + ["--:"] * (len(header) - 1)  # numbers read right-aligned
    if text_after is not None:
        aligns[text_after:] = [":--"] * (len(header) - text_after)
    lines = [_row(header), "|" + "|".join(aligns) + "|"]
    if _size(lines, "\n") + MORE_RESERVE > budget:
        return _more(len(rows), "row")
    for index, cells in enumerate(rows):
        line = _row(cells)
        reserve = MORE_RESERVE if index < len(rows) - 1 else 0
        if _size(lines, "\n") + 1 + len(line) + reserve > budget:
            # A blank line ends the table: GFM would otherwise read the next line as one more row.
            return "\n".join(lines) + "\n\n" + _more(len(rows) - index, "row")
        lines.append(line)
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _more(count: int, noun: str) -> str:
    return f"_… {count} more {noun}{'' if count == 1 else 's'} on the dashboard._"


def _delta(row: BenchmarkVerdictRow) -> str:
    text = _pct(row.get("change_pct"))
    return f"**{text}**" if row.get("direction") in ("regression", "improvement") else text


def _confidence(view: _View, row: BenchmarkVerdictRow | None = None) -> float:
    """The level of ``row``'s interval, or (no row) of the intervals every verdict was decided with."""
    level = float(view.report.get("confidence") or CONFIDENCE)
    return float(row.get("confidence") or level) if row is not None else level


def _level(view: _View) -> str:
    return level_text(_confidence(view))


def _levels(view: _View, rows: Sequence[BenchmarkVerdictRow]) -> str:
    """``99.8 %``: the level of these rows' intervals (``99.7 % / 99.8 %`` in the rare case they differ)."""
    return " / ".join(level_text(c) for c in sorted({_confidence(view, r) for r in rows})) or _level(view)


def _interval(row: BenchmarkVerdictRow) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    if not (_finite(low) and _finite(high)) or not _finite(row.get("threshold_pct")):
        return DASH  # too few rounds: the 0..0 placeholder interval would read as certainty
    return f"{low:+.1f} to {high:+.1f} %"


def _threshold(row: BenchmarkVerdictRow) -> str:
    value = row.get("threshold_pct")
    return f"±{value:.1f} %" if _finite(value) else DASH


def _verdict(row: BenchmarkVerdictRow) -> str:
    direction = str(row.get("direction") or "")
    return {"regression": "**regression**", "improvement": "**improvement**", "none": "no change",
            "inconclusive": "inconclusive", "interaction": "interaction"}.get(direction, _cell(direction) or DASH)


def _roofline(row: BenchmarkVerdictRow) -> str:
    base, head = row.get("base_roofline"), row.get("head_roofline")
    if not _finite(base) and not _finite(head):
        return DASH
    return f"{_fraction(base)} → {_fraction(head)}"


def _fraction(value: Any) -> str:
    if not _finite(value):
        return DASH
    pct = value * 100.0
    return f"{pct:.0f} %" if pct >= 10 else f"{pct:.1f} %"


def _value(row: BenchmarkVerdictRow, key: str) -> str:
    value, unit = row.get(key), str(row.get("unit") or "")
    if not _finite(value):
        return DASH
    return seconds(value) if unit == "s" else _cell(quantity(value, _one_line(unit)))


def _pct(value: Any) -> str:
    return f"{value:+.1f} %" if _finite(value) else DASH


def _plain_pct(value: Any) -> str:
    return f"{value:.1f} %" if _finite(value) else DASH


# --- text safety ---------------------------------------------------------------------------------


def _code(text: str, cell: bool = False) -> str:
    """``text`` as an inline code span that no backtick (or, in a table cell, pipe) inside can end."""
    text = _one_line(text) or " "
    fence = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{fence}{pad}{text}{pad}{fence}"
    # GFM splits table cells on | before it parses code spans, even inside one; \| keeps it a pipe.
    return _cell(span) if cell else span


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _block(text: str) -> str:
    """A fenced code block that a ``` inside ``text`` cannot close."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return f"{fence}text\n{text}\n{fence}"


def _longest_run(text: str, char: str) -> int:
    return max((len(m.group(0)) for m in re.finditer(re.escape(char) + "+", text)), default=0)


def _one_line(text: str) -> str:
    return " ".join(CONTROL.sub("", text).split())


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, ending in … when cut (never between a letter and its accent)."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    while cut and unicodedata.combining(text[len(cut)]):
        cut = cut[:-1]  # the cut fell before an accent: drop its base letter too
    return cut.rstrip() + ELLIPSIS


def _short(sha: Any) -> str:
    return str(sha)[:7] if sha else "unknown"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _size(parts: Sequence[str], sep: str = "\n\n") -> int:
    return sum(len(p) for p in parts) + len(sep) * max(len(parts) - 1, 0)


def _name(row: BenchmarkVerdictRow) -> str:
    return str(row.get("benchmark") or "")


def _num(value: Any) -> float:
    return float(value) if _finite(value) else 0.0


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
