"""Run every suite a commit declares and pack what happened into an envelope.

Order of events for one commit: mirror → worktree at the SHA → read the suites table →
(setup, cached) → each suite in the sandbox → parse its result file → envelope. Any step
failing becomes data in the envelope; the other suites still run.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from roofwatch.common.device import probe
from roofwatch.common.envelope import CommitRecord, DeviceInfo, Envelope, SuiteResult
from roofwatch.common.errors import CheckoutError, ResultFileError, SuiteConfigError
from roofwatch.common.jobs import Job
from roofwatch.common.limits import SETUP_INPUT_LIMIT
from roofwatch.common.settings import get_worker_settings
from roofwatch.common.tree_files import UnsafePath, read_in
from roofwatch.git import checkout
from roofwatch.result_files.suite_results import parse_benchmark_json, parse_junit
from roofwatch.suite_config.declared import SuiteSpec
from roofwatch.suite_config.external import noted
from roofwatch.workers import bubblewrap, environments, modelled_device, prerequisites, sandbox
from roofwatch.workers.backfill import prepare_suites
from roofwatch.workers.compiled.artifacts_file import failure_summary, parse_compiled_json
from roofwatch.workers.compiled.install import PLUGIN, install_plugin
from roofwatch.workers.memory_suites import with_memory_suites
from roofwatch.workers.plugin_packages import with_plugin_path
from roofwatch.workers.rounds import install as rounds
from roofwatch.workers.rounds.install import Selection

log = logging.getLogger(__name__)

# pytest's exit codes: 0 all passed, 1 some tests failed, 5 none collected; others mean
# pytest itself did not finish (interrupted, internal error, usage error) or a crash.
PYTEST_TESTS_FAILED = 1
PYTEST_NO_TESTS = 5
NOTHING_MEASURED = "no benchmark ran (each one skipped), so pytest-benchmark wrote no JSON: nothing was measured"


class SuiteLimits(environments.BuildLimits, Protocol):
    """What running a suite needs from a job: whose setup cache, how long and loud, which network."""

    @property
    def suite_network(self) -> bool: ...


Progress = Callable[[str, str], None]  # (suite name, event: "start" | status)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def run_job(job: Job, device: DeviceInfo | None = None, progress: Progress | None = None) -> Envelope:
    started = _utcnow()
    device = device or probe()
    data_dir = Path(job.data_dir)

    source = ""

    def envelope(status: str, reason: str = "", suites: list[SuiteResult] | None = None,
                  commit: CommitRecord | None = None) -> Envelope:
        return Envelope(
            run_id=job.run_id, idempotency_key=job.idempotency_key, repository=job.repository,
            sha=job.sha, status=status, reason=reason, commit=commit, device=device,  # type: ignore[arg-type]
            suites=suites or [], started_at=started, finished_at=_utcnow(), suites_source=source,
        )

    try:
        mirror = checkout.ensure_mirror(data_dir / "mirrors", job.clone_url)
        info = checkout.commit_info(mirror, job.sha) if checkout.has_commit(mirror, job.sha) else None
        commit = CommitRecord(**vars(info)) if info else None
        with checkout.worktree(mirror, job.sha, data_dir / "worktrees") as tree:
            try:
                laid, source = prepare_suites(mirror, tree, job.suites_toml, job.suites_label, job.suites_from)
                if laid is None:
                    return envelope("skipped", "no [[tool.roofwatch.suites]] in pyproject.toml "
                                    "(`roofwatch init PATH` writes a suites file for --suites)", commit=commit)
                device = modelled_device.device_for(device, tree, job.suites_toml)
            except SuiteConfigError as exc:
                return envelope("errored", str(exc), commit=commit)
            # Like each process of an A/B, a run's benchmarks run in an order drawn from a seed of the run;
            # unlike an A/B's rounds, no later process reuses its calibrations.
            selection = Selection(None, run_seed(job.run_id))
            results = [noted(run_suite(spec, tree, data_dir, job, progress, selection).model_copy(
                update={"calibration": {}}), files) for spec, files in laid]
    except CheckoutError as exc:
        return envelope("errored", str(exc))

    if any(r.status in ("errored",) for r in results):
        status = "errored"
    elif any(r.status in ("failed", "timeout") for r in results):
        status = "failed"
    else:
        status = "succeeded"
    failed = [r.name for r in results if r.status != "passed"]
    return envelope(status, f"suites not passed: {', '.join(failed)}" if failed else "", with_memory_suites(results),
                    commit)


def run_seed(run_id: int) -> int:
    """The seed of a run's benchmark order (``workers.ab.round_seed`` is an A/B round's)."""
    return int.from_bytes(hashlib.sha256(f"run:{run_id}".encode()).digest()[:4], "big")


def _setup_digest(spec: SuiteSpec, tree: Path) -> str:
    """What a setup's result depends on that roofwatch can see: its command, env and input files."""
    digest = hashlib.sha256(f"{spec.setup}\0{sorted(spec.env.items())}\0".encode())
    for name in spec.setup_inputs:
        content = read_in(tree, name, SETUP_INPUT_LIMIT)
        digest.update(f"{name}\0".encode())
        digest.update(b"<missing>" if content is None else hashlib.sha256(content).digest())
    return digest.hexdigest()[:24]


