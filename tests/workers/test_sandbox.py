"""The sandbox runs real child processes: scrubbed environment, group kill, output cap."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roofwatch.workers import sandbox

SECRETS = {
    "ROOFWATCH_GITHUB_TOKEN": "ghs_roofwatch_secret",
    "GITHUB_TOKEN": "ghp_github_secret",
    "ROOFWATCH_API_TOKEN": "api_secret",
    "AWS_SECRET_ACCESS_KEY": "aws_secret",
}


def run_python(code: str, cwd: Path, timeout_s: float = 30, output_limit: int = 1_000_000,
               env: dict[str, str] | None = None) -> sandbox.Completed:
    """Run ``python -c code``; ``python`` is found through the scrubbed PATH, as suites do."""
    return sandbox.run(["python", "-c", code], cwd, env or sandbox.scrubbed_env(), timeout_s, output_limit)


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie nobody has reaped yet counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def test_scrubbed_env_hides_secrets_and_keeps_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    env = sandbox.scrubbed_env({"SUITE_FLAG": "on"}, pythonpath=tmp_path)

    done = run_python(
        "import json, os, shutil, sys;"
        "print(json.dumps({'env': dict(os.environ), 'python': sys.executable, 'git': shutil.which('git')}))",
        tmp_path, env=env,
    )

    assert done.exit_code == 0, done.output
    seen = json.loads(done.output)
    assert not set(SECRETS) & set(seen["env"])
    assert not any(value in done.output for value in SECRETS.values())
    assert seen["env"]["PYTHONPATH"] == str(tmp_path)
    assert seen["env"]["SUITE_FLAG"] == "on"
    assert seen["env"]["LC_ALL"] == "C.UTF-8"
    # `python` resolves to the interpreter roofwatch runs under, and the host PATH still works.
    assert Path(seen["python"]).parent == Path(sys.executable).parent
    assert seen["git"] is not None


def test_pythonpath_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    assert "PYTHONPATH" not in sandbox.scrubbed_env()


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    code = (
        "import subprocess, time;"
        "child = subprocess.Popen(['sleep', '1000']);"
        "print(child.pid, flush=True);"
        "time.sleep(1000)"
    )
    started = time.monotonic()
    done = run_python(code, tmp_path, timeout_s=1.5)

    assert done.timed_out
    assert done.exit_code == -signal.SIGTERM
    assert time.monotonic() - started < 1.5 + sandbox.KILL_GRACE_S
    grandchild = int(done.output.split()[0])
    deadline = time.monotonic() + 5
    while is_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_alive(grandchild), f"grandchild {grandchild} survived the timeout"


def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    limit = 100_000
    body = "x" * 20_000_000
    total = len("HEAD-MARK\n") + len(body) + len("\nTAIL-MARK\n")
    done = run_python(
        f"import sys; sys.stdout.write('HEAD-MARK\\n' + 'x' * {len(body)} + '\\nTAIL-MARK\\n')",
        tmp_path, output_limit=limit,
    )

    assert done.exit_code == 0
    assert done.dropped_bytes == total - limit
    marker = f"\n[... {total - limit} bytes of output dropped ...]\n"
    assert marker in done.output
    assert len(done.output.encode()) == limit + len(marker)
    assert done.output.startswith("HEAD-MARK\n")
    assert done.output.endswith("\nTAIL-MARK\n")


def test_small_output_is_kept_whole(tmp_path: Path) -> None:
    done = run_python("print('hello'); raise SystemExit(3)", tmp_path)
    assert (done.exit_code, done.timed_out, done.dropped_bytes, done.output) == (3, False, 0, "hello\n")


def test_crash_by_signal_gives_negative_exit_code(tmp_path: Path) -> None:
    done = run_python("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", tmp_path)
    assert done.exit_code == -signal.SIGSEGV
    assert not done.timed_out


def test_unknown_executable_is_reported_not_raised(tmp_path: Path) -> None:
    done = sandbox.run(["roofwatch-no-such-program", "--flag"], tmp_path, sandbox.scrubbed_env(), 10, 1000)
    assert done.exit_code is None
    assert not done.timed_out
    assert "cannot start 'roofwatch-no-such-program'" in done.output
    assert "No such file or directory" in done.output


def test_child_runs_in_its_own_session(tmp_path: Path) -> None:
    done = run_python("import os; print(os.getsid(0) == os.getpid())", tmp_path)
    assert done.output == "True\n"


def test_address_space_limit_stops_a_greedy_suite(tmp_path: Path) -> None:
    confinement = sandbox.Confinement(memory_limit=512 * 2**20)
    done = sandbox.run(["python", "-c", "x = bytearray(1024 * 2**20)"], tmp_path, sandbox.scrubbed_env(),
                       60, 100_000, confinement)
    assert done.exit_code == 1 and "MemoryError" in done.output
    fits = sandbox.run(["python", "-c", "x = bytearray(16 * 2**20)"], tmp_path, sandbox.scrubbed_env(),
                       60, 100_000, confinement)
    assert fits.exit_code == 0, fits.output


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="switching users needs root")
def test_root_worker_runs_the_suite_as_the_unprivileged_user(tmp_path: Path) -> None:
    done = sandbox.run(["/usr/bin/id", "-u"], tmp_path, sandbox.scrubbed_env(), 10, 1000,
                       sandbox.Confinement(user="nobody"))
    assert done.output.strip() == str(pwd.getpwnam("nobody").pw_uid)


def test_unknown_suite_user_is_reported_not_raised(tmp_path: Path) -> None:
    done = sandbox.run(["/usr/bin/id"], tmp_path, sandbox.scrubbed_env(), 10, 1000,
                       sandbox.Confinement(user="roofwatch-no-such-user"))
    if os.geteuid() == 0:
        assert done.exit_code is None and "roofwatch-no-such-user" in done.output
    else:
        assert done.exit_code == 0  # only root switches users; others run as themselves


def test_suite_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "suite.pid"
    (tmp_path / "suite.py").write_text(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    script = tmp_path / "worker.py"
    script.write_text(
        "from pathlib import Path\nfrom roofwatch.workers import sandbox\n"
        f"sandbox.run(['python', 'suite.py'], Path({str(tmp_path)!r}), sandbox.scrubbed_env(), 600, 1000)\n")
    parent = subprocess.Popen([sys.executable, str(script)], cwd=Path(__file__).resolve().parents[2],
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    suite = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while is_alive(suite) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not is_alive(suite), "the suite outlived the worker that started it"


def test_private_home_is_in_memory_and_capped_inside_a_writable_folder(tmp_path: Path) -> None:
    """HOME lies inside the writable result folder; the folder's bind must not replace it with the host's."""
    from roofwatch.workers import bubblewrap

    bubblewrap.check()
    scratch = tmp_path / "scratch"
    (scratch / "home").mkdir(parents=True)
    isolation = bubblewrap.Isolation(writable=(scratch,), private=(scratch / "home",), private_size=1 << 20,
                                     devices=())
    code = ("import errno, os\n"
            "try:\n"
            f"    open({str(scratch / 'home' / 'filler')!r}, 'wb').write(b'x' * (4 << 20))\n"
            "except OSError as exc:\n"
            "    print(errno.errorcode[exc.errno])\n")
    done = sandbox.run(["python", "-c", code], scratch, sandbox.scrubbed_env(), 30, 10_000,
                       sandbox.Confinement(isolation=isolation))
    assert done.output.strip() == "ENOSPC", done.output
    assert list((scratch / "home").iterdir()) == []  # nothing reached the host's folder
