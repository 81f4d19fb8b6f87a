"""A repository whose suites write hostile result files, and the reads a commit can aim at the host.

Each benchmark suite is ``python write_result.py MODE``: it writes (or links) the file the
runner asked for with ``--benchmark-json=`` as MODE says. ``good`` writes a sane result; every
other mode is one attack. The test then checks that each attack made only its own suite
``errored``, that the good suite's results were stored, and that the run finished.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.sample_repo import commit, git, init

WRITE_RESULT = r'''
import json, os, sys

mode = sys.argv[1]
target = next(a.split("=", 1)[1] for a in sys.argv if a.startswith(("--benchmark-json=", "--junitxml=")))


def entry(name="test_ok", median=0.001, **change):
    stats = {"median": median, "mean": median, "min": median, "max": median, "iqr": 0.0, "stddev": 0.0,
             "rounds": 5, "data": [median] * 5}
    stats.update(change.pop("stats", {}))
    return {"name": name, "group": None, "param": None, "stats": stats, "extra_info": {}, **change}


def write(text):
    with open(target, "w") as handle:
        handle.write(text)


def benchmarks(*entries):
    write(json.dumps({"benchmarks": list(entries)}))


if mode == "good":
    benchmarks(entry("test_good"))
elif mode == "link":
    os.symlink(sys.argv[2], target)
elif mode == "deep":
    write('{"benchmarks": ' + "[" * 200_000 + "]" * 200_000 + "}")
elif mode == "nan":
    benchmarks(entry(median=float("nan")))
elif mode == "zero":
    benchmarks(entry(median=0.0))
elif mode == "negative":
    benchmarks(entry(median=-0.5))
elif mode == "digits":
    write('{"benchmarks": [{"name": "test_big", "stats": {"median": ' + "9" * 5000 + ', "mean": 1}}]}')
elif mode == "rounds":
    write('{"benchmarks": [{"name": "test_r", "stats": {"median": 0.1, "mean": 0.1, "rounds": 1e400}}]}')
elif mode == "extra":
    benchmarks(entry(extra_info=[1, 2]))
elif mode == "nul":
    print("suite output with a NUL: \u0000", flush=True)
    benchmarks(entry("test_nul\u0000inside", group="g\u0000", param="p\u0000"))
elif mode == "longname":
    benchmarks(entry("test_" + "\u00e9" * 3000))
elif mode == "longstring":  # 64 MB in one name: read whole, its lexing grows with its square
    benchmarks(entry("test_" + "a" * (64 << 20)))
elif mode == "many":  # a million benchmarks of one round (70 MB): more than one suite may report
    tiny = '{"name": "b%d", "stats": {"median": 0.001, "mean": 0.001, "data": [0.001]}}'
    write('{"benchmarks": [' + ",".join(tiny % i for i in range(1_000_000)) + "]}")
print("wrote", mode, flush=True)
'''

ATTACKS = ("link", "deep", "nan", "zero", "negative", "digits", "rounds", "extra", "longstring", "many")
STORED = ("good", "nul", "longname")


def host_result(path: Path) -> Path:
    """A host file that looks like a benchmark result: the worker must never store it."""
    path.write_text(json.dumps({"benchmarks": [{"name": "host_secret", "stats": {"median": 0.5, "mean": 0.5}}]}))
    return path


def suite(name: str, command: str, kind: str = "benchmark", extra: str = "") -> str:
    return (f'[[tool.roofwatch.suites]]\nname = "{name}"\nkind = "{kind}"\n'
            f'command = "{command}"\ntimeout = 120\n{extra}\n')


def hostile_results_repo(path: Path, host_file: Path) -> str:
    """Every mode as its own suite; its head SHA."""
    init(path)
    table = "".join(suite(mode, f"python write_result.py {mode}" + (f" {host_file}" if mode == "link" else ""))
                    for mode in (*STORED, *ATTACKS))
    return commit(path, "Hostile result files", {"write_result.py": WRITE_RESULT, "pyproject.toml": table}, 1)


def link_commit(repo: Path, links: dict[str, Path], files: dict[str, str], message: str, when: int) -> str:
    """Commit symbolic links (name → absolute target on the host) with ``files``."""
    for name, target in links.items():
        where = repo / name
        where.parent.mkdir(parents=True, exist_ok=True)
        if where.is_symlink() or where.exists():
            where.unlink()
        os.symlink(target, where)
    sha = commit(repo, message, files, when)
    assert git(repo, "ls-files", "-s", *links).count("120000") == len(links)  # really links in git
    return sha