def _run_setup(spec: SuiteSpec, tree: Path, data_dir: Path, job: SuiteLimits) -> tuple[Path | None, str | None]:
    """Run the suite's setup once per distinct set of inputs: its cache folder, or the error text.

    Setup is the one step that may write to a cache (``ROOFWATCH_SETUP_CACHE``), and may reach
    the network; the suites then read the cache but cannot change it. Each cache belongs to one
    setup digest (command, env, inputs) in one scope (the repository's branches, or one commit),
    so a commit only ever sees a cache that its own setup would have built.
    """
    if not spec.setup:
        return None, None
    try:
        digest = _setup_digest(spec, tree)
    except UnsafePath as exc:
        return None, f"setup_inputs: {exc}"
    scope = setup_cache(data_dir, job.repository) / cache_scope(job, tree)
    cache = scope / digest
    marker = scope / f"{digest}.done"
    if marker.exists():
        return cache, None
    # A setup that failed or was killed half-way leaves nothing a later run would trust.
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="roofwatch-setup-") as scratch:
        confinement = suite_confinement(tree, Path(scratch), cache, setup=True, network=True)
        env = _suite_env(spec, tree, cache, Path(scratch), confinement)
        done = sandbox.run(["/bin/sh", "-c", spec.setup], tree, env, spec.timeout or job.suite_timeout_s,
                           job.output_limit, confinement)
    if done.timed_out or done.exit_code != 0:
        return None, f"setup `{spec.setup}` failed (exit {done.exit_code}):\n{done.output[-2000:]}"
    marker.touch()
    return cache, None


def cache_scope(job: object, tree: Path) -> str:
    """``shared`` for commits of the repository's branches, else a scope of the commit alone.

    The commit comes from the worktree's folder name, which roofwatch chose (``checkout.worktree``),
    not from the tree's own ``.git``, which the commit's code can rewrite.
    """
    if getattr(job, "shared_setup_cache", False):
        return "shared"
    return f"commit-{checkout.worktree_commit(tree)}"


def setup_cache(data_dir: Path, repository: str) -> Path:
    """The repository's own setup caches; the name hashes the full name, so no two repositories share them."""
    digest = hashlib.sha256(repository.encode()).hexdigest()[:16]
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in repository)[:60]
    path = data_dir / "setup-caches" / f"{stem}-{digest}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def run_suite(spec: SuiteSpec, tree: Path, data_dir: Path, job: SuiteLimits,
              progress: Progress | None = None, selection: Selection | None = None,
              compile_cache: Path | None = None) -> SuiteResult:
    """Run one suite. A benchmark suite runs under the rounds plugin when ``selection`` is given (which
    benchmarks, in which order; the order run is recorded). ``compile_cache``: a folder kept across
    the rounds of one commit's A/B side, where Triton and Inductor keep what they compiled."""
    if progress:
        progress(spec.name, "start")
    try:
        result = _setup_and_execute(spec, tree, data_dir, job, selection, compile_cache)
    except Exception as exc:  # noqa: BLE001 - one suite's failure, whatever it is, is that suite's
        log.exception("suite %s: failed inside roofwatch", spec.name)
        result = SuiteResult(name=spec.name, kind=spec.kind, status="errored",
                             reason=f"roofwatch could not run or read this suite: {type(exc).__name__}: {exc}"[:2000])
    if progress:
        progress(spec.name, result.status)
    return result


def _setup_and_execute(spec: SuiteSpec, tree: Path, data_dir: Path, job: SuiteLimits,
                       selection: Selection | None, compile_cache: Path | None) -> SuiteResult:
    if spec.gpu and not (found := prerequisites.gpu()).ok:
        return SuiteResult(name=spec.name, kind=spec.kind, status="errored",
                           reason=f"the suite needs a GPU (gpu = true) and this host has none: {found.found}")
    refusal = sandbox_refusal()
    if refusal:
        return SuiteResult(name=spec.name, kind=spec.kind, status="errored", reason=refusal)
    wheels = get_worker_settings().wheel_dir
    own, environment_error = environments.prepare(
        spec, tree, data_dir, job, cache_scope(job, tree),
        lambda scratch, target: suite_confinement(tree, scratch, target, setup=True, network=True,
                                                  readable=(wheels,) if wheels else ()))
    if environment_error:
        return SuiteResult(name=spec.name, kind=spec.kind, status="errored", reason=environment_error)
    cache, setup_error = _run_setup(spec, tree, data_dir, job)
    if setup_error:
        return SuiteResult(name=spec.name, kind=spec.kind, status="errored", reason=setup_error)
    with tempfile.TemporaryDirectory(prefix="roofwatch-results-") as scratch:
        result = _execute(spec, tree, cache, Path(scratch), job, selection, compile_cache, own)
    return result if own is None else result.model_copy(update={"environment": own.record()})


