"""The ``roofwatch`` command line (Typer + Rich)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from roofwatch.common.redaction import redact
from roofwatch.service.cli import suites as suites_command
from roofwatch.service.cli import upload as upload_command
from roofwatch.service.cli.consoles import inert, inert_lines, make_console
from roofwatch.service.cli.database import prepare_database
from roofwatch.service.core.config import get_settings

app = typer.Typer(help="Performance-regression CI for GPU kernels.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
repo_app = typer.Typer(help="Register repositories.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
demo_app = typer.Typer(help="The demo kernel repository with planted changes.", no_args_is_help=True)
token_app = typer.Typer(help="Per-repository upload tokens (they upload results, nothing else).", no_args_is_help=True)
app.add_typer(repo_app, name="repo")
app.add_typer(token_app, name="token")
app.add_typer(db_app, name="db")
app.add_typer(demo_app, name="demo")
console = make_console()
err = make_console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    # The message may quote a commit, a suite or a URL: never markup, never a credential.
    err.print(f"[bold red]error:[/] {inert_lines(redact(message))}")
    raise typer.Exit(code)


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply migrations up to REVISION."""
    from roofwatch.service.core.db import migrate

    migrate(revision=revision)
    console.print(f"database at [bold]{revision}[/]")


@repo_app.command("add")
def repo_add(
    full_name: Annotated[str, typer.Argument(help="OWNER/NAME as GitHub spells it")],
    clone_url: Annotated[str, typer.Option("--clone-url", help="URL, mirror or local path to clone from")],
    default_branch: Annotated[str, typer.Option("--default-branch")] = "main",
    trust_policy: Annotated[str, typer.Option(
        "--trust-policy", help="maintainers-only: fork / outside pull requests wait for approval; everyone")
    ] = "maintainers-only",
    suite_network: Annotated[bool | None, typer.Option(
        "--suite-network/--no-suite-network", help="let this repository's suites reach the network (off by default)")
    ] = None,
    suites: Annotated[Path | None, typer.Option(
        "--suites", help="TOML with [[tool.roofwatch.suites]] tables, kept in roofwatch instead of the repository")] = None,
) -> None:
    """Register a repository; webhooks for OWNER/NAME then clone from CLONE_URL."""
    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        registered = maintenance.add_repository(full_name, clone_url, default_branch, trust_policy, suite_network,
                                                suites)
    except (RoofwatchError, OSError) as exc:
        _fail(str(exc))
    repository = registered.repository
    console.print(f"registered [bold]{escape(repository.full_name)}[/] → {escape(redact(repository.clone_url))}")
    if registered.suites is not None:
        suites_command.say_stored(console, repository.full_name, registered.suites)


repo_app.command("set-suites")(suites_command.set_suites_command)


@token_app.command("add")
def token_add(
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME the token uploads results for")],
    label: Annotated[str, typer.Option("--label", help="what the token is for, e.g. the CI job")] = "",
) -> None:
    """Make an upload token for REPO and print it once (only its hash is kept)."""
    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        row, token, repository = maintenance.issue_token(repo, label)
    except RoofwatchError as exc:
        _fail(str(exc))
    err.print(f"upload token {row.id} for {escape(repository.full_name)} (shown once; keep it in your CI's secrets):")
    # The token alone on stdout, so `TOKEN=$(roofwatch token add --repo R)` works.
    print(token)


