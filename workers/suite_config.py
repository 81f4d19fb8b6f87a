"""The ``[[tool.roofwatch.suites]]`` table of a checked-out commit's ``pyproject.toml``."""

from __future__ import annotations

import shlex
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from roofwatch.workers.compiled.targets import DEFAULT_TARGETS, UnknownTarget, parse_targets
from roofwatch.workers.errors import SuiteConfigError
from roofwatch.workers.suite_env import check_env
from roofwatch.workers.tree_files import UnsafePath, read_in, relative_parts

PYPROJECT_LIMIT = 1024 * 1024


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
    # kind = "compile" only: the GPUs every launched Triton kernel is compiled for.
    targets: list[str] = Field(default_factory=lambda: list(DEFAULT_TARGETS))

    @field_validator("targets")
    @classmethod
    def _known_targets(cls, value: list[str]) -> list[str]:
        try:
            return [target.name for target in parse_targets(value)]
        except UnknownTarget as exc:
            raise ValueError(str(exc)) from exc

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


def load_suites(worktree: Path) -> list[SuiteSpec] | None:
    """The suites a commit declares, or ``None`` when it declares none (recorded as skipped)."""
    try:
        text = read_in(worktree, "pyproject.toml", PYPROJECT_LIMIT)
    except UnsafePath as exc:
        raise SuiteConfigError(f"pyproject.toml: {exc}") from exc
    if text is None:
        return None
    return suites_in(parse_toml(text, "pyproject.toml"))


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
