"""The ``[[tool.roofwatch.suites]]`` table of a checked-out commit's ``pyproject.toml``."""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

from roofwatch.common.errors import SuiteConfigError
from roofwatch.workers.compiled.targets import DEFAULT_TARGETS, UnknownTarget, parse_targets
from roofwatch.workers.min_effect import parse_min_effect
from roofwatch.workers.suite_env import check_env
from roofwatch.workers.tree_files import UnsafePath, read_in, relative_parts

PYPROJECT_LIMIT = 1024 * 1024
T = TypeVar("T")


class SuiteSpec(BaseModel):
    name: str = Field(min_length=1)
    kind: Literal["correctness", "benchmark", "compile"]
    command: str | list[str]
    timeout: float | None = Field(default=None, gt=0)
    setup: str | None = None
    # Files whose content keys the setup cache: setup reruns only when they change.
    setup_inputs: list[str] = Field(default_factory=lambda: ["pyproject.toml"])
    env: dict[str, str] = Field(default_factory=dict)
    # Backfill: take ``suite_paths`` from this ref and lay them over each measured commit's tree,
    # so today's suite measures old kernel code (see workers/external_suites.py).
    suites_from: str | None = None
    suite_paths: list[str] = Field(default_factory=list)
    # Stored configs only: take suite_paths from this other git repository (URL or path) at
    # suites_from (default HEAD), so a suite can live outside the measured repository altogether.
    suites_repo: str | None = None
    # The smallest change that counts for this suite's benchmarks, and per benchmark pattern
    # (see workers/min_effect.py); None: the repository's.
    min_effect: float | None = None
    min_effects: dict[str, float] = Field(default_factory=dict)
    # kind = "compile" only: the GPUs every launched Triton kernel is compiled for.
    targets: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGETS))
    # The suite needs a CUDA GPU (CUDA kernels, Triton without its interpreter). On a host without
    # one it errors with that reason before it runs, and `roofwatch run` refuses to start at all,
    # instead of every commit failing deep inside the suite.
    gpu: bool = False

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: list[str]) -> list[str]:
        try:
            return [target.name for target in parse_targets(value)]
        except UnknownTarget as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("min_effect", mode="before")
    @classmethod
    def _min_effect(cls, value: object) -> float | None:
        return None if value is None else parse_min_effect(value)

    @field_validator("min_effects", mode="before")
    @classmethod
    def _min_effects(cls, value: object) -> dict[str, float]:
        if not isinstance(value, dict):
            raise ValueError("min_effects must be a table of benchmark patterns to sizes")
        return {str(pattern): parse_min_effect(size) for pattern, size in value.items()}

    @field_validator("setup_inputs", "suite_paths")
    @classmethod
    def _inside_repository(cls, value: list[str]) -> list[str]:
        # Refused when a config is stored, not only when a run reads the files.
        for path in value:
            try:
                relative_parts(path)
            except UnsafePath as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("env")
    @classmethod
    def _safe_env(cls, value: dict[str, str]) -> dict[str, str]:
        check_env(value)
        return value

    @field_validator("command")
    @classmethod
    def _non_empty(cls, value: str | list[str]) -> str | list[str]:
        if not (shlex.split(value) if isinstance(value, str) else value):
            raise ValueError("command is empty")
        return value

    def argv(self) -> list[str]:
        return shlex.split(self.command) if isinstance(self.command, str) else list(self.command)


def read_pyproject(worktree: Path) -> dict[str, object] | None:
    """A commit's parsed ``pyproject.toml`` (read without following links), or None when it has none."""
    try:
        text = read_in(worktree, "pyproject.toml", PYPROJECT_LIMIT)
    except UnsafePath as exc:
        raise SuiteConfigError(f"pyproject.toml: {exc}") from exc
    return None if text is None else parse_toml(text, "pyproject.toml")


def load_suites(worktree: Path) -> list[SuiteSpec] | None:
    """The suites a commit declares, or ``None`` when it declares none (recorded as skipped)."""
    data = read_pyproject(worktree)
    return None if data is None else suites_in(data)


def parse_toml(text: bytes | str, what: str) -> dict[str, object]:
    """A TOML document from outside; malformed, non-UTF-8 or absurdly nested text is a ``SuiteConfigError``."""
    try:
        return tomllib.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SuiteConfigError(f"{what} is not valid TOML: {exc}") from exc
    except RecursionError as exc:
        raise SuiteConfigError(f"{what} is nested too deeply to read") from exc


def roofwatch_table(data: dict[str, object]) -> dict[str, object] | None:
    """``[tool.roofwatch]`` of a parsed TOML document, or None."""
    tool = data.get("tool")
    table = tool.get("roofwatch") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise SuiteConfigError("[tool.roofwatch] must be a table")
    return table


def suites_in(data: dict[str, object]) -> list[SuiteSpec] | None:
    """The validated ``[[tool.roofwatch.suites]]`` of a parsed TOML document, or None when absent."""
    table = roofwatch_table(data)
    if table is None or "suites" not in table:
        return None
    raw = table["suites"]
    if not isinstance(raw, list) or not raw:
        raise SuiteConfigError("[[tool.roofwatch.suites]] must be a non-empty array of tables")
    try:
        suites = [SuiteSpec.model_validate(item) for item in raw]
    except ValidationError as exc:
        raise SuiteConfigError(f"invalid [[tool.roofwatch.suites]]: {exc}") from exc
    names = [suite.name for suite in suites]
    if len(set(names)) != len(names):
        raise SuiteConfigError(f"suite names must be unique, got {names}")
    return suites


def repository_min_effect(data: dict[str, object]) -> float | None:
    """``[tool.roofwatch] min_effect`` of a parsed TOML document, or None when absent."""
    table = roofwatch_table(data)
    if table is None or "min_effect" not in table:
        return None
    try:
        return parse_min_effect(table["min_effect"])
    except ValueError as exc:
        raise SuiteConfigError(f"[tool.roofwatch] {exc}") from exc


def stored_or_own(tree: Path, stored_toml: str, read: Callable[[dict[str, object]], T | None]) -> T | None:
    """A ``[tool.roofwatch]`` setting: the stored config's when it sets one, else the commit's own.

    ``read`` takes it out of a parsed document (None when absent). This is how every repository-wide
    setting a commit may declare is chosen (``min_effect``, the modelled device), so a stored config
    an operator wrote always wins over the code under test.
    """
    if stored_toml:
        stored = read(parse_toml(stored_toml, "the stored suites"))
        if stored is not None:
            return stored
    own = read_pyproject(tree)
    return None if own is None else read(own)