@token_app.command("list")
def token_list(repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME")]) -> None:
    """The upload tokens of REPO (ids, labels, dates; never the tokens)."""
    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        rows = maintenance.tokens(repo)
    except RoofwatchError as exc:
        _fail(str(exc))
    table = Table("id", "label", "created", "revoked")
    for row in rows:
        table.add_row(str(row.id), escape(row.label), f"{row.created_at:%Y-%m-%d %H:%M}",
                      f"{row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "")
    console.print(table)


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[int, typer.Argument(help="the id `roofwatch token list` shows")],
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME")],
) -> None:
    """Revoke an upload token: requests with it get 401 from now on."""
    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        revoked = maintenance.revoke_token(repo, token_id)
    except RoofwatchError as exc:
        _fail(str(exc))
    if not revoked:
        _fail(f"{repo} has no live upload token {token_id}")
    console.print(f"upload token {token_id} revoked")


@demo_app.command("init")
def demo_init(
    directory: Annotated[str, typer.Argument(help="where to write it (absent or empty)")],
) -> None:
    """Write a small kernel repository whose history holds a slowdown, a bug fixed later, a speedup and a PR."""
    from pathlib import Path

    from roofwatch.service.demo.command import init_demo

    raise typer.Exit(init_demo(Path(directory), console))


@app.command()
def run(
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME, local path or clone URL")],
    rev: Annotated[list[str] | None, typer.Option("--rev", help="commit to measure (repeatable)")] = None,
    range_: Annotated[str | None, typer.Option("--range", help="A..B: every first-parent commit after A up to B")] = None,
    last: Annotated[int | None, typer.Option("--last", min=1, help="the last N commits up to --rev (default HEAD)")] = None,
    force: Annotated[bool, typer.Option("--force", help="measure again commits already measured on this device")] = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="with a broker: wait for the runs")] = True,
    device_class: Annotated[str | None, typer.Option("--device-class", help="with a broker: the device queue to use")] = None,
    suites: Annotated[Path | None, typer.Option(
        "--suites", help="one-off: suites from this TOML file (same tables as pyproject.toml), not stored")] = None,
    suites_from: Annotated[str | None, typer.Option(
        "--suites-from", help="backfill: every suite with suite_paths runs with those paths taken from REF")] = None,
    format_: Annotated[str, typer.Option("--format", help="table | json (progress then goes to stderr)")] = "table",
    calibrate_first: Annotated[bool, typer.Option(
        "--calibrate/--no-calibrate", envvar="ROOFWATCH_CALIBRATE",
        help="measure the device's roofs first if this host never has (env ROOFWATCH_CALIBRATE=0 to skip)")] = True,
) -> None:
    """Check out and run the suites on each commit, store, analyse, print a summary."""
    from roofwatch.service.cli.run import RunRequest, execute, write_json

    if format_ not in ("table", "json"):
        _fail(f"--format must be table or json, not {format_!r}")
    prepare_database()
    if calibrate_first and get_settings().embedded:
        from roofwatch.common.device import probe
        from roofwatch.service.cli.calibration import calibrate_first_time, modelled_device_of

        model = modelled_device_of(repo)
        if model is None:
            calibrate_first_time(probe(), err if format_ == "json" else console)
        else:  # its runs are held to the roofs it declares: this host's would go unused
            (err if format_ == "json" else console).print(
                f"{inert(repo)} declares the device its kernels are timed on ({inert(model)}): no calibration")
    request = RunRequest(repo=repo, revs=rev or [], range_spec=range_, last=last, force=force,
                         wait=wait, device_class=device_class, suites_file=suites, suites_from=suites_from)
    code = execute(request, err, report=write_json) if format_ == "json" else execute(request, console)
    raise typer.Exit(code)


@app.command()
def serve(
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
) -> None:
    """API, dashboard and webhook endpoint."""
    import socket

    import uvicorn

    from roofwatch.service.api.app import create_app
    from roofwatch.workers.logs import configure_logging

    if not 0 < port < 65536:
        _fail(f"--port must be between 1 and 65535, not {port}")
    try:  # before anything is printed: a busy port is one line, not a startup that then fails
        probe_socket = socket.create_server((host, port))
    except OSError as exc:
        _fail(f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server there? try --port)")
    probe_socket.close()
    configure_logging(get_settings().log_format, "info")
    prepare_database()
    console.print(f"roofwatch dashboard on [link]http://{host}:{port}/[/link]")
    # log_config=None: uvicorn's lines go through our handlers (text or JSON), not its own.
    uvicorn.run(create_app(), host=host, port=port, log_level="info", log_config=None)


