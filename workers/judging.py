"""What judges an A/B, and what a pull request's head would change about it once merged.

The side being judged never sets the bar (DESIGN §6). Both sides of a comparison — a pull
request's, a main-branch confirmation's, ``roofwatch compare``'s — are measured and decided by
the stored configuration, else the **base** commit's ``[tool.roofwatch]``: which suites run and
how (command, timer, rounds, warm-up, ``env``, backfill), ``min_effect`` and ``min_effects``,
the modelled device, declared renames, the policy for missing benchmarks, the A/B's time budget and
rounds, and ``memory_min_effect`` for peak memory. The head's own
table is read only to list what it would change after merge; a head whose table does not parse
is listed the same way and still measured with the base's suites.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from roofwatch.common.envelope import SettingChange
from roofwatch.common.errors import SuiteConfigError
from roofwatch.common.jobs import ABJob
from roofwatch.suite_config.declared import (
    SuiteSpec,
    ab_budget_in,
    ab_max_rounds_in,
    ab_min_rounds_in,
    memory_min_effect,
    missing_policy_in,
    parse_toml,
    read_pyproject,
    renamed_in,
    repository_min_effect,
    suites_in,
)
from roofwatch.suite_config.external import choose
from roofwatch.suite_config.min_effect import DEFAULT_MEMORY_MIN_EFFECT, DEFAULT_MIN_EFFECT
from roofwatch.workers import modelled_device

T = TypeVar("T")
DEFAULT_MISSING_POLICY = "failure"
VALUE_CHARS = 160  # of one setting's value in a change line: a command is shown, a 10 kB one is not


@dataclass(frozen=True)
class Judging:
    """The settings one commit's tree (with the stored config laid over it) judges a comparison by."""

    suites: list[SuiteSpec] | None
    source: str  # where the suites came from, as a run records it
    min_effect: float | None
    device: modelled_device.ModelledDevice | None
    renamed: dict[str, str] = field(default_factory=dict)
    missing_policy: str = DEFAULT_MISSING_POLICY
    budget_s: float | None = None  # the A/B's wall-time budget for later rounds; None: the service's
    memory_min_effect: float | None = None  # of the peak-memory benchmarks; None: DEFAULT_MEMORY_MIN_EFFECT
    min_rounds: int | None = None  # the A/B's rounds before a verdict; None: the service's (or what was asked)
    max_rounds: int | None = None  # its cap, measured up to while a benchmark is undecided; None: the service's


def judging_of(tree: Path, stored_toml: str, stored_label: str, commit: str = "the base commit") -> Judging:
    """The settings ``tree`` declares, the stored config's winning where it sets them; ``SuiteConfigError``
    when either table is malformed. ``commit`` names the tree in the recorded source of the suites."""
    own = read_pyproject(tree)
    stored = parse_toml(stored_toml, "the stored suites") if stored_toml else None

    def setting(read: Callable[[dict[str, object]], T | None]) -> T | None:
        if stored is not None and (value := read(stored)) is not None:
            return value
        return None if own is None else read(own)

    suites, source = choose(None if own is None else suites_in(own), stored_toml, stored_label, commit)
    return Judging(suites=suites, source=source, min_effect=setting(repository_min_effect),
                   device=setting(modelled_device.declared), renamed=setting(renamed_in) or {},
                   missing_policy=setting(missing_policy_in) or DEFAULT_MISSING_POLICY,
                   budget_s=setting(ab_budget_in), memory_min_effect=setting(memory_min_effect),
                   min_rounds=setting(ab_min_rounds_in), max_rounds=setting(ab_max_rounds_in))


def rounds_of(job: ABJob, judged: Judging) -> ABJob:
    """``job`` with the judging side's ``ab_min_rounds``/``ab_max_rounds`` where it declares them and the
    requester asked for no count of their own; a declared count is an asked-for one (``ABJob``)."""
    min_rounds, max_rounds = job.min_rounds, job.max_rounds
    min_asked, max_asked = job.min_rounds_asked, job.max_rounds_asked
    if judged.min_rounds is not None and not min_asked:
        min_rounds, min_asked = judged.min_rounds, True
    if judged.max_rounds is not None and not max_asked:
        max_rounds, max_asked = judged.max_rounds, True
    return replace(job, min_rounds=min_rounds, max_rounds=max(min_rounds, max_rounds),
                   min_rounds_asked=min_asked, max_rounds_asked=max_asked)


def changes(judged: Judging, head: Judging) -> list[SettingChange]:
    """What ``head`` declares differently from ``judged``: each would take effect only after merge."""
    found: list[SettingChange] = []

    def differ(what: str, before: object, after: object) -> None:
        if before != after:
            found.append(SettingChange(what=what, before=_shown(before), after=_shown(after)))

    differ("min_effect", _pct(judged.min_effect), _pct(head.min_effect))
    differ("memory_min_effect", _pct(judged.memory_min_effect, DEFAULT_MEMORY_MIN_EFFECT),
           _pct(head.memory_min_effect, DEFAULT_MEMORY_MIN_EFFECT))
    differ("missing", judged.missing_policy, head.missing_policy)
    differ("ab_budget_s", judged.budget_s, head.budget_s)
    differ("ab_min_rounds", judged.min_rounds, head.min_rounds)
    differ("ab_max_rounds", judged.max_rounds, head.max_rounds)
    differ("device", _device(judged.device), _device(head.device))
    for old in sorted(judged.renamed.keys() | head.renamed.keys()):
        differ(f"renamed {old}", judged.renamed.get(old, "not renamed"), head.renamed.get(old, "not renamed"))
    mine = {s.name: s for s in judged.suites or []}
    theirs = {s.name: s for s in head.suites or []}
    for name in sorted(mine.keys() | theirs.keys()):
        if name not in theirs:
            found.append(SettingChange(what=f"suite {name}", before="declared", after="removed"))
        elif name not in mine:
            found.append(SettingChange(what=f"suite {name}", before="not declared", after="added"))
        else:
            before, after = mine[name].model_dump(), theirs[name].model_dump()
            for key in sorted(before.keys() | after.keys()):
                differ(f"suite {name}: {key}", before.get(key), after.get(key))
    return found


def invalid_head(exc: SuiteConfigError) -> SettingChange:
    """The change a head makes whose own ``[tool.roofwatch]`` cannot be read: after merge, nothing would run."""
    return SettingChange(what="[tool.roofwatch]", before="valid", after=_shown(f"invalid: {exc}"))


def pending_renames(judged: Judging, head: Judging) -> dict[str, str]:
    """Renames only the head declares: they pair names, but a maintainer must accept them."""
    return {old: new for old, new in head.renamed.items() if judged.renamed.get(old) != new}


def _pct(value: float | None, default: float = DEFAULT_MIN_EFFECT) -> str:
    return f"{100 * default:g} % (default)" if value is None else f"{100 * value:g} %"


def _device(device: modelled_device.ModelledDevice | None) -> str:
    return "the host's GPU" if device is None else device.device_class


def _shown(value: object) -> str:
    text = "none" if value is None else str(value)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"
