"""roofwatch running from a virtualenv under /tmp: its suites start there, and see nothing else of /tmp.

The sandbox gives every suite an empty in-memory /tmp. A worker whose interpreter lives in a
temp dir (a CI runner's virtualenv) must still find ``python`` and the installed harness in
it, while the rest of the temp dir — the data dir with its mirrors, the repository it clones
from, the operator's files beside them — stays out. A real virtualenv, a real worker job
(mirror, worktree, sandboxed suite) and a suite that reports what it sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from support.sample_repo import commit, init

from roofwatch.workers import bubblewrap

ROOT = Path(__file__).resolve().parents[2]

# The suite: stdlib only (the base interpreter need not have pytest), writes the JUnit file
# the runner asks for, and prints what it could see of the test's temp dir.
PROBE = r'''
import json, os, sys
from pathlib import Path

import roofwatch

places = json.loads(Path(__file__).with_name("places.json").read_text())
seen = {"python": sys.executable, "harness": roofwatch.__file__,
        "listings": {name: sorted(os.listdir(path)) if os.path.isdir(path) else None
                     for name, path in places.items()}}
print("PROBE " + json.dumps(seen), flush=True)
[junit] = [arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--junitxml=")]
Path(junit).write_text('<testsuite name="probe" tests="1"><testcase classname="probe" name="test_starts"/></testsuite>')
'''

PYPROJECT = """\
[[tool.roofwatch.suites]]
name = "probe"
kind = "correctness"
command = "python probe.py"
timeout = 120
"""

# Runs under the virtualenv's interpreter: one worker job per data dir, the envelopes on stdout.
DRIVER = r'''
import json, os, sys
from roofwatch.common.jobs import Job
from roofwatch.workers.runner import run_job

envelopes = []
for number, (data_dir, clone_url, sha) in enumerate(json.loads(sys.argv[1]), start=1):
    os.environ["ROOFWATCH_DATA_DIR"] = data_dir
    job = Job(run_id=number, idempotency_key=f"tmp-venv-{number}", repository="acme/probe",
              clone_url=clone_url, sha=sha, data_dir=data_dir)
    envelopes.append(run_job(job).model_dump(mode="json"))
print(json.dumps(envelopes))
'''


def virtualenv_with_roofwatch(path: Path) -> Path:
    """A virtualenv at ``path`` with roofwatch's harness installed in it as a wheel lays it out.

    What the worker itself imports besides (the rest of roofwatch, its dependencies) comes from
    this test's environment through a ``.pth`` file; the sandbox never sees that environment.
    """
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)],
                   check=True, timeout=60)
    python = path / "bin" / "python"
    site_packages = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    shutil.copytree(ROOT / "roofwatch", site_packages / "roofwatch", ignore=shutil.ignore_patterns("__pycache__"))
    info = site_packages / "roofwatch-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: roofwatch\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nroofwatch = roofwatch.pytest_plugin\n")
    (site_packages / "roofwatch-worker.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_path('purelib')!r})\n")
    return python


def test_a_suite_runs_under_an_interpreter_in_a_temp_dir_and_sees_only_it(tmp_path: Path) -> None:
    bubblewrap.check()
    assert str(tmp_path).startswith("/tmp/"), "the point is an interpreter under the sandbox's private /tmp"
    venv = tmp_path / "venv"
    python = virtualenv_with_roofwatch(venv)
    (tmp_path / "operator-notes.txt").write_text("not for suites\n")
    # Two data dirs: beside the virtualenv, and inside it (an image that keeps everything under one folder).
    beside, inside = tmp_path / "data", venv / "data"
    repo = tmp_path / "repo"
    init(repo)
    places = {"tmp": tmp_path, "beside": beside, "beside_worktrees": beside / "worktrees",
              "inside": inside, "inside_worktrees": inside / "worktrees"}
    sha = commit(repo, "Add the probe", {"pyproject.toml": PYPROJECT, "probe.py": PROBE,
                                         "places.json": json.dumps({k: str(v) for k, v in places.items()})}, 1)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROOFWATCH_", "PYTHON"))}
    jobs = [(str(beside), str(repo), sha), (str(inside), str(repo), sha)]
    done = subprocess.run([python, "-c", DRIVER, json.dumps(jobs)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    envelopes = json.loads(done.stdout.splitlines()[-1])

    seen = []
    for envelope in envelopes:
        [suite] = envelope["suites"]
        assert (envelope["status"], suite["status"]) == ("succeeded", "passed"), suite["output_tail"]
        [line] = [line for line in suite["output_tail"].splitlines() if line.startswith("PROBE ")]
        seen.append(json.loads(line.removeprefix("PROBE ")))
    for probe in seen:
        # `python` is the virtualenv's, and the harness is the copy installed in it.
        assert probe["python"] == str(venv / "bin" / "python")
        assert Path(probe["harness"]).is_relative_to(venv)
    beside_view, inside_view = (probe["listings"] for probe in seen)
    # Of the temp dir, only the virtualenv and the run's own worktree (a suite without setup is
    # given an empty cache of its own, none of the repository's):
    # not the repository it was cloned from, the operator's notes, the mirrors, nor (when the data
    # dir is inside the virtualenv) anything else of the data dir.
    assert beside_view["tmp"] == ["data", "venv"]
    assert beside_view["beside"] == ["worktrees"] and len(beside_view["beside_worktrees"]) == 1
    assert beside_view["inside"] is None
    assert inside_view["tmp"] == ["venv"]
    assert inside_view["beside"] is None
    assert inside_view["inside"] == ["worktrees"] and len(inside_view["inside_worktrees"]) == 1
    # The host's data dirs did hold a mirror each, which the suites could not see.
    assert {p.name for p in beside.iterdir()} >= {"mirrors", "worktrees"}
    assert {p.name for p in inside.iterdir()} >= {"mirrors", "worktrees"}