@app.command()
def worker(
    gpu: Annotated[int | None, typer.Option("--gpu", help="GPU index to pin (CUDA_VISIBLE_DEVICES)")] = None,
    queues: Annotated[str | None, typer.Option("--queues", help="comma-separated queues")] = None,
    name: Annotated[str | None, typer.Option("--name", help="stable worker name (default gpuN, cpu or main)")] = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "info",
) -> None:
    """A Celery worker: this machine's device queue plus `cpu` and `ingest` by default."""
    from pydantic import ValidationError

    from roofwatch.common.settings import get_worker_settings

    # A GPU worker reads only its own settings: it must start without the service's credentials.
    # Checked before the Celery app (which reads them too) is imported.
    try:
        settings = get_worker_settings()
    except ValidationError as exc:
        _fail("; ".join(str(error["msg"]).removeprefix("Value error, ") for error in exc.errors()))
    from roofwatch.workers.logs import install_celery_logging
    from roofwatch.workers.worker import plan, start_worker

    if settings.embedded:
        _fail("a worker needs ROOFWATCH_BROKER_URL (without a broker, `roofwatch run` executes in-process)")
    install_celery_logging(settings.log_format, loglevel)
    chosen = plan(gpu, queues, name)
    if not chosen.gpu_only:
        get_settings()  # ingest and cpu work use the database: the service's checks apply
    if settings.sandbox == "unconfined":
        err.print("[bold yellow]warning:[/] ROOFWATCH_SANDBOX=unconfined: suites run without the sandbox and see "
                  "this host's files, processes and network; only for a single trusted user's own code")
    console.print(f"worker [bold]{chosen.node}[/] for [bold]{chosen.device_class}[/] on queues {','.join(chosen.queues)}")
    start_worker(chosen, loglevel)


@app.command()
def beat(loglevel: Annotated[str, typer.Option("--loglevel")] = "info") -> None:
    """Celery beat: GitHub report retries, recovery of work held by dead workers, nightly runs."""
    from roofwatch.workers.logs import install_celery_logging
    from roofwatch.workers.worker import start_beat

    if get_settings().embedded:
        _fail("beat needs ROOFWATCH_BROKER_URL (the embedded `roofwatch serve` retries reports itself)")
    install_celery_logging(get_settings().log_format, loglevel)
    start_beat(loglevel)


@app.command()
def calibrate(
    gpu: Annotated[int | None, typer.Option("--gpu", help="CUDA device index (default: GPU 0, else the CPU)")] = None,
    store: Annotated[bool, typer.Option("--store/--no-store", help="store the peaks on this device's record")] = True,
) -> None:
    """Measure this device's roofs: DRAM and cache bandwidths, matmul FLOP/s per dtype.

    Stored on the device's record (embedded: in-process; with a broker: through the ingest
    queue) and cached for `roofwatch worker` on this host.
    """
    from roofwatch.common.device import probe
    from roofwatch.service.cli.calibration import measure, show
    from roofwatch.service.cli.calibration import store as store_peaks
    from roofwatch.workers.calibrate import CalibrationError

    info = probe(gpu or 0)
    try:
        calibration = measure(info, gpu, console)
    except CalibrationError as exc:
        _fail(str(exc))
    show(console, info, calibration)
    if store:
        store_peaks(console, info, calibration)


@app.command()
def regressions(
    repo: Annotated[str | None, typer.Option("--repo", help="OWNER/NAME, local path or clone URL, as `run` takes it")] = None,
    format_: Annotated[str, typer.Option("--format", help="table | json")] = "table",
) -> None:
    """The detected changes (the id is what `roofwatch triage ID` takes)."""
    if format_ not in ("table", "json"):
        _fail(f"--format must be table or json, not {format_!r}")
    from roofwatch.service.analysis.failure_groups import parametrizations_text
    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.core.units import bounds_text
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        rows = maintenance.changes(repo)
    except RoofwatchError as exc:
        _fail(str(exc))
    if format_ == "json":
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    # Said in the metric the dashboard plots (bandwidth, throughput or time), with its sign: the
    # way the benchmark's line moved.
    table = Table("id", "benchmark / test", "suite", "kind", "commit", "change", "interval", "p", "state")
    for row in rows:
        commit = (row["commit"] or f"{row['range'] or '?'}")[:19]
        pct = "" if row["metric_change_pct"] is None else \
            f"{row['metric']} {row['metric_change_pct']:+.1f} %".replace("-", "−")
        interval = bounds_text(*row["metric_ci"]) if row["metric_ci"] else ""
        p = "" if row["p_value"] is None else f"{row['p_value']:.2g}"
        # A correctness change of several parametrizations is one row: which ones, on a line of its own.
        tests = parametrizations_text(row["tests"])
        name = inert(row["benchmark"]) + (f"\n[dim]{inert(tests)}[/]" if tests else "")
        table.add_row(str(row["id"]), name, inert(row["suite"]), inert(row["kind"]), inert(commit),
                      pct, interval, p, inert(row["state"]))
    console.print(table if rows else "no changes detected")
    for row in rows:
        if row.get("why"):
            console.print(f"#{row['id']} {inert(row['benchmark'])}: why: {inert(row['why'])}", highlight=False)