def sandbox_refusal() -> str | None:
    """Why untrusted code cannot run on this host now, or None when the sandbox works."""
    settings = get_worker_settings()
    if settings.sandbox == "unconfined":
        return None
    try:
        bubblewrap.check(settings.bwrap_path)
    except bubblewrap.SandboxUnavailable as exc:
        return (f"refusing to run untrusted code without a sandbox: {exc}. ROOFWATCH_SANDBOX=unconfined "
                "turns the sandbox off, for a single trusted user running their own code only")
    return None


def suite_confinement(tree: Path, scratch: Path, cache: Path, setup: bool, network: bool,
                      compile_cache: Path | None = None, readable: tuple[Path, ...] = ()) -> sandbox.Confinement:
    """This host's rules for one suite or setup (the worker's settings, not the submitter's).

    The worktree and the scratch folder (result file) are writable; HOME and TMPDIR are empty
    in-memory folders of this run alone; the repository's setup cache (or the environment being
    built) is writable for setup, read-only for suites; a compile cache, where given, is this
    commit's alone and writable; ``readable`` (the commit's own environment, a wheel folder) is
    shown read-only.
    """
    settings = get_worker_settings()
    isolation = None
    kept = (compile_cache,) if compile_cache is not None else ()
    if settings.sandbox == "bubblewrap":
        isolation = bubblewrap.Isolation(
            writable=(tree, scratch, cache) if setup else (tree, scratch, *kept),
            readable=readable if setup else (cache, *readable),
            private=(scratch / "home", scratch / "tmp"),
            network=network, private_size=settings.suite_private_size,
            # Other runs' worktrees and results, should the interpreter's folder hold them.
            hidden=(settings.data_dir.resolve(), Path(tempfile.gettempdir()).resolve()),
        )
    return sandbox.Confinement(
        user=settings.suite_user, memory_limit=settings.suite_memory_limit,
        cpu_seconds=settings.suite_cpu_seconds, file_size_limit=settings.suite_file_size_limit,
        max_processes=settings.suite_max_processes, isolation=isolation, bwrap=settings.bwrap_path,
    )


def _suite_env(spec: SuiteSpec, tree: Path, cache: Path, scratch: Path,
               confinement: sandbox.Confinement, interpreter: Path | None = None) -> dict[str, str]:
    """The scrubbed environment, with a HOME and a temp dir of this run alone.

    Nothing a suite writes outside the worktree survives it, so no run can leave a
    ``usercustomize.py`` or a poisoned cache behind for the next; what setup installs under
    ``$ROOFWATCH_SETUP_CACHE/python`` is importable.
    """
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    sandbox.hand_over([tree, scratch, cache], confinement)
    env = {"HOME": str(home), "TMPDIR": str(tmp), "ROOFWATCH_SETUP_CACHE": str(cache), **spec.env}
    host_addopts = get_worker_settings().suite_pytest_addopts.strip()
    if host_addopts:
        # The host's options first, so a suite's own can still override them.
        env["PYTEST_ADDOPTS"] = f"{host_addopts} {spec.env.get('PYTEST_ADDOPTS', '')}".strip()
    return sandbox.scrubbed_env(env, pythonpath=tree, extra_path=cache / "python", interpreter=interpreter)


def _result_argv(spec: SuiteSpec, scratch: Path) -> tuple[list[str], Path]:
    """The suite's command with the flags that make it write its result file, and that file."""
    if spec.kind == "compile":
        result_file = scratch / "compiled.json"
        return [*spec.argv(), "-p", PLUGIN, f"--roofwatch-compiled={result_file}",
                f"--roofwatch-targets={','.join(spec.targets)}"], result_file
    if spec.kind == "correctness":
        result_file = scratch / "junit.xml"
        # xunit1: the JUnit schema that has room for ``record_property`` (the measured errors roofwatch
        # stores). Under pytest's default, xunit2, every test that records one prints a warning
        # into the output a failing suite shows.
        return [*spec.argv(), f"--junitxml={result_file}", "-o", "junit_family=xunit1"], result_file
    result_file = scratch / "benchmark.json"
    return [*spec.argv(), f"--benchmark-json={result_file}"], result_file


