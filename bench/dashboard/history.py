"""A repository's history for the seed: commits, and how each benchmark's time moves along it.

Changes come in two flavours, as they do in a real kernel repository: one series stepping on its
own (a tuning change for one shape), and one commit moving every kernel of an op at once (a
rewrite). Both become ``Change`` rows at the step, so the dashboard's markers sit on real steps.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.dashboard.workload import Spec

AUTHORS = (
    "Ada Park <ada@acme.dev>", "Bruno Costa <bruno@acme.dev>", "Chen Wei <chen.wei@acme.dev>",
    "Dana Levi <dana@acme.dev>", "Emeka Obi <emeka@acme.dev>", "Freya Lind <freya@acme.dev>",
    "Gita Rao <gita@acme.dev>", "Hiro Sato <hiro@acme.dev>", "Ines Moreau <ines@acme.dev>",
    "Jonas Berg <jonas@acme.dev>", "Kai Müller <kai@acme.dev>", "dependabot[bot] <bot@github.com>",
)
# A few people write most of the commits.
AUTHOR_WEIGHTS = np.array([18, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 4], dtype=float)

VERBS = ("fuse", "retune", "vectorize", "split", "simplify", "fix", "speed up", "revert", "tidy", "autotune")
OBJECTS = ("the reduction loop", "BLOCK_SIZE for H100", "masked loads on the tail", "the bf16 path",
           "num_warps heuristics", "the persistent-kernel schedule", "the launch grid", "fp32 accumulation",
           "the online max", "pointer arithmetic for strided rows")
CHORES = ("ci: bump triton to 3.1.0", "ci: pin torch 2.5.1 on the GPU runners", "docs: roofline notes",
          "tests: tighten bf16 tolerances", "build: drop python 3.10", "bench: add LLM-sized shapes")
START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: list[str]
    author: str
    message: str
    committed_at: datetime


@dataclass(frozen=True)
class Step:
    """Benchmark ``bench`` (an index) moves from ``before`` to ``after`` (× its base time) at commit ``at``."""

    bench: int
    at: int
    before: float
    after: float

    @property
    def change_pct(self) -> float:
        return (self.after / self.before - 1.0) * 100.0


@dataclass
class History:
    commits: list[CommitInfo]
    levels: np.ndarray  # (benchmarks, commits): multiplier of each series' base time at each commit
    steps: list[Step] = field(default_factory=list)
    event_commits: list[int] = field(default_factory=list)  # commits that moved a whole op


def _sha(seed: int, index: int) -> str:
    return hashlib.sha1(f"roofwatch-seed-{seed}-{index}".encode()).hexdigest()


def _message(rng: np.random.Generator, ops: list[str], index: int) -> str:
    if rng.random() < 0.15:
        return str(rng.choice(CHORES))
    op = str(rng.choice(ops))
    subject = f"{op}: {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    if rng.random() < 0.2:  # merged pull requests carry the PR title in the body
        branch = subject.split(":")[0] + "-" + str(rng.choice(VERBS)).replace(" ", "-")
        return f"Merge pull request #{100 + index} from acme/{branch}\n\n{subject}"
    body = "" if rng.random() < 0.5 else f"\n\nMeasured on the H100 runners; see the roofline page for {op}."
    return subject + body


def make_commits(count: int, rng: np.random.Generator, ops: list[str], seed: int) -> list[CommitInfo]:
    """``count`` first-parent commits, oldest first, a few hours apart (merges have a side parent)."""
    weights = AUTHOR_WEIGHTS / AUTHOR_WEIGHTS.sum()
    gaps = rng.exponential(4.0, size=count)  # hours
    commits: list[CommitInfo] = []
    at = START
    for index in range(count):
        at = at + timedelta(hours=float(gaps[index]))
        message = _message(rng, ops, index)
        parents = [commits[-1].sha] if commits else []
        if message.startswith("Merge") and commits:
            parents.append(_sha(seed, -index - 1))  # the PR branch head: not on the first-parent line
        commits.append(CommitInfo(sha=_sha(seed, index), parents=parents,
                                  author=str(rng.choice(AUTHORS, p=weights)), message=message,
                                  committed_at=at))
    return commits


def _magnitude(rng: np.random.Generator) -> float:
    """A step's factor: regressions a little more common than improvements, 4-30 % either way."""
    pct = rng.uniform(0.04, 0.30)
    return 1.0 + pct if rng.random() < 0.58 else 1.0 / (1.0 + pct)


def _step_indices(commits: int, count: int, rng: np.random.Generator) -> list[int]:
    """Step points away from the ends, so every change has a before and an after to look at."""
    low, high = min(5, commits - 1), max(min(5, commits - 1) + 1, commits - 3)
    return sorted(int(i) for i in rng.integers(low, high, size=count))


def make_history(specs: list[Spec], commits: int, rng: np.random.Generator, seed: int) -> History:
    """Commits, and each series' level along them: independent steps plus a few op-wide rewrites."""
    ops = sorted({s.op for s in specs})
    history = History(commits=make_commits(commits, rng, ops, seed), levels=np.ones((len(specs), commits)))
    steps: list[tuple[int, int, float]] = []
    for bench in range(len(specs)):
        for at in _step_indices(commits, int(rng.poisson(0.2)), rng):
            steps.append((bench, at, _magnitude(rng)))
    history.event_commits = _step_indices(commits, max(1, commits // 250), rng)
    for at in history.event_commits:
        op = str(rng.choice(ops))
        factor = _magnitude(rng)
        for bench, spec in enumerate(specs):
            if spec.op == op and spec.impl == "":  # a rewrite moves the kernel, not the torch baselines
                steps.append((bench, at, factor * rng.uniform(0.98, 1.02)))
    seen: set[tuple[int, int]] = set()
    for bench, at, factor in sorted(steps, key=lambda s: (s[1], s[0])):
        if (bench, at) in seen:  # one step per series and commit, so each change has one before/after
            continue
        seen.add((bench, at))
        before = float(history.levels[bench, at - 1])
        history.levels[bench, at:] *= factor
        history.steps.append(Step(bench=bench, at=at, before=before, after=float(history.levels[bench, at])))
    return history
