"""The ``[[tool.roofwatch.suites]]`` table of a checked-out commit's ``pyproject.toml``."""

from __future__ import annotations

import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from roofwatch.common.errors import SuiteConfigError
from roofwatch.common.limits import PYPROJECT_LIMIT
from roofwatch.common.metrics import MEMORY_SUITE_SUFFIX, is_memory_suite
from roofwatch.common.tree_files import UnsafePath, read_in, relative_parts
from roofwatch.suite_config.min_effect import parse_min_effect
from roofwatch.suite_config.suite_env import check_env
from roofwatch.suite_config.targets import DEFAULT_TARGETS, UnknownTarget, parse_targets

T = TypeVar("T")



def _inside_repository(paths: list[str]) -> list[str]:
    """``paths`` when each stays inside the repository; refused when a config is stored, not only
    when a run reads the files."""
    for path in paths:
        try:
            relative_parts(path)
        except UnsafePath as exc:
            raise ValueError(str(exc)) from exc
    return paths

class EnvironmentSpec(BaseModel, extra="forbid"):
    """How a suite's environment is made (``workers/environments.py``): requirements files, and/or
    the repository itself as a pip target (``"."``, ``".[bench]"``)."""

    requirements: list[str] = Field(default_factory=list, max_length=16)
    project: str | None = Field(default=None, max_length=200, pattern=r"^\.(\[[A-Za-z0-9_,.-]+\])?$")

    @field_validator("requirements")
    @classmethod
    def _inside_repository(cls, value: list[str]) -> list[str]:
        return _inside_repository(value)

    @model_validator(mode="after")
    def _something_to_build(self) -> EnvironmentSpec:
        if not self.requirements and self.project is None:
            raise ValueError("environment needs requirements = [FILE, ...] or project = \".\" (or \".[extras]\")")
        return self


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
    # so today's suite measures old kernel code (see roofwatch/suite_config/external.py).
    suites_from: str | None = None
    suite_paths: list[str] = Field(default_factory=list)
    # Stored configs only: take suite_paths from this other git repository (URL or path) at
    # suites_from (default HEAD), so a suite can live outside the measured repository altogether.
    suites_repo: str | None = None
    # The smallest change that counts for this suite's benchmarks, and per benchmark pattern
    # (see roofwatch/suite_config/min_effect.py); None: the repository's.
    min_effect: float | None = None
    min_effects: dict[str, float] = Field(default_factory=dict)
    # The commit's own environment (its torch, triton and extras), built once per content hash;
    # None: roofwatch's own interpreter.
    environment: EnvironmentSpec | None = None
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
        return _inside_repository(value)

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
    if any(is_memory_suite(name) for name in names):
        raise SuiteConfigError(f"a suite name may not end in {MEMORY_SUITE_SUFFIX!r}: roofwatch names each "
                               f"benchmark suite's peak-memory benchmarks so, got {names}")
    if len(set(names)) != len(names):
        raise SuiteConfigError(f"suite names must be unique, got {names}")
    return suites


def repository_min_effect(data: dict[str, object]) -> float | None:
    """``[tool.roofwatch] min_effect`` of a parsed TOML document, or None when absent."""
    return _declared_min_effect(data, "min_effect")


def memory_min_effect(data: dict[str, object]) -> float | None:
    """``[tool.roofwatch] memory_min_effect``: the smallest peak-memory change that counts, or None when absent."""
    return _declared_min_effect(data, "memory_min_effect")


def _declared_min_effect(data: dict[str, object], key: str) -> float | None:
    table = roofwatch_table(data)
    if table is None or key not in table:
        return None
    try:
        return parse_min_effect(table[key])
    except ValueError as exc:  # the reason names min_effect; the key may carry a prefix
        raise SuiteConfigError(f"[tool.roofwatch] {key.removesuffix('min_effect')}{exc}") from exc


MISSING_POLICIES = ("failure", "neutral")
RENAME_LIMIT = 1000  # renamed pairs one table may declare


def renamed_in(data: dict[str, object]) -> dict[str, str] | None:
    """``[tool.roofwatch] renamed = { "old" = "new" }`` of a parsed TOML document, or None when absent.

    Names are pytest-benchmark names (``test_rmsnorm[4096]``), or ``suite::name`` to rename in one
    suite only: the head's ``new`` is paired with the base's ``old`` instead of both being listed
    as missing and new.
    """
    table = roofwatch_table(data)
    if table is None or "renamed" not in table:
        return None
    raw = table["renamed"]
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) and k and v
                                            for k, v in raw.items()):
        raise SuiteConfigError('[tool.roofwatch] renamed must be a table of old name = "new name"')
    if len(raw) > RENAME_LIMIT:
        raise SuiteConfigError(f"[tool.roofwatch] renamed declares {len(raw)} pairs, more than {RENAME_LIMIT}")
    news = list(raw.values())
    if len(set(news)) != len(news):
        raise SuiteConfigError("[tool.roofwatch] renamed gives two old names the same new name")
    return {str(k): str(v) for k, v in raw.items()}


def missing_policy_in(data: dict[str, object]) -> str | None:
    """``[tool.roofwatch] missing``: what a pull request's check says while a benchmark of the base is
    missing on its head and no maintainer has accepted that (``failure`` or ``neutral``); None when absent."""
    table = roofwatch_table(data)
    if table is None or "missing" not in table:
        return None
    value = table["missing"]
    if value not in MISSING_POLICIES:
        raise SuiteConfigError(f"[tool.roofwatch] missing must be one of {', '.join(MISSING_POLICIES)}, got {value!r}")
    return str(value)


AB_BUDGET_LIMIT_S = 8 * 3600.0  # an A/B task's own hard time limit


def ab_budget_in(data: dict[str, object]) -> float | None:
    """``[tool.roofwatch] ab_budget_s``: the wall time an A/B's later rounds may take (seconds), or None."""
    table = roofwatch_table(data)
    if table is None or "ab_budget_s" not in table:
        return None
    value = table["ab_budget_s"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= AB_BUDGET_LIMIT_S:
        raise SuiteConfigError(f"[tool.roofwatch] ab_budget_s must be a number of seconds from 1 to "
                               f"{AB_BUDGET_LIMIT_S:.0f}, got {value!r}")
    return float(value)


AB_ROUNDS_LIMIT = 200  # rounds one A/B may be asked for: each is two fresh processes of every open suite


def _rounds_in(data: dict[str, object], key: str) -> int | None:
    table = roofwatch_table(data)
    if table is None or key not in table:
        return None
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or not 3 <= value <= AB_ROUNDS_LIMIT:
        raise SuiteConfigError(f"[tool.roofwatch] {key} must be a whole number of rounds from 3 to "
                               f"{AB_ROUNDS_LIMIT}, got {value!r}")
    return value


def ab_min_rounds_in(data: dict[str, object]) -> int | None:
    """``[tool.roofwatch] ab_min_rounds``: rounds every A/B runs before any verdict, or None when absent."""
    return _rounds_in(data, "ab_min_rounds")


def ab_max_rounds_in(data: dict[str, object]) -> int | None:
    """``[tool.roofwatch] ab_max_rounds``: the rounds an A/B may run, measured up to for every benchmark
    still undecided (an asked-for cap, like ``compare --max-rounds``), or None when absent."""
    return _rounds_in(data, "ab_max_rounds")


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
