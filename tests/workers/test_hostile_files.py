"""Hostile result files, links and configs through `roofwatch run` in bubblewrap, on SQLite and PostgreSQL.

What a commit controls (its result files, ``pyproject.toml``, ``setup_inputs``, the paths a
backfill lays over) is read without following links and within limits; one suite's bad file
makes that suite ``errored`` and nothing else: the good suites are stored and the run finishes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from support.environment import engine_for
from support.hostile_files import ATTACKS, host_result, hostile_results_repo, link_commit, suite
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.workers import bubblewrap


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database URL for one `roofwatch run` (its own PostgreSQL database, or a SQLite file)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'data' / 'roofwatch.db'}"
        return
    from support.environment import fresh_postgres_database

    with fresh_postgres_database("roofwatch_hostile_files", "the PostgreSQL hostile-file test") as url:
        yield url


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    engine = engine_for(url)
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql))]
    finally:
        engine.dispose()


# A correctness suite without pytest: it writes the JUnit XML the runner asks for itself.
JUNIT_WRITER = """\
import sys
path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
open(path, "w").write('<testsuite><testcase classname="bench" name="test_it"/></testsuite>')
"""


def run(tmp_path: Path, database: str, *args: str) -> tuple[int, str]:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": database}
    roofwatch(["db", "upgrade"], env)
    done = roofwatch(["run", *args, "--force"], env, check=False, timeout=400)
    return done.returncode, done.stdout + done.stderr


def test_each_bad_result_file_fails_its_own_suite_only(tmp_path: Path, database: str) -> None:
    bubblewrap.check()
    repo = tmp_path / "repo"
    hostile_results_repo(repo, host_result(tmp_path / "host.json"))

    code, output = run(tmp_path, database, "--repo", str(repo), "--rev", "main")

    assert "Traceback" not in output, output
    [(state, error)] = query(database, "SELECT state, error FROM run")
    assert state == "errored" and set(ATTACKS) <= set(str(error).removeprefix("suites not passed: ").split(", "))
    suites = {name: (status, reason) for name, status, reason in query(
        database, "SELECT name, status, reason FROM suiteexecution")}
    assert {name for name, (status, _) in suites.items() if status == "passed"} == {"good", "nul", "longname"}
    for attack in ATTACKS:
        assert suites[attack][0] == "errored", (attack, suites[attack])
    assert "symbolic link" in suites["link"][1]
    assert "nested too deeply" in suites["deep"][1]
    for attack in ("nan", "zero", "negative"):
        assert "median must be a positive, finite number of seconds" in suites[attack][1]
    assert "rounds must be a whole number" in suites["rounds"][1]
    assert "extra_info must be an object" in suites["extra"][1]
    assert "holds a string longer than 64 KiB" in suites["longstring"][1]
    assert "more than 10,000 benchmarks" in suites["many"][1] and "ROOFWATCH_MAX_BENCHMARKS" in suites["many"][1]
    names = {str(name) for (name,) in query(database, "SELECT name FROM benchmark")}
    assert "host_secret" not in names
    assert "test_good" in names and "test_nul\ufffdinside" in names
    [long_name] = [name for name in names if name.startswith("test_éé")]
    assert len(long_name.encode()) <= 1024 and "…#" in long_name
    assert query(database, "SELECT count(*) FROM measurement") == [(3,)]
    [(output,)] = query(database, "SELECT output_tail FROM suiteexecution WHERE name = 'nul'")
    assert "suite output with a NUL: \ufffd" in str(output)


def test_links_in_a_commit_are_never_followed(tmp_path: Path, database: str) -> None:
    """pyproject.toml and a setup input that link to host files: refused, nothing of them read or run."""
    bubblewrap.check()
    host_pyproject = tmp_path / "host-pyproject.toml"
    host_pyproject.write_text(suite("host", "python -c 'print(123)'", kind="correctness"))
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    linked_config, linked_input = tmp_path / "linked-config", tmp_path / "linked-input"
    init(linked_config)
    link_commit(linked_config, {"pyproject.toml": host_pyproject}, {"README.md": "x\n"}, "Link the config", 1)
    init(linked_input)
    link_commit(linked_input, {"inputs/lock.txt": secret}, {"pyproject.toml": suite(
        "checks", "python -c 'print(1)'", kind="correctness",
        extra='setup = "true"\nsetup_inputs = ["inputs/lock.txt"]')}, "Link a setup input", 1)

    _, output = run(tmp_path, database, "--repo", str(linked_config), "--rev", "main")
    assert "Traceback" not in output
    assert query(database, "SELECT state, error FROM run") == [
        ("errored", "pyproject.toml: 'pyproject.toml' is or goes through a symbolic link; it is not read")]

    _, output = run(tmp_path, database, "--repo", str(linked_input), "--rev", "main")
    assert "Traceback" not in output
    [(status, reason)] = query(database, "SELECT status, reason FROM suiteexecution WHERE name = 'checks'")
    assert status == "errored" and "symbolic link" in str(reason)


@pytest.mark.parametrize("suite_paths", [["bench/sub"], ["bench"]])
def test_backfill_over_a_linked_folder_deletes_nothing_on_the_host(tmp_path: Path, suite_paths: list[str]) -> None:
    """Today's suite laid over a commit whose ``bench`` links to a host folder: the link goes, the folder stays."""
    bubblewrap.check()
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "keep.txt").write_text("precious\n")
    repo = tmp_path / "repo"
    init(repo)
    old = link_commit(repo, {"bench": victim}, {"kernel.py": "X = 1\n"}, "A commit that links bench", 1)
    (repo / "bench").unlink()
    today = commit(repo, "Today's suite", {"bench/sub/check.py": JUNIT_WRITER}, 2)
    config = tmp_path / "suites.toml"
    config.write_text(suite("checks", "python bench/sub/check.py", kind="correctness",
                            extra=f'suites_from = "{today}"\nsuite_paths = {suite_paths!r}'.replace("'", '"')))
    database = f"sqlite:///{tmp_path / 'data' / 'roofwatch.db'}"

    _, output = run(tmp_path, database, "--repo", str(repo), "--rev", old, "--suites", str(config))

    assert (victim / "sub" / "keep.txt").read_text() == "precious\n"
    assert "Traceback" not in output
    [(status, reason, tail)] = query(database, "SELECT status, reason, output_tail FROM suiteexecution")
    assert status == "passed", (reason, tail)
    assert query(database, "SELECT state FROM run") == [("succeeded",)]


