"""A pull request cannot change how it is judged: every head below is really 50 % slower.

The repository's ``rmsnorm`` sleeps 40 ms on the base and 60 ms on every head (the commit sets it,
so the answer is certain on any host); ``softmax`` sleeps 40 ms on both. Each head also changes
roofwatch's settings in one of the ways a pull request could try to hide the slowdown — its own
``min_effect``, a per-benchmark ``min_effects``, a deselecting command, a renamed benchmark, a
backfill of its own suite, its own timer — and the base's settings must judge it anyway:
``roofwatch compare`` exits 1 and names the regression, or lists the benchmark as missing on the
head, and says what the head would change after merge. The signed-webhook path gives the same
verdicts as a GitHub status, and a maintainer's ``/roofwatch accept`` turns a missing benchmark's
red check green.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.fake_github import FakeGitHub
from support.github_support import SECRET, comment_payload, deliver, pull_request_payload
from support.sample_repo import commit, git, init
from support.tests_support import roofwatch

from roofwatch.service.core import embedded

REPO = "acme/judged"
# Long enough that a late wake-up on a loaded host (milliseconds) is small beside the planted +50 %.
FAST, SLOW = 0.040, 0.060
BENCH_COMMAND = ("python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 "
                 "--benchmark-max-time=0.02 --benchmark-warmup=off")


def pyproject(min_effect: str = "10%", command: str = BENCH_COMMAND, suite_extra: str = "", extra: str = "") -> str:
    return (f'[project]\nname = "judged"\nversion = "0.0.1"\n\n[tool.roofwatch]\nmin_effect = "{min_effect}"\n{extra}\n'
            f'[[tool.roofwatch.suites]]\nname = "benchmarks"\nkind = "benchmark"\ncommand = {json.dumps(command)}\n'
            f"{suite_extra}")


def kernels(rmsnorm: float) -> str:
    return f"import time\n\n\ndef rmsnorm():\n    time.sleep({rmsnorm})\n\n\ndef softmax():\n    time.sleep({FAST})\n"


def bench(rmsnorm_name: str = "test_rmsnorm", with_rmsnorm: bool = True) -> str:
    text = "from kernels import rmsnorm, softmax\n\n\n"
    if with_rmsnorm:
        text += f"def {rmsnorm_name}(benchmark):\n    benchmark(rmsnorm)\n\n\n"
    return text + "def test_softmax(benchmark):\n    benchmark(softmax)\n"


FAKE_TIMER = "import time\n\n\ndef clock():\n    return time.perf_counter() * 2 / 3\n"

# How each head tries to set its own bar, on top of the slower kernel: files it writes.
HEADS: dict[str, dict[str, str | None]] = {
    "nothing": {},
    "min_effect": {"pyproject.toml": pyproject(min_effect="60%")},
    "min_effects": {"pyproject.toml": pyproject(suite_extra='min_effects = { "test_rmsnorm*" = "100%" }\n')},
    "deselect": {"pyproject.toml": pyproject(command=BENCH_COMMAND + ' -k "not rmsnorm"')},
    "timer": {"pyproject.toml": pyproject(command=BENCH_COMMAND + " --benchmark-timer=faketimer.clock"),
              "faketimer.py": FAKE_TIMER},
    "rename": {"bench/test_kernels.py": bench("test_rmsnorm_v2")},
    "addopts_deselect": {"pyproject.toml": pyproject() + '\n[tool.pytest.ini_options]\naddopts = "-k \'not rmsnorm\'"\n'},
    "addopts_timer": {"pyproject.toml": pyproject() + '\n[tool.pytest.ini_options]\naddopts = '
                      '"--benchmark-timer=faketimer.clock"\n', "faketimer.py": FAKE_TIMER},
}


def build(repo: Path) -> dict[str, str]:
    """main: the base; one branch per head, each 50 % slower on rmsnorm and trying one way to hide it."""
    init(repo)
    shas = {"base": commit(repo, "Add kernels", {"pyproject.toml": pyproject(), "kernels.py": kernels(FAST),
                                                 "bench/test_kernels.py": bench()}, 1)}
    heads = dict(HEADS)
    heads["backfill"] = {"pyproject.toml": pyproject(suite_extra=f'suites_from = "{shas["base"]}"\n'
                                                                 'suite_paths = ["bench/"]\n')}
    # The head moves the benchmark folder the base's command names: the base's suite cannot run on it.
    heads["moved"] = {"bench/test_kernels.py": None, "benchmarks/test_kernels.py": bench(),
                      "pyproject.toml": pyproject(command=BENCH_COMMAND.replace(" bench ", " benchmarks "))}
    heads["renamed_declared"] = {"bench/test_kernels.py": bench("test_rmsnorm_v2"),
                                 "pyproject.toml": pyproject(extra='renamed = { "test_rmsnorm" = "test_rmsnorm_v2" }')}
    for when, (name, files) in enumerate(sorted(heads.items()), start=2):
        git(repo, "checkout", "-q", "-b", name, shas["base"])
        for gone in [path for path, text in files.items() if text is None]:
            git(repo, "rm", "-q", gone)
        kept = {path: text for path, text in files.items() if text is not None}
        shas[name] = commit(repo, f"rmsnorm: slower ({name})", {"kernels.py": kernels(SLOW), **kept}, when)
    git(repo, "checkout", "-q", "main")
    # Deleted on purpose, and the base judges it with min_effect 50 %: identical code is then
    # "no change" within the rounds allowed however busy the host, so only the missing benchmark
    # stands between the check and green.
    git(repo, "checkout", "-q", "-b", "retire", shas["base"])
    shas["retire_base"] = commit(repo, "Judge at 50 %", {"pyproject.toml": pyproject(min_effect="50%")}, 40)
    shas["retire"] = commit(repo, "Retire rmsnorm", {"bench/test_kernels.py": bench(with_rmsnorm=False)}, 41)
    git(repo, "checkout", "-q", "main")
    shas["path"] = str(repo)
    return shas


@pytest.fixture(scope="module")
def judged_repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build(tmp_path_factory.mktemp("judged") / "repo")


def env(tmp_path: Path) -> dict[str, str]:
    return {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
            "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "8"}


def compare(judged_repo: dict[str, str], tmp_path: Path, head: str, *extra: str) -> tuple[int, dict]:
    done = roofwatch(["compare", judged_repo["base"], judged_repo[head], "--repo", judged_repo["path"],
                      "--format", "json", *extra], env(tmp_path), check=False)
    assert done.stdout.strip(), done.stderr
    return done.returncode, json.loads(done.stdout)


def directions(report: dict) -> dict[str, str]:
    return {row["benchmark"]: row["direction"] for row in report["benchmarks"]}


def changed(report: dict) -> set[str]:
    return {c["what"] for c in report["settings_changes"]}


@pytest.mark.parametrize("head, what", [
    ("min_effect", "min_effect"),
    ("min_effects", "suite benchmarks: min_effects"),
    ("deselect", "suite benchmarks: command"),
    ("timer", "suite benchmarks: command"),
    ("backfill", "suite benchmarks: suites_from"),
])
def test_a_head_that_changes_how_it_is_run_or_counted_is_judged_by_the_base(
        judged_repo: dict[str, str], tmp_path: Path, head: str, what: str) -> None:
    code, report = compare(judged_repo, tmp_path, head)
    assert code == 1 and report["verdict"] == "regression", report
    assert directions(report)["test_rmsnorm"] == "regression"
    rmsnorm = next(r for r in report["benchmarks"] if r["benchmark"] == "test_rmsnorm")
    # Counted from the base's 10 % (or the noise, when larger): never from a head's 60 % or 100 %.
    assert rmsnorm["change_pct"] > rmsnorm["threshold_pct"] >= 10.0 and rmsnorm["threshold_pct"] < 50, rmsnorm
    assert report["min_effect_pct"] == pytest.approx(10.0)
    assert what in changed(report), report["settings_changes"]
    assert report["missing_on_head"] == [] and report["judged_by"] == "pyproject.toml of the base commit"
    assert report["suites_source"] == "pyproject.toml of the base commit"


def test_a_head_that_changes_nothing_of_roofwatch_is_judged_as_before(judged_repo: dict[str, str],
                                                                      tmp_path: Path) -> None:
    code, report = compare(judged_repo, tmp_path, "nothing")
    assert code == 1 and report["verdict"] == "regression", report
    assert directions(report)["test_rmsnorm"] == "regression"
    assert report["settings_changes"] == [] and report["missing_on_head"] == [] and report["new_on_head"] == []


@pytest.mark.parametrize("head, why", [
    ("rename", "not reported by the head"),
    ("addopts_deselect", "not reported by the head"),
    ("addopts_timer", "timed with other options on the head (timer perf_counter → clock)"),
])
def test_a_benchmark_the_head_stops_reporting_keeps_it_from_green(judged_repo: dict[str, str], tmp_path: Path,
                                                                  head: str, why: str) -> None:
    code, report = compare(judged_repo, tmp_path, head)
    assert code == 1 and report["verdict"] == "missing", report
    missing = {m["benchmark"]: m["reason"] for m in report["missing_on_head"]}
    assert "test_rmsnorm" in missing and why in missing["test_rmsnorm"], missing
    if head == "rename":
        assert report["new_on_head"] == [{"suite": "benchmarks", "benchmark": "test_rmsnorm_v2"}]


def test_a_head_the_bases_suites_cannot_run_on_is_never_green(judged_repo: dict[str, str], tmp_path: Path) -> None:
    code, report = compare(judged_repo, tmp_path, "moved")
    assert code == 1 and report["state"] == "failed", report
    assert "suites did not finish: benchmarks" in report["error"] and "head benchmarks" in report["error"]
    assert {m["benchmark"] for m in report["missing_on_head"]} == {"test_rmsnorm", "test_softmax"}
    assert all("did not finish" in m["reason"] for m in report["missing_on_head"])
    assert "suite benchmarks: command" in changed(report)


def test_a_rename_only_the_head_declares_pairs_the_names_and_still_waits_for_a_maintainer(
        judged_repo: dict[str, str], tmp_path: Path) -> None:
    code, report = compare(judged_repo, tmp_path, "renamed_declared")
    assert code == 1 and report["verdict"] == "regression", report  # the pair shows the slowdown
    row = next(r for r in report["benchmarks"] if r["benchmark"] == "test_rmsnorm")
    assert row["head_benchmark"] == "test_rmsnorm_v2" and row["direction"] == "regression"
    [missing] = report["missing_on_head"]
    assert missing["benchmark"] == "test_rmsnorm" and "renamed to test_rmsnorm_v2 by the head" in missing["reason"]
    assert "renamed test_rmsnorm" in changed(report) and report["new_on_head"] == []


def test_a_stored_config_that_overrides_the_suites_judges_with_the_base_not_the_head(
        judged_repo: dict[str, str], tmp_path: Path) -> None:
    suites = tmp_path / "suites.toml"
    suites.write_text(f'[tool.roofwatch]\noverride = true\n\n[[tool.roofwatch.suites]]\nname = "benchmarks"\n'
                      f'kind = "benchmark"\ncommand = {json.dumps(BENCH_COMMAND)}\n')
    roofwatch(["repo", "add", REPO, "--clone-url", judged_repo["path"], "--suites", str(suites)], env(tmp_path))
    done = roofwatch(["compare", judged_repo["base"], judged_repo["min_effect"], "--repo", REPO, "--format", "json"],
                     env(tmp_path), check=False)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "regression", report
    assert report["min_effect_pct"] == pytest.approx(10.0)  # the base's, not the head's 60 %
    assert [(c["what"], c["before"], c["after"]) for c in report["settings_changes"]] == [
        ("min_effect", "10 %", "60 %")]


def test_compare_accepts_missing_benchmarks_when_told_and_says_who(judged_repo: dict[str, str],
                                                                   tmp_path: Path) -> None:
    done = roofwatch(["compare", judged_repo["retire_base"], judged_repo["retire"], "--repo", judged_repo["path"],
                      "--accept-missing", "--format", "json"], env(tmp_path), check=False)
    report = json.loads(done.stdout)
    [missing] = report["missing_on_head"]
    assert missing["benchmark"] == "test_rmsnorm" and missing["accepted_via"] == "cli" and missing["accepted_by"]
    assert report["verdict"] in ("no-change", "inconclusive"), report  # what the timings say, nothing hidden
    assert done.returncode == (0 if report["verdict"] == "no-change" else 3)


# --- the same through the signed webhook and the fake GitHub ------------------------------------


@pytest.fixture
def app_client(roofwatch_env: Path, fake_github: FakeGitHub, judged_repo: dict[str, str],
               monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    from support.environment import _reset_caches

    for name, value in {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN,
                        "GITHUB_API_URL": fake_github.url, "AB_MIN_ROUNDS": "3", "AB_MAX_ROUNDS": "8",
                        "PUBLIC_URL": "http://roofwatch.test"}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        register(session, REPO, judged_repo["path"], "main")
    with TestClient(create_app()) as client:
        yield client
    assert embedded.MEASURE.drain(600) and embedded.REPORTS.drain(120)


def settle() -> None:
    assert embedded.MEASURE.drain(900), "background work did not finish"
    assert embedded.REPORTS.drain(120), "reports were not delivered"


def open_pull(client: TestClient, corpus: Path, number: int, head: str, base: str) -> None:
    response = deliver(client, "pull_request", pull_request_payload(corpus, "opened", REPO, number, head, base))
    assert response.status_code == 202 and response.json()["outcome"] == "accepted", response.text
    settle()


@pytest.mark.parametrize("head, number", [("min_effect", 11), ("deselect", 12), ("timer", 13)])
def test_through_the_webhook_a_head_that_sets_its_own_bar_fails_its_check(
        app_client: TestClient, fake_github: FakeGitHub, judged_repo: dict[str, str], shared_corpus: Path,
        head: str, number: int) -> None:
    open_pull(app_client, shared_corpus, number, judged_repo[head], judged_repo["base"])
    final = fake_github.statuses(REPO, judged_repo[head])[-1]
    assert final["state"] == "failure" and "test_rmsnorm" in final["description"], final
    (comment,) = fake_github.comments(REPO, number)
    assert "This pull request changes roofwatch's settings" in comment["body"]
    assert "They take effect after merge" in comment["body"]
    assert fake_github.violations == []


def test_through_the_webhook_a_missing_benchmark_fails_until_a_maintainer_accepts_it(
        app_client: TestClient, fake_github: FakeGitHub, judged_repo: dict[str, str], shared_corpus: Path) -> None:
    head, number = judged_repo["retire"], 21
    open_pull(app_client, shared_corpus, number, head, judged_repo["retire_base"])
    missing = fake_github.statuses(REPO, head)[-1]
    assert missing["state"] == "failure" and "missing on the head: test_rmsnorm" in missing["description"], missing
    (comment,) = fake_github.comments(REPO, number)
    assert "Missing on the head (1): not a green check" in comment["body"]
    page = app_client.get(missing["target_url"].removeprefix("http://roofwatch.test"))
    assert page.status_code == 200 and "Missing on the head (1)" in page.text and "test_rmsnorm" in page.text

    # The author may not excuse their own pull request, whatever their permission.
    fake_github.add_pull(REPO, number, head_sha=head, head_ref="retire", base_ref="main",
                         base_sha=judged_repo["retire_base"], user="octocat", author_association="OWNER")
    fake_github.set_permission(REPO, "octocat", "admin")
    own = comment_payload(shared_corpus, REPO, number, "/roofwatch accept", association="OWNER", login="octocat")
    assert deliver(app_client, "issue_comment", own).json()["outcome"] == "accepted"
    settle()
    assert fake_github.statuses(REPO, head)[-1]["state"] == "failure"

    fake_github.set_permission(REPO, "keeper", "write")
    accept = comment_payload(shared_corpus, REPO, number, "Retiring it is fine.\n/roofwatch accept test_rmsnorm",
                             association="MEMBER", login="keeper")
    assert deliver(app_client, "issue_comment", accept).json()["outcome"] == "accepted"
    settle()
    final = fake_github.statuses(REPO, head)[-1]
    assert final["state"] == "success", final
    (edited,) = fake_github.comments(REPO, number)
    assert edited["id"] == comment["id"] and "accepted by `keeper`" in edited["body"]
    assert fake_github.violations == []
