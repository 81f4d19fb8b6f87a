"""What a worker is told by its host: broker, data dir, suite limits. Nothing of the service.

A GPU worker runs untrusted code next to the GPU, so it must be able to start with none of
the service's credentials (API token, webhook secret, database URL, GitHub keys). Its settings
are therefore their own class, read from the same ``ROOFWATCH_*`` variables; the service's
``Settings`` extends this class with everything only the service needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from roofwatch.common.limits import MAX_BENCHMARKS

GIB = 1024 ** 3
DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "roofwatch"


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROOFWATCH_", env_file=".env", extra="ignore")

    # Production refuses what only a single trusted user's box may do (see _refuse_unconfined).
    environment: Literal["development", "production"] = "development"
    # The documented escape hatch: a production box with one user who runs only their own code
    # may run suites without the sandbox. Nothing else turns the refusal off.
    allow_unconfined_in_production: bool = False
    data_dir: Path = DEFAULT_DATA_DIR
    broker_url: str | None = None
    # Default wall-time limit for one suite, seconds; a suite's own `timeout` wins.
    suite_timeout: float = 1800.0
    # Captured stdout+stderr kept per suite, bytes; the rest is dropped, not buffered.
    output_limit: int = 1_000_000
    # Log lines as readable text or as one JSON object per line (for a log shipper).
    log_format: Literal["text", "json"] = "text"
    # A worker running as root starts suites as this unprivileged user (the image creates `suite`).
    suite_user: str | None = None
    # Address-space limit for a suite, bytes (RLIMIT_AS). Off by default: CUDA reserves far more
    # virtual memory than it uses, so on GPU hosts a container memory limit is the right tool.
    suite_memory_limit: int | None = None
    # `bubblewrap` confines every suite and setup; `unconfined` runs them as plain child
    # processes and is only for a single trusted user running their own code.
    sandbox: Literal["bubblewrap", "unconfined"] = "bubblewrap"
    bwrap_path: str = "bwrap"
    # CPU seconds per process (RLIMIT_CPU); unset means the wall-clock timeout is the bound.
    suite_cpu_seconds: int | None = None
    # Largest file a suite may write, bytes (RLIMIT_FSIZE): a runaway writer gets EFBIG.
    suite_file_size_limit: int = 4 * GIB
    # Processes of the sandbox's user (RLIMIT_NPROC; a root worker without SUITE_USER is exempt).
    suite_max_processes: int = 4096
    # Size of each in-memory HOME and TMPDIR a suite gets, bytes.
    suite_private_size: int = 2 * GIB
    # pytest options every suite and setup gets as PYTEST_ADDOPTS, before the suite's own. Suites
    # run on the worker's interpreter, so every pytest plugin installed beside roofwatch loads in
    # every suite process: `-p no:NAME` keeps out the ones the host has for other reasons (a
    # heavy one costs seconds per process) and `-p NAME` adds one every suite should have.
    suite_pytest_addopts: str = ""
    # Benchmarks one suite's result file (or one uploaded file) may report; past it the suite errors
    # with this limit named. Each is a measurement held in memory until the run is stored.
    max_benchmarks: int = Field(default=MAX_BENCHMARKS, ge=1)
    # A folder of wheels a suite's own environment is built from, offline (pip --no-index
    # --find-links); unset: from the package index, over the network the build step may use.
    wheel_dir: Path | None = None
    # Hour (UTC) of the nightly full run of every default branch, started by `roofwatch beat`.
    nightly_hour: int = 2

    @model_validator(mode="after")
    def _refuse_unconfined(self) -> WorkerSettings:
        if self.environment == "production" and self.sandbox == "unconfined" and not self.allow_unconfined_in_production:
            raise ValueError(
                "refusing to run suites without the sandbox in production (ROOFWATCH_SANDBOX=unconfined): "
                "suites would see the host's files, processes and network. Use bubblewrap, or set "
                "ROOFWATCH_ALLOW_UNCONFINED_IN_PRODUCTION=1 on a single-user box that runs only its owner's code")
        return self

    @property
    def embedded(self) -> bool:
        """True when no broker is configured: tasks execute in this process."""
        return not self.broker_url

    @property
    def mirrors_dir(self) -> Path:
        return self.data_dir / "mirrors"

    @property
    def worktrees_dir(self) -> Path:
        return self.data_dir / "worktrees"

    @property
    def artifacts_dir(self) -> Path:
        return self.data_dir / "artifacts"


def get_worker_settings() -> WorkerSettings:
    """Read afresh on every call: cheap, and a worker that dropped its secrets sees it at once."""
    return WorkerSettings()