@app.command()
def artifacts(
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME or the local path that was run")],
    commit: Annotated[str, typer.Option("--commit", help="a SHA or a unique prefix of one")],
    format_: Annotated[str, typer.Option("--format", help="table | json")] = "table",
) -> None:
    """The Triton kernels compiled for a commit: registers, spills, shared memory, SASS mix and hash per target."""
    from roofwatch.common.errors import RoofwatchError
    from roofwatch.service.cli.artifacts import render
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        sha, rows = maintenance.artifacts_of(repo, commit)
    except RoofwatchError as exc:
        _fail(str(exc))
    if format_ == "json":
        sys.stdout.write(json.dumps(maintenance.artifact_listing(sha, rows), indent=2) + "\n")
    else:
        render(console, sha, rows)


@app.command()
def compare(
    base: Annotated[str, typer.Argument(help="base revision (e.g. the merge-base)")],
    head: Annotated[str, typer.Argument(help="head revision")],
    repo: Annotated[str, typer.Option("--repo", help="registered OWNER/NAME, local path or clone URL")] = ".",
    min_rounds: Annotated[int | None, typer.Option("--min-rounds", min=3, help="rounds before a verdict")] = None,
    max_rounds: Annotated[int | None, typer.Option(
        "--max-rounds", min=3, help="rounds to measure an undecided benchmark up to, even one its first rounds "
                                    "project to need more")] = None,
    format_: Annotated[str, typer.Option("--format", help="table | json")] = "table",
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="with a broker: wait for the verdict")] = True,
    suites: Annotated[Path | None, typer.Option(
        "--suites", help="one-off: suites from this TOML file (same tables as pyproject.toml), not stored")] = None,
    suites_from: Annotated[str | None, typer.Option(
        "--suites-from", help="backfill: every suite with suite_paths runs with those paths taken from REF")] = None,
    accept_missing: Annotated[bool, typer.Option(
        "--accept-missing", help="accept benchmarks of BASE that HEAD no longer reports (recorded with your name)")] = False,
) -> None:
    """Interleaved A/B of BASE and HEAD on this machine's device; a verdict per benchmark.

    BASE judges both sides: its suites, min_effect and renames (or the stored config's) measure
    HEAD too; what HEAD's own [tool.roofwatch] would change is listed. Exit status: 0 no change or
    improvement, 1 regression, new test failure or a benchmark of BASE missing on HEAD (unless
    accepted), 3 inconclusive at the round cap, 2 bad input or a comparison that could not run.
    """
    from roofwatch.service.cli.compare import CompareRequest, execute, render
    from roofwatch.service.flows.manual_compare import Asked

    prepare_database()
    out = err if format_ == "json" else console
    asked = Asked(repo, base, head, min_rounds, max_rounds, suites, suites_from)
    code, data = execute(CompareRequest(asked, wait, accept_missing), out)
    if data is not None:
        if format_ == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            render(console, data)
    raise typer.Exit(code)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def verdict(
    ctx: typer.Context,
    min_effect: Annotated[str, typer.Option("--min-effect", help="the smallest change that counts, e.g. 2%")] = "2%",
    format_: Annotated[str, typer.Option("--format", help="table | json")] = "table",
    results_format: Annotated[str, typer.Option(
        "--results-format", help="auto | pytest-benchmark | google-benchmark | nvbench | asv")] = "auto",
) -> None:
    """The A/B verdict on result files you already have: --base B1 B2 … --head H1 H2 …

    File i of each side is round i (one fresh process each), paired in the order given; the
    decision is the service's own. Exit status: 0 no regression, 1 regression, 3 inconclusive,
    2 bad input.
    """
    from roofwatch.service.cli import exit_codes
    from roofwatch.service.cli.compare import render
    from roofwatch.service.cli.verdict import decide, split_sides
    from roofwatch.service.core.errors import RoofwatchError

    if format_ not in ("table", "json"):
        _fail(f"unknown --format {format_!r}: table or json")
    try:
        base, head = split_sides(list(ctx.args))
        data = decide(base, head, min_effect, results_format)
    except RoofwatchError as exc:
        _fail(str(exc))
    if format_ == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        render(console, data)
    raise typer.Exit(exit_codes.of_verdict(data["verdict"]))


