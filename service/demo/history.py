"""The demo kernel repository: a real git history with known changes planted among neutral commits.

``roofwatch demo init DIR`` writes it from the templates shipped next to this module. Its
kernels run on a modelled device (``templates/device.py``) whose timing follows the bytes each
implementation moves, so the planted changes are the same size on every host:

=========  ===================================================  ================================
step       commit                                               what roofwatch should find
=========  ===================================================  ================================
``slow``   rmsnorm upcasts x to a float64 copy                  ``test_rmsnorm[*]`` ~2× slower
``bug``    softmax subtracts the row mean, not the max          ``test_softmax[large-*]`` fail
                                                                (exp of large logits overflows)
``fix``    softmax subtracts the max again                      those failures marked ``fixed``
``fast``   matmul reuses b across a tile of rows                ``test_matmul`` ~4.7× faster
``pr``     (branch ``layernorm-two-pass``) a second pass        ``test_layernorm[*]`` ~1.8× slower
=========  ===================================================  ================================

Commit dates are fixed, one hour apart, and so are the author and committer: the same
templates always give the same SHAs, so running the demo again finds its commits measured.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from roofwatch.service.core.errors import DemoError

AUTHOR = ("Ada Kernel", "ada@kernels.example")
FIRST_COMMIT_EPOCH = 1_772_442_000  # 2026-03-02 09:00 UTC
PR_BRANCH = "layernorm-two-pass"
BRANCH = "main"


def template(name: str) -> str:
    return resources.files("roofwatch.service.demo").joinpath("templates", name).read_text(encoding="utf-8")


def _edited(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced once; a template that no longer holds ``old`` is a bug here."""
    if text.count(old) != 1:
        raise AssertionError(f"demo template edit does not apply: {old!r}")
    return text.replace(old, new)


@dataclass(frozen=True)
class Step:
    name: str
    message: str
    files: dict[str, str]  # path in the repository → content


CHANGELOG_HEAD = "# Changelog\n"