def test_a_commits_setup_never_reaches_another_commits_suites(tmp_path: Path) -> None:
    """A setup that plants ``sitecustomize.py`` in its cache: its own suite imports it, later commits' never."""
    bubblewrap.check()
    plant = ("setup = 'mkdir -p $ROOFWATCH_SETUP_CACHE/python && "
             "echo \"print(42424242)\" > $ROOFWATCH_SETUP_CACHE/python/sitecustomize.py'")
    repo = tmp_path / "repo"
    init(repo)
    probe = "python -c 'print(0)'"
    planted = commit(repo, "Plant", {"pyproject.toml": suite("probe", probe, kind="correctness", extra=plant)}, 1)
    plain = commit(repo, "No setup", {"pyproject.toml": suite("probe", probe, kind="correctness")}, 2)
    other = commit(repo, "Another setup", {"pyproject.toml": suite("probe", probe, kind="correctness",
                                                                   extra='setup = "true"')}, 3)
    database = f"sqlite:///{tmp_path / 'data' / 'roofwatch.db'}"

    _, output = run(tmp_path, database, "--repo", str(repo), "--rev", planted, "--rev", plain, "--rev", other)

    rows = query(database, "SELECT c.sha, s.output_tail FROM suiteexecution s JOIN run r ON s.run_id = r.id "
                           "JOIN \"commit\" c ON r.commit_id = c.id")
    hijacked = {sha: "42424242" in str(out) for sha, out in rows}
    assert hijacked == {planted: True, plain: False, other: False}, output