@app.command()
def changepoints(
    csv_file: Annotated[str, typer.Option("--csv", help="columns: commit, then one number per benchmark")],
    format_: Annotated[str, typer.Option("--format", help="table | json")] = "table",
    min_effect: Annotated[str, typer.Option(
        "--min-effect", help="the smallest change reported, e.g. 2% (0.1% at the least)")] = "2%",
) -> None:
    """Change points in an external history, one row per commit, oldest first."""
    from pathlib import Path

    from roofwatch.service.cli.changepoints import CsvHistoryError, find, read_history
    from roofwatch.suite_config.min_effect import parse_min_effect

    try:
        found = find(read_history(Path(csv_file)), parse_min_effect(min_effect))
    except (CsvHistoryError, ValueError) as exc:
        _fail(str(exc))
    if format_ == "json":
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
        return
    table = Table("series", "index", "commit", "before", "after", "Δ %", "p", "shift")
    for name, points in found.items():
        for cp in points:
            table.add_row(inert(name), str(cp["index"]), inert(str(cp["commit"])[:12]), f"{cp['before']:.4g}",
                          f"{cp['after']:.4g}", f"{cp['change_pct']:+.2f}", f"{cp['p_value']:.2g}", cp["shift"])
    console.print(table if table.row_count else "no change points")


@app.command()
def triage(
    change_id: Annotated[int, typer.Argument(help="the change's id (see `roofwatch regressions`)")],
    state: Annotated[str, typer.Argument(help="new | acknowledged | expected | invalid | fixed")],
    note: Annotated[str, typer.Option("--note", help="why, for the change's history")] = "",
    repo: Annotated[str | None, typer.Option(
        "--repo", help="OWNER/NAME, local path or clone URL: the change must belong to it")] = None,
) -> None:
    """Set a change's triage state."""
    import getpass

    from roofwatch.service.core.errors import RoofwatchError
    from roofwatch.service.flows import maintenance

    prepare_database()
    try:
        change = maintenance.set_triage(change_id, state, note, getpass.getuser(), repo)
    except RoofwatchError as exc:
        _fail(str(exc))
    console.print(f"change {change.id} is now [bold]{change.state}[/]")