def _execute(spec: SuiteSpec, tree: Path, cache: Path | None, scratch: Path, job: SuiteLimits,
             selection: Selection | None = None, compile_cache: Path | None = None,
             own: environments.Environment | None = None) -> SuiteResult:
    """Run the suite; ``cache`` is what its own setup built (None: it has no setup, so an empty folder);
    ``own`` the commit's own environment, whose ``python`` the command then means."""
    argv, result_file = _result_argv(spec, scratch)
    timeout = spec.timeout or job.suite_timeout_s
    if cache is None:
        cache = scratch / "setup-cache"
        cache.mkdir()
    confinement = suite_confinement(tree, scratch, cache, setup=False, network=job.suite_network,
                                    compile_cache=compile_cache, readable=(own.path,) if own else ())
    env = _suite_env(spec, tree, cache, scratch, confinement, own.path / "bin" if own else None)
    if compile_cache is not None:
        sandbox.hand_over([compile_cache], confinement)
        env = {**env, "TRITON_CACHE_DIR": str(compile_cache / "triton"),
               "TORCHINDUCTOR_CACHE_DIR": str(compile_cache / "inductor")}
    if spec.kind == "compile":
        env = with_plugin_path(env, install_plugin(scratch))
    record: Path | None = None
    if spec.kind == "benchmark":
        # Every benchmark suite runs under the rounds plugin: it records the order run and what each
        # benchmark ran; an A/B's selection also says which benchmarks, in which seeded order.
        extra, record = rounds.plugin_args(selection or Selection(), scratch, tree)
        argv = [*argv, *extra]
        env = with_plugin_path(env, rounds.install_plugin(scratch))
    done = sandbox.run(argv, tree, env, timeout, job.output_limit, confinement)
    recorded = rounds.read_record(record) if record is not None else rounds.Recorded([], {}, {})
    result = SuiteResult(name=spec.name, kind=spec.kind, status="errored", exit_code=done.exit_code,
                         duration_s=done.duration_s, output_tail=_tail(done),
                         order_seed=selection.seed if selection is not None else None,
                         selected=sorted(selection.names) if selection and selection.names is not None else None,
                         order=recorded.order, calibration=recorded.calibration)
    if done.timed_out:
        return result.model_copy(update={
            "status": "timeout", "reason": f"timed out after {timeout:.0f} s and was killed"})
    # Reading a benchmark JSON counts against the suite's timeout: a file that would take longer
    # to read than the suite had left errors the suite instead of holding the run. (The other
    # result files are read whole, within RESULT_FILE_LIMIT, in time linear in their size.)
    budget = max(0.0, timeout - done.duration_s)
    try:
        if spec.kind == "correctness":
            result.outcomes = parse_junit(result_file)
        elif spec.kind == "compile":
            result.artifacts = parse_compiled_json(result_file)
        elif done.exit_code == 0 and not result_file.exists():
            # pytest-benchmark writes no file when no benchmark ran (every one skipped: a GPU-only
            # benchmark on a CPU host, one not yet written): a suite that passed and measured nothing.
            return result.model_copy(update={"status": "passed", "reason": NOTHING_MEASURED})
        else:
            result.measurements = [m.model_copy(update={"ran": recorded.ran[m.name]}) if m.name in recorded.ran else m
                                   for m in parse_benchmark_json(result_file, deadline=time.monotonic() + budget,
                                                                 budget_s=budget)]
    except ResultFileError as exc:
        reason = str(exc)
        if done.exit_code not in (0, None):
            reason = f"{_exit_reason(done.exit_code)}; {reason}"
        return result.model_copy(update={"reason": reason})

    if done.exit_code == 0 and spec.kind == "compile" and failure_summary(result.artifacts):
        result.status = "failed"
        result.reason = failure_summary(result.artifacts)
    elif done.exit_code == 0:
        result.status = "passed"
    elif done.exit_code == PYTEST_TESTS_FAILED:
        failed = sum(o.outcome in ("failed", "error") for o in result.outcomes)
        result.status = "failed"
        result.reason = f"{failed} test(s) failed" if failed else "the suite reported failures"
    elif done.exit_code == PYTEST_NO_TESTS:
        result.reason = "no tests were collected"
    else:
        result.reason = _exit_reason(done.exit_code)
    return result


OUTPUT_TAIL_CHARS = 20_000


def _tail(done: sandbox.Completed) -> str:
    """The end of a suite's output, saying how much was left out, so a flood is visible as one."""
    total_dropped = done.dropped_bytes + max(0, len(done.output) - OUTPUT_TAIL_CHARS)
    note = f"[... {total_dropped} bytes of output dropped ...]\n" if total_dropped else ""
    return note + done.output[-OUTPUT_TAIL_CHARS:]


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the command could not be started"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"crashed ({name})"
    return f"exited with status {code}"