def test_a_stored_suite_cannot_take_its_files_from_another_repositorys_mirror(tmp_path: Path) -> None:
    from roofwatch.common.errors import SuiteConfigError
    from roofwatch.suite_config.declared import SuiteSpec
    from roofwatch.workers.backfill import lay_over

    mirrors = tmp_path / "data" / "mirrors"
    other = mirrors / "private-0123456789ab.git"
    other.mkdir(parents=True)
    spec = SuiteSpec(name="steal", kind="correctness", command="cat secret", suites_repo=str(other),
                     suite_paths=["secret"])
    with pytest.raises(SuiteConfigError, match="inside this worker's data dir"):
        lay_over(mirrors / "own-0123456789ab.git", tmp_path / "tree", spec)


@pytest.mark.redis
@pytest.mark.postgres
def test_a_suite_named_with_300000_letters_is_run_stored_and_shown_cut(tmp_path: Path, database: str) -> None:
    """Its name is redacted, stored and printed: each linear, where redaction took 117 s of ingest for
    100,000 letters and Rich's highlighting of the progress line held the command for minutes."""
    from support.hostile_files import WRITE_RESULT

    bubblewrap.check()
    repo = tmp_path / "repo"
    init(repo)
    name = "s" * 300_000
    commit(repo, "A long suite name", {"write_result.py": WRITE_RESULT,
                                        "pyproject.toml": suite(name, "python write_result.py good")}, 1)

    code, output = run(tmp_path, database, "--repo", str(repo))

    assert code == 0 and "Traceback" not in output, output[-3000:]
    assert "s…[298,000 more characters]" in "".join(output.split("\n"))  # lines wrap at COLUMNS=200
    assert query(database, "SELECT state FROM run") == [("succeeded",)]
    assert query(database, "SELECT count(*) FROM measurement") == [(1,)]


def test_bad_files_lose_nothing_through_a_worker_on_redis_and_postgres(tmp_path: Path) -> None:
    """The same hostile suites through a real worker: each bad file errors its own suite, the good
    ones are stored, both runs finish, and the worker is still there for the second."""
    from support.environment import fresh_postgres_database
    from support.worker_support import PrivateRedis, WorkerProcess

    bubblewrap.check()
    repo = tmp_path / "repo"
    hostile_results_repo(repo, host_result(tmp_path / "host.json"))
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    with fresh_postgres_database("roofwatch_hostile_worker", "the distributed hostile-file test") as url:
        service = {"ROOFWATCH_DATA_DIR": str(tmp_path / "service"), "ROOFWATCH_BROKER_URL": redis.url,
                   "ROOFWATCH_DATABASE_URL": url}
        worker = WorkerProcess([], {**service, "ROOFWATCH_DATA_DIR": str(tmp_path / "worker")}, tmp_path / "worker.log")
        try:
            roofwatch(["db", "upgrade"], service)
            worker.start()
            for _ in range(2):
                done = roofwatch(["run", "--repo", str(repo), "--rev", "main", "--force"], service, check=False,
                                 timeout=300)
                assert "Traceback" not in done.stdout + done.stderr
            alive = worker.process is not None and worker.process.poll() is None
        finally:
            worker.stop()
            redis.stop()
        runs = query(url, "SELECT state FROM run ORDER BY id")
        passed = query(url, "SELECT count(*) FROM suiteexecution WHERE status = 'passed'")
        errored = query(url, "SELECT count(*) FROM suiteexecution WHERE status = 'errored'")
        names = {str(name) for (name,) in query(url, "SELECT name FROM benchmark")}
    assert alive, (tmp_path / "worker.log").read_text()[-3000:]
    assert runs == [("errored",), ("errored",)], (tmp_path / "worker.log").read_text()[-3000:]
    assert passed == [(6,)] and errored == [(2 * len(ATTACKS),)]
    assert "host_secret" not in names and "test_nul\ufffdinside" in names