app.command("upload")(upload_command.upload)


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="the repository's working tree")] = Path("."),
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="where to write the suites file (default: roofwatch-suites.toml in PATH)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing suites file")] = False,
    triton_interpret: Annotated[bool | None, typer.Option(
        "--triton-interpret/--no-triton-interpret",
        help="run a kernel repository's Triton kernels in the interpreter (default: when this machine has no GPU)",
        show_default=False)] = None,
) -> None:
    """Write a suites file for a repository that has none: its pytest-benchmark tests, src/ layout and extras;
    for a Triton kernel repository, the tests of its kernels a CPU can run and a kernel_benchmark file."""
    from roofwatch.service.cli.consoles import make_console as plain_console
    from roofwatch.suite_config.external import parse_suites_file
    from roofwatch.workers import prerequisites
    from roofwatch.workers.benchmark_template import BENCHMARK_FILE, benchmark_file
    from roofwatch.workers.suite_discovery import discover, suites_toml

    root = path.expanduser().resolve()
    if not root.is_dir():
        _fail(f"{path} is not a folder")
    found = discover(root)
    kernels = found.kernels
    if not found.benchmark_dirs and not found.test_dirs and not kernels.tests:
        for why in found.skipped:
            err.print(f"  [yellow]left out: {inert(why)}[/]")
        _fail(f"no pytest-benchmark tests (a test taking the `benchmark` fixture) and no tests/ folder under {root}")
    target = output or root / "roofwatch-suites.toml"
    if target.exists() and not force:
        _fail(f"{target} exists; --force overwrites it")
    interpret = False
    if kernels.modules:
        interpret = not prerequisites.gpu().ok if triton_interpret is None else triton_interpret
    generated: str | None = None
    tested = [module for module in kernels.modules if module.name in kernels.tested] or kernels.modules
    tested = [module for module in tested if "backends" not in module.name.split(".")[:-1]] or tested
    if kernels.modules and not found.benchmark_dirs:
        bench = root / BENCHMARK_FILE
        if bench.exists() and not force:
            _fail(f"{bench} exists; --force overwrites it")
        bench.parent.mkdir(exist_ok=True)
        bench.write_text(benchmark_file(root.name, tested), encoding="utf-8")
        generated = BENCHMARK_FILE
    text = suites_toml(found, interpret=interpret, generated_benchmarks=generated)
    parse_suites_file(text)  # what init writes, run and repo add read
    target.write_text(text, encoding="utf-8")
    plain = plain_console()
    plain.print(escape(text), highlight=False)
    found_lines = [f"benchmarks: {', '.join(found.benchmark_dirs) or 'none'} ({found.benchmark_files} file(s))",
                   f"tests: {', '.join(found.test_dirs) or 'none'}",
                   "layout: src/ (env PYTHONPATH=src)" if found.src_layout else "layout: flat",
                   "environment: " + (f"the commit's own, project .{'[' + ','.join(found.extras) + ']' if found.extras else ''}"
                                      f" (for {', '.join(found.install)})" if found.install else "roofwatch's interpreter")]
    if kernels.modules:
        found_lines += [f"Triton kernels: {len(kernels.modules)} module(s); their tests a CPU can run: {len(kernels.tests)} "
                        f"file(s) ({len(kernels.cuda_only)} CUDA-only and {kernels.other_tests} other test file(s) left out)",
                        "Triton interpreter: " + ("TRITON_INTERPRET=1 (no GPU here) with --roofwatch-triton-compat"
                                                  if interpret else "off (kernels are compiled for the GPU)")]
    if generated:
        found_lines.append(f"wrote {generated}: {min(len(tested), 200)} kernel_benchmark(s) that skip until their "
                           "call is written (TODO(roofwatch)); FLOPs and bytes too, for the roofline")
    for line in found_lines:
        console.print(f"  {escape(line)}")
    for name in found.unresolved:
        console.print(f"  [yellow]imported but neither installed nor declared: {escape(name)}[/]")
    for why in found.skipped:
        console.print(f"  [yellow]left out: {inert(why)}[/]")
    name = f"local/{root.name}"
    commit_first = f"  git -C {escape(str(root))} add {generated} && git -C {escape(str(root))} commit -m 'roofwatch benchmarks'  " \
        "(suites run what each commit holds)\n" if generated else ""
    console.print(f"wrote {escape(str(target))}\nnext (stored suites serve every run, confirmation A/Bs included):\n"
                  f"{commit_first}"
                  f"  roofwatch repo add {escape(name)} --clone-url {escape(str(root))} --suites {escape(str(target))}\n"
                  f"  roofwatch run --repo {escape(name)} --last 5")


@app.command()
def doctor() -> None:
    """What this machine has and lacks to measure, for each mode, with the command that fixes each gap."""
    from roofwatch.workers import prerequisites

    settings = get_settings()
    checks = [*prerequisites.for_running(settings), prerequisites.gpu(), prerequisites.nvml()]
    table = Table("", "prerequisite", "found", "fix")
    for check in checks:
        table.add_row("[green]ok[/]" if check.ok else ("[red]missing[/]" if check.blocking else "[yellow]absent[/]"),
                      check.name, escape(check.found), escape(check.fix))
    console.print(table)
    have = {check.name.split(" ")[0]: check.ok for check in checks}
    can_run = not prerequisites.missing(checks)
    modes = [
        ("roofwatch run / compare (measure commits here)", can_run,
         "" if can_run else "needs git and the sandbox above"),
        ("GPU kernels timed on a GPU, roofline against its roofs", can_run and have["GPU"],
         "" if have["GPU"] else "no GPU: kernels are timed on the CPU / Triton interpreter"),
        ("GPU clocks, temperature and throttling per sample", have["NVML"], "" if have["NVML"] else "needs NVML"),
        ("roofwatch upload / serve / regressions (no measuring)", True, ""),
        ("distributed mode (workers on a broker)", bool(settings.broker_url),
         "" if settings.broker_url else "set ROOFWATCH_BROKER_URL (embedded mode needs none)"),
    ]
    for mode, ok, why in modes:
        console.print(f"{'[green]yes[/]' if ok else '[yellow]no[/] '}  {mode}" + (f"  [dim]({why})[/]" if why else ""))
    raise typer.Exit(0 if can_run else 1)


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    app()
