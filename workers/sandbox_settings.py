"""How this host confines suites: read by the worker from ``ROOFWATCH_*`` variables.

These are the operator's rules for the machine, never the submitter's: nothing in a
repository's ``pyproject.toml`` can loosen them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic_settings import BaseSettings, SettingsConfigDict

GIB = 1024 ** 3


class SandboxSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROOFWATCH_", env_file=".env", extra="ignore")

    # `bubblewrap` confines every suite and setup; `unconfined` runs them as plain child
    # processes and is only for a single trusted user running their own code.
    sandbox: Literal["bubblewrap", "unconfined"] = "bubblewrap"
    bwrap_path: str = "bwrap"
    # A worker running as root starts the sandbox as this unprivileged user (the image's `suite`).
    suite_user: str | None = None
    # Address-space limit, bytes (RLIMIT_AS). Off by default: CUDA reserves far more virtual
    # memory than it uses, so on GPU hosts a container memory limit is the right tool.
    suite_memory_limit: int | None = None
    # CPU seconds per process (RLIMIT_CPU); unset means the wall-clock timeout is the bound.
    suite_cpu_seconds: int | None = None
    # Largest file a suite may write, bytes (RLIMIT_FSIZE): a runaway writer gets EFBIG.
    suite_file_size_limit: int = 4 * GIB
    # Processes of the sandbox's user (RLIMIT_NPROC; not enforced for a root worker without SUITE_USER).
    suite_max_processes: int = 4096
    # Size of the in-memory HOME and TMPDIR each run gets, bytes each.
    suite_private_size: int = 2 * GIB


@lru_cache
def get_sandbox_settings() -> SandboxSettings:
    return SandboxSettings()
