"""``roofwatch upload``: results a team's own CI measured, sent in from that CI."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from roofwatch.common.redaction import redact
from roofwatch.result_files.uploads import FORMATS
from roofwatch.service.cli import exit_codes
from roofwatch.service.cli.consoles import inert, inert_lines

console = Console()
err = Console(stderr=True)


def upload(
    file: Annotated[Path, typer.Argument(help="the result file your CI wrote")],
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME")],
    commit: Annotated[str, typer.Option("--commit", help="the SHA the results were measured at")],
    format_: Annotated[str, typer.Option("--format", help=f"auto | {' | '.join(FORMATS)}")] = "auto",
    device_class: Annotated[str | None, typer.Option(
        "--device-class", help="the GPU the results were measured on, e.g. 'NVIDIA H100 80GB HBM3'")] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="suite name to store them under (default: the format)")] = None,
    pr: Annotated[int | None, typer.Option("--pr", help="pull request number: compare with --base and report on GitHub")] = None,
    base: Annotated[str | None, typer.Option("--base", help="with --pr: the base commit, uploaded before")] = None,
    output: Annotated[str, typer.Option("--output", help="table | json")] = "table",
) -> None:
    """Store results measured elsewhere; they are analysed like roofwatch's own runs.

    Exit status: 0 stored (or already stored) and, with ``--pr``, no change or an improvement; 1 the pull
    request regressed or lacks a benchmark of the base nobody accepted (its check is not green); 3 its verdict
    is inconclusive; 2 bad input (unknown format, unreadable file, unknown repository or SHA, device mismatch).
    """
    if output not in ("table", "json"):
        err.print(f"[bold red]error:[/] --output must be table or json, not {output!r}")
        raise typer.Exit(2)
    from roofwatch.common.errors import RoofwatchError
    from roofwatch.service.cli.database import prepare_database
    from roofwatch.service.flows.upload import UploadRequest, upload_and_report

    prepare_database()
    try:
        outcome = upload_and_report(UploadRequest(repo, commit, file, format_, device_class, suite, pr, base))
    except RoofwatchError as exc:
        err.print(f"[bold red]error:[/] {inert_lines(redact(str(exc)))}")
        raise typer.Exit(2) from exc
    if output == "json":
        sys.stdout.write(json.dumps(asdict(outcome), indent=2) + "\n")
    else:
        what = "stored" if outcome.created else "already stored (same file, same commit)"
        console.print(f"run {outcome.run_id}: {outcome.measurements} {outcome.format} result(s) for "
                      f"{inert(outcome.repository)}@{outcome.sha[:12]} on {inert(outcome.device_class)} {what}")
        for line in outcome.skipped:
            console.print(f"  left out: {inert(line)}")
        for line in outcome.unconfirmed:
            console.print(f"  [yellow]{inert(line)}[/]: not confirmed (uploaded, not re-measured; A/B and bisection need a runner)")
        if outcome.comparison_id is not None:
            console.print(f"pull request #{pr}: {inert(outcome.verdict)} (comparison {outcome.comparison_id})")
    # as `roofwatch compare` exits for the same verdict: a check that is not green fails the CI step
    raise typer.Exit(exit_codes.of_verdict(outcome.verdict) if outcome.verdict is not None else 0)