def _steps() -> list[Step]:
    base = {
        "pyproject.toml": template("pyproject.toml"),
        "README.md": template("README.md"),
        "minikernels/__init__.py": '"""Small kernels on a modelled accelerator."""\n',
        "minikernels/device.py": template("device.py"),
        "minikernels/rmsnorm.py": template("rmsnorm.py"),
        "minikernels/softmax.py": template("softmax.py"),
        "minikernels/layernorm.py": template("layernorm.py"),
        "minikernels/matmul.py": template("matmul.py"),
        "checks/test_correctness.py": template("test_correctness.py"),
        "bench/test_benchmarks.py": template("test_benchmarks.py"),
    }
    changelog = [CHANGELOG_HEAD]

    def log(line: str) -> dict[str, str]:
        changelog.append(f"- {line}\n")
        return {"CHANGELOG.md": "".join(changelog)}

    layernorm_commented = _edited(template("layernorm.py"), "    mean = x.mean(axis=-1, keepdims=True)\n",
                                  "    # Σx and Σx² in one sweep: var = E[x²] − E[x]², fine for normalised activations.\n"
                                  "    mean = x.mean(axis=-1, keepdims=True)\n")
    matmul_named = _edited(template("matmul.py"), "    device.complete(started, bytes_moved=moved, flops=2 * m * n * k)\n",
                           "    flops = 2 * m * n * k  # one multiply and one add per term\n"
                           "    device.complete(started, bytes_moved=moved, flops=flops)\n")
    matmul_tiled = _edited(template("matmul.tiled.py"), "    device.complete(started, bytes_moved=moved, flops=2 * m * n * k)\n",
                           "    flops = 2 * m * n * k  # one multiply and one add per term\n"
                           "    device.complete(started, bytes_moved=moved, flops=flops)\n")
    # the bug keeps the stable softmax's work (a reduction and a subtraction), so the host computes as much either
    # way: a kernel's NumPy time is hidden in its modelled time only while a preemption does not outlast it
    softmax_mean_centred = _edited(
        _edited(template("softmax.py"), '"""Softmax over the last axis, numerically stable: the row maximum is subtracted first."""',
                '"""Softmax over the last axis."""'),
        "    shifted = x - x.max(axis=-1, keepdims=True)\n",
        "    # Centring on the row mean keeps exp in range for typical logits.\n"
        "    shifted = x - x.mean(axis=-1, keepdims=True)\n")
    device_documented = _edited(template("device.py"), "LAUNCH_S = 2.0e-3",
                                "# Launch latency: what a call costs however little it moves.\nLAUNCH_S = 2.0e-3")
    readme_more = template("README.md") + (
        "\n## Running the suites\n\n```bash\npython -m pytest checks -q\n"
        "python -m pytest bench -q --benchmark-only\n```\n")
    return [
        Step("base", "Add rmsnorm, softmax, layernorm and matmul on a modelled device", base),
        Step("docs", "README: how to run the suites", {"README.md": readme_more}),
        Step("changelog", "Start a changelog", log("0.1.0: four kernels with checks and benchmarks")),
        Step("slow", "rmsnorm: accumulate in float64 for accuracy",
             {"minikernels/rmsnorm.py": template("rmsnorm.float64.py")}),
        Step("notes", "CHANGELOG: rmsnorm accumulates in float64", log("rmsnorm accumulates in float64")),
        Step("comment", "layernorm: say why one sweep is enough", {"minikernels/layernorm.py": layernorm_commented}),
        Step("bug", "softmax: centre the logits on the row mean, not the max",
             {"minikernels/softmax.py": softmax_mean_centred}),
        Step("notes2", "CHANGELOG: softmax centres on the mean", log("softmax centres the logits on the row mean")),
        Step("flops", "matmul: name the FLOP count", {"minikernels/matmul.py": matmul_named}),
        Step("fix", "softmax: subtract the row max again (large logits overflowed)",
             {"minikernels/softmax.py": template("softmax.py")}),
        Step("notes3", "CHANGELOG: softmax fixed", log("softmax is stable again for large logits")),
        Step("fast", "matmul: tile rows so each tile reads b once", {"minikernels/matmul.py": matmul_tiled}),
        Step("notes4", "CHANGELOG: tiled matmul", log("matmul reads b once per tile of 32 rows")),
        Step("latency", "device: document the launch latency", {"minikernels/device.py": device_documented}),
        Step("release", "Release 0.2.0", log("0.2.0")),
    ]


PR_STEP = Step("pr", "layernorm: mean and variance in separate passes",
               {"minikernels/layernorm.py": template("layernorm.two_pass.py")})


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": AUTHOR[0], "GIT_AUTHOR_EMAIL": AUTHOR[1],
           "GIT_COMMITTER_NAME": AUTHOR[0], "GIT_COMMITTER_EMAIL": AUTHOR[1]}
    if when is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{FIRST_COMMIT_EPOCH + when * 3600} +0000"
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DemoError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _commit(repo: Path, step: Step, when: int) -> str:
    for name, content in step.files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", step.message, when=when)
    return _git(repo, "rev-parse", "HEAD")


def build_demo_repository(repo: Path) -> dict[str, str]:
    """Write the demo history into ``repo`` (absent or empty); SHAs by step name, ``pr`` included."""
    if repo.exists() and (not repo.is_dir() or any(repo.iterdir())):
        raise DemoError(f"{repo} exists and is not an empty directory")
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", BRANCH)
    steps = _steps()
    shas = {step.name: _commit(repo, step, when) for when, step in enumerate(steps)}
    _git(repo, "checkout", "-q", "-b", PR_BRANCH)
    shas[PR_STEP.name] = _commit(repo, PR_STEP, len(steps))
    _git(repo, "checkout", "-q", BRANCH)
    return shas
