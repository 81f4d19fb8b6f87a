"""End to end: signed webhooks in, the pull-request A/B runs, GitHub (a fake on loopback) hears back.

The fake server checks every request against GitHub's REST description; the repository is a
local git repository registered under the payload's name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select
from support.fake_github import FakeGitHub
from support.github_support import SECRET, comment_payload, deliver, pull_request_payload
from support.sample_repo import commit, git, init

from roofwatch.service.core import embedded
from roofwatch.service.github.comment import MARKER

REPO = "acme/kernels"

# The benchmark's time is a 4 ms sleep the commit sets, and the repository says a change under
# 50 % does not count: identical code is then shown to be "no change" within the rounds these
# tests allow, however busy the host (pure-Python timings vary 5–25 % between processes here).
PYPROJECT = """\
[project]
name = "tiny-kernels"
version = "0.0.1"

[tool.roofwatch]
min_effect = "50%"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
"""
KERNEL = "def scale(xs, a):\n    return [a * x for x in xs]\n"
BUGGY = "def scale(xs, a):\n    return [a * x for x in xs[:-1]]\n"
CHECKS = "from kernel import scale\n\n\ndef test_scale():\n    assert scale([1.0, 2.0, 3.0], 2.0) == [2.0, 4.0, 6.0]\n"
BENCH = ("import time\n\nfrom kernel import scale\n\nXS = [float(i) for i in range(200)]\n\n\n"
         "def test_scale(benchmark):\n    benchmark(lambda: (time.sleep(0.004), scale(XS, 3.0)))\n")


@pytest.fixture
def kernels_repo(tmp_path: Path) -> dict[str, str]:
    """main: base → docs; feature (from base): bug → fix. The merge-base of feature and main is base."""
    repo = tmp_path / "kernels"
    init(repo)
    shas = {"base": commit(repo, "Add scale", {"pyproject.toml": PYPROJECT, "kernel.py": KERNEL,
                                                "checks/test_kernel.py": CHECKS, "bench/test_kernel.py": BENCH}, 1)}
    git(repo, "checkout", "-q", "-b", "feature")
    shas["bug"] = commit(repo, "scale: skip the copy of the last element", {"kernel.py": BUGGY}, 2)
    shas["fix"] = commit(repo, "scale: every element again", {"kernel.py": KERNEL, "NOTES.md": "fixed\n"}, 3)
    git(repo, "checkout", "-q", "main")
    shas["docs"] = commit(repo, "Document scale", {"README.md": "scale\n"}, 4)
    shas["path"] = str(repo)
    return shas


@pytest.fixture
def app_client(roofwatch_env: Path, fake_github: FakeGitHub, kernels_repo: dict[str, str],
               monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    for name, value in {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN, "GITHUB_API_URL": fake_github.url,
                        "AB_MAX_ROUNDS": "6", "PUBLIC_URL": "http://roofwatch.test"}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        register(session, REPO, kernels_repo["path"], "main")
    with TestClient(create_app()) as client:
        yield client
    assert embedded.MEASURE.drain(600) and embedded.REPORTS.drain(120)


def _settle() -> None:
    """Every run started so far is finished, and every report it published has been sent."""
    assert embedded.MEASURE.drain(900), "background work did not finish"
    assert embedded.REPORTS.drain(120), "reports were not delivered"


# What identical code may come back as: green, or, when a saturated host leaves the A/B too
# noisy within its rounds, an honest "inconclusive" (a pending status); never slower or failed.
SAME_CODE = ("success", "inconclusive")


def _phases(statuses: list[dict[str, str]]) -> list[str]:
    """What GitHub was shown, in order: 'waiting', 'queued', 'running' for pending states, else the state.

    The outbox sends a row's newest state, so a phase superseded before the reporter sent it
    (queued, then running a few ms later) is never shown; the order and the verdict always are.
    """
    return [s["description"].split(" ")[0].rstrip(":") if s["state"] == "pending" else s["state"] for s in statuses]


def _in_order(shown: list[str], possible: list[str]) -> bool:
    """``shown`` follows ``possible``'s order; a phase may be shown again (each A/B round updates "running")."""
    remaining = iter(possible)
    distinct = [phase for i, phase in enumerate(shown) if i == 0 or phase != shown[i - 1]]
    return all(phase in remaining for phase in distinct)


def test_pull_request_gets_statuses_and_one_living_comment(app_client: TestClient, fake_github: FakeGitHub,
                                                           kernels_repo: dict[str, str], shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Run, WebhookDelivery

    shas = kernels_repo
    opened = pull_request_payload(shared_corpus, "opened", REPO, 7, shas["bug"], shas["docs"])
    response = deliver(app_client, "pull_request", opened)
    assert response.status_code == 202, response.text
    assert response.json()["outcome"] == "accepted"
    _settle()

    with session_scope() as session:
        run = session.exec(select(Run).where(Run.pr_number == 7)).one()
        assert run.trigger == "pull_request" and run.base_sha == shas["base"]  # the merge-base, not main's tip
        assert run.state == "failed" or run.state == "succeeded"
        delivery = session.exec(select(WebhookDelivery)).one()
        assert delivery.outcome == "accepted" and f"run {run.id}" in delivery.detail

    states = fake_github.statuses(REPO, shas["bug"])
    assert _phases(states)[-1] == "failure" and _in_order(_phases(states), ["queued", "running", "failure"]), states
    assert "test_scale" in states[-1]["description"]
    assert all(s["context"] == "roofwatch" and s["target_url"].startswith("http://roofwatch.test/compare/")
               for s in fake_github.statuses(REPO, shas["bug"]))
    (first,) = fake_github.comments(REPO, 7)
    assert MARKER in first["body"] and "test_scale" in first["body"] and shas["bug"][:7] in first["body"]

    synchronize = pull_request_payload(shared_corpus, "synchronize", REPO, 7, shas["fix"], shas["docs"])
    assert deliver(app_client, "pull_request", synchronize).status_code == 202
    _settle()

    final = fake_github.statuses(REPO, shas["fix"])[-1]
    assert _phases([final])[0] in SAME_CODE, final  # fixed code: no failure, and no timing change to report
    (edited,) = fake_github.comments(REPO, 7)
    assert edited["id"] == first["id"] and shas["fix"][:7] in edited["body"]
    assert "No new test failures." in edited["body"] and "new test failure" in first["body"]
    assert len(fake_github.calls("issues/create-comment")) == 1
    assert len(fake_github.calls("issues/update-comment")) == 1

    compare_link = final["target_url"].removeprefix("http://roofwatch.test")
    page = app_client.get(compare_link)
    assert page.status_code == 200 and "no-change" in page.text or "inconclusive" in page.text

    closed = pull_request_payload(shared_corpus, "closed", REPO, 7, shas["fix"], shas["docs"])
    assert deliver(app_client, "pull_request", closed).json()["outcome"] == "accepted"
    _settle()
    assert fake_github.violations == []


def test_fork_waits_for_a_maintainer_then_runs_on_command(app_client: TestClient, fake_github: FakeGitHub,
                                                          kernels_repo: dict[str, str], shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Run

    shas = kernels_repo
    opened = pull_request_payload(shared_corpus, "opened", REPO, 9, shas["fix"], shas["docs"],
                                  head_repository="stranger/kernels", association="NONE", login="stranger")
    assert deliver(app_client, "pull_request", opened).status_code == 202
    _settle()
    (waiting,) = fake_github.statuses(REPO, shas["fix"])
    assert waiting["state"] == "pending" and "waiting for a maintainer" in waiting["description"]
    assert "fork" in waiting["description"]
    with session_scope() as session:
        assert session.exec(select(Run)).all() == []  # the fork's code did not run

    drive_by = comment_payload(shared_corpus, REPO, 9, "/roofwatch run", association="NONE")
    response = deliver(app_client, "issue_comment", drive_by)
    assert response.json()["outcome"] == "ignored" and "no write access" in response.json()["detail"]

    fake_github.add_pull(REPO, 9, head_sha=shas["fix"], head_ref="feature", base_ref="main", base_sha=shas["docs"],
                         head_repo_full_name="stranger/kernels", user="stranger", author_association="NONE")
    fake_github.set_permission(REPO, "Codertocat", "write")
    approval = comment_payload(shared_corpus, REPO, 9, "Looks safe.\n/roofwatch run", association="MEMBER",
                               login="Codertocat")
    assert deliver(app_client, "issue_comment", approval).json()["outcome"] == "accepted"
    _settle()
    assert len(fake_github.calls("pulls/get")) == 1
    assert [c.path for c in fake_github.calls("repos/get-collaborator-permission-level")] == [
        f"/repos/{REPO}/collaborators/Codertocat/permission"]
    shown = _phases(fake_github.statuses(REPO, shas["fix"]))
    assert shown[0] == "waiting" and shown[-1] in SAME_CODE, shown
    assert _in_order(shown, ["waiting", "queued", "running", shown[-1]]), shown
    with session_scope() as session:
        assert [r.pr_number for r in session.exec(select(Run)).all()] == [9]
    assert len(fake_github.comments(REPO, 9)) == 1
    assert fake_github.violations == []


def _fork_pull(shared_corpus: Path, action: str, number: int, head: str, base: str,
               sender: str | None = None, label: str | None = None) -> dict[str, object]:
    """A pull request from stranger/kernels by @stranger; ``sender`` and ``label`` make it a ``labeled`` event."""
    data = pull_request_payload(shared_corpus, action, REPO, number, head, base,
                                head_repository="stranger/kernels", association="NONE", login="stranger")
    if sender is not None:
        data["sender"]["login"] = sender
    if label is not None:
        data["label"] = {"id": 1, "node_id": "LA_1", "url": f"https://api.github.com/repos/{REPO}/labels/{label}",
                         "name": label, "color": "ededed", "default": False, "description": None}
    return data


def _detail_of_last_delivery() -> str:
    """What the background handling of the newest delivery recorded (after the route's " → ")."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import WebhookDelivery

    with session_scope() as session:
        rows = session.exec(select(WebhookDelivery).order_by(WebhookDelivery.id)).all()  # type: ignore[arg-type]
    return rows[-1].detail.partition(" → ")[2]


def _runs() -> list[tuple[int | None, str]]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Commit, Run

    with session_scope() as session:
        return [(run.pr_number, sha) for run, sha in session.exec(
            select(Run, Commit.sha).where(Run.commit_id == Commit.id).order_by(Run.id)).all()]  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["read", "triage"])
def test_read_and_triage_collaborators_cannot_approve(app_client: TestClient, fake_github: FakeGitHub,
                                                      kernels_repo: dict[str, str], shared_corpus: Path,
                                                      role: str) -> None:
    """GitHub calls both COLLABORATOR in payloads, and triage may add labels: neither approves."""
    from roofwatch.service.core.config import get_settings

    shas = kernels_repo
    assert deliver(app_client, "pull_request", _fork_pull(shared_corpus, "opened", 41, shas["fix"],
                                                          shas["docs"])).status_code == 202
    _settle()
    fake_github.add_pull(REPO, 41, head_sha=shas["fix"], head_ref="feature", base_ref="main", base_sha=shas["docs"],
                         head_repo_full_name="stranger/kernels", user="stranger", author_association="NONE")
    fake_github.set_permission(REPO, "helper", role)

    command = comment_payload(shared_corpus, REPO, 41, "/roofwatch run", association="COLLABORATOR", login="helper")
    assert deliver(app_client, "issue_comment", command).json()["outcome"] == "accepted"
    _settle()
    assert _detail_of_last_delivery() == ("approval refused: @helper has read permission on the repository; "
                                          "approval needs write, maintain or admin")
    labeled = _fork_pull(shared_corpus, "labeled", 41, shas["fix"], shas["docs"], sender="helper",
                         label=get_settings().approval_label)
    assert deliver(app_client, "pull_request", labeled).json()["outcome"] == "accepted"
    _settle()
    assert "@helper has read permission" in _detail_of_last_delivery()

    assert _runs() == []  # the fork's code never ran
    assert [c.path for c in fake_github.calls("repos/get-collaborator-permission-level")] == [
        f"/repos/{REPO}/collaborators/helper/permission"] * 2
    assert _phases(fake_github.statuses(REPO, shas["fix"])) == ["waiting"]
    assert fake_github.violations == []


@pytest.mark.parametrize("role", ["write", "admin"])
def test_the_author_cannot_approve_their_own_fork_pull_request(app_client: TestClient, fake_github: FakeGitHub,
                                                               kernels_repo: dict[str, str],
                                                               shared_corpus: Path, role: str) -> None:
    """Even with write access: the code of a fork is looked at by someone other than who wrote it."""
    shas = kernels_repo
    deliver(app_client, "pull_request", _fork_pull(shared_corpus, "opened", 43, shas["fix"], shas["docs"]))
    _settle()
    fake_github.add_pull(REPO, 43, head_sha=shas["fix"], head_ref="feature", base_ref="main", base_sha=shas["docs"],
                         head_repo_full_name="stranger/kernels", user="stranger", author_association="NONE")
    fake_github.set_permission(REPO, "stranger", role)
    own = comment_payload(shared_corpus, REPO, 43, "/roofwatch run", association="COLLABORATOR", login="stranger")
    assert deliver(app_client, "issue_comment", own).json()["outcome"] == "accepted"
    _settle()
    assert _detail_of_last_delivery() == "approval refused: @stranger wrote this pull request and cannot approve it"
    assert _runs() == []
    assert fake_github.calls("repos/get-collaborator-permission-level") == []  # refused before asking
    assert _phases(fake_github.statuses(REPO, shas["fix"])) == ["waiting"]
    assert fake_github.comments(REPO, 43) == []
    assert fake_github.violations == []


def test_a_maintain_collaborator_approves_the_head_they_saw_and_not_the_next(
        app_client: TestClient, fake_github: FakeGitHub, kernels_repo: dict[str, str], shared_corpus: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GitHub answers the maintain role with ``permission: write`` (``role_name: maintain``): it approves.
    A push after the approval waits again."""
    from roofwatch.service.core.config import get_settings

    # What is under test is who may approve, not the A/B: the fewest rounds that can show "no change".
    monkeypatch.setenv("ROOFWATCH_AB_MIN_ROUNDS", "3")
    get_settings.cache_clear()
    shas = kernels_repo
    fake_github.set_permission(REPO, "keeper", "maintain")
    assert deliver(app_client, "pull_request", _fork_pull(shared_corpus, "opened", 47, shas["fix"],
                                                          shas["docs"])).status_code == 202
    _settle()
    fake_github.add_pull(REPO, 47, head_sha=shas["fix"], head_ref="feature", base_ref="main", base_sha=shas["docs"],
                         head_repo_full_name="stranger/kernels", user="stranger", author_association="NONE")
    approval = comment_payload(shared_corpus, REPO, 47, "/roofwatch run", association="COLLABORATOR", login="keeper")
    assert deliver(app_client, "issue_comment", approval).json()["outcome"] == "accepted"
    _settle()

    assert _detail_of_last_delivery().endswith("(approved by @keeper)")
    [asked] = fake_github.calls("repos/get-collaborator-permission-level")
    assert asked.path == f"/repos/{REPO}/collaborators/keeper/permission" and asked.status == 200
    assert _runs() == [(47, shas["fix"])]  # the approved head ran
    shown = _phases(fake_github.statuses(REPO, shas["fix"]))
    assert shown[0] == "waiting" and shown[-1] in SAME_CODE, shown
    assert _in_order(shown, ["waiting", "queued", "running", shown[-1]]), shown
    (report,) = fake_github.comments(REPO, 47)
    assert MARKER in report["body"] and shas["fix"][:7] in report["body"]

    synchronize = _fork_pull(shared_corpus, "synchronize", 47, shas["bug"], shas["docs"])
    assert deliver(app_client, "pull_request", synchronize).status_code == 202
    _settle()
    assert _runs() == [(47, shas["fix"])]  # the new head did not run on the old approval
    assert _phases(fake_github.statuses(REPO, shas["bug"])) == ["waiting"]
    assert len(fake_github.calls("repos/get-collaborator-permission-level")) == 1
    assert fake_github.violations == []


def test_an_approval_covers_its_head_and_a_new_push_waits_again(app_client: TestClient, fake_github: FakeGitHub,
                                                                kernels_repo: dict[str, str],
                                                                shared_corpus: Path) -> None:
    """Label by an admin runs the head it was added on; after synchronize, neither the label still on the pull
    request nor a comment made before the push approves the new head; a comment made after it does."""
    from datetime import UTC, datetime

    from roofwatch.service.core.config import get_settings

    shas = kernels_repo
    label = get_settings().approval_label
    fake_github.set_permission(REPO, "boss", "admin")
    fake_github.set_permission(REPO, "dev", "write")
    deliver(app_client, "pull_request", _fork_pull(shared_corpus, "opened", 45, shas["bug"], shas["docs"]))
    _settle()
    labeled = _fork_pull(shared_corpus, "labeled", 45, shas["bug"], shas["docs"], sender="boss", label=label)
    assert deliver(app_client, "pull_request", labeled).json()["outcome"] == "accepted"
    _settle()
    assert _runs() == [(45, shas["bug"])]
    assert "(approved by @boss)" in _detail_of_last_delivery()

    looked_at_bug = datetime.now(UTC)  # dev reviewed bug and commented; the delivery comes after the push
    synchronize = _fork_pull(shared_corpus, "synchronize", 45, shas["fix"], shas["docs"])
    synchronize["pull_request"]["labels"] = [{"name": label}]  # the label stays on the pull request
    assert deliver(app_client, "pull_request", synchronize).status_code == 202
    _settle()
    assert _runs() == [(45, shas["bug"])]
    assert _phases(fake_github.statuses(REPO, shas["fix"])) == ["waiting"]

    fake_github.add_pull(REPO, 45, head_sha=shas["fix"], head_ref="feature", base_ref="main", base_sha=shas["docs"],
                         head_repo_full_name="stranger/kernels", user="stranger", author_association="NONE")
    stale = comment_payload(shared_corpus, REPO, 45, "/roofwatch run", login="dev", created_at=looked_at_bug)
    assert deliver(app_client, "issue_comment", stale).json()["outcome"] == "accepted"
    _settle()
    assert _detail_of_last_delivery() == (f"approval refused: @dev approved {shas['bug'][:7]}, but the head is now "
                                          f"{shas['fix'][:7]}; a new head needs a new approval")
    assert _runs() == [(45, shas["bug"])]

    fresh = comment_payload(shared_corpus, REPO, 45, "/roofwatch run", login="dev")
    assert deliver(app_client, "issue_comment", fresh).json()["outcome"] == "accepted"
    _settle()
    assert _runs() == [(45, shas["bug"]), (45, shas["fix"])]
    assert _phases(fake_github.statuses(REPO, shas["fix"]))[-1] in SAME_CODE
    assert fake_github.violations == []


def test_a_comment_covers_the_newest_head_received_before_it(roofwatch_env: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import PullRequestHead
    from roofwatch.service.flows import approvals
    from roofwatch.service.records.repositories import register

    migrate()
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    with session_scope() as session:
        repository_id = register(session, REPO, "/nowhere", "main").id
        assert repository_id is not None
        assert approvals.head_when(session, repository_id, 5, start, "c" * 40) == "c" * 40  # nothing heard of yet
        for minute, sha in ((0, "a" * 40), (10, "b" * 40)):
            session.add(PullRequestHead(repository_id=repository_id, number=5, sha=sha,
                                        seen_at=start + timedelta(minutes=minute)))
        approvals.record_head(session, repository_id, 5, "a" * 40)  # heard of again: its first arrival counts
    with session_scope() as session:
        def head(minute: float) -> str | None:
            return approvals.head_when(session, repository_id, 5, start + timedelta(minutes=minute), "b" * 40)

        assert head(-1) is None  # made before any head roofwatch heard of: it approves none of them
        assert head(0) == "a" * 40 and head(9.9) == "a" * 40 and head(10) == "b" * 40 and head(60) == "b" * 40
        assert approvals.head_when(session, repository_id, 5, None, "b" * 40) is None
        assert len(session.exec(select(PullRequestHead)).all()) == 2


def test_app_mode_reports_through_one_check_run_per_head(app_client: TestClient, fake_github: FakeGitHub,
                                                         kernels_repo: dict[str, str], shared_corpus: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from roofwatch.service.core.config import get_settings

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    fake_github.configure_app(31337, key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode())
    monkeypatch.setenv("ROOFWATCH_GITHUB_APP_ID", "31337")
    monkeypatch.setenv("ROOFWATCH_GITHUB_APP_PRIVATE_KEY", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode())
    monkeypatch.delenv("ROOFWATCH_GITHUB_TOKEN")
    get_settings.cache_clear()

    opened = pull_request_payload(shared_corpus, "opened", REPO, 11, kernels_repo["bug"], kernels_repo["docs"],
                                  installation_id=555)
    assert deliver(app_client, "pull_request", opened).status_code == 202
    _settle()
    (check,) = fake_github.check_runs(REPO)
    assert check["head_sha"] == kernels_repo["bug"] and check["status"] == "completed"
    assert check["conclusion"] == "failure" and "test_scale" in check["output"]["title"]
    assert MARKER in check["output"]["summary"]  # the check's page carries the whole report
    # The outbox keeps each check's newest desired state, so a phase overtaken before the reporter
    # sent it is never sent (on a loaded host the run once finished before in_progress went out).
    # Certain: the check is updated, ends completed, and never steps back.
    updates = [c.body.get("status") for c in fake_github.calls("checks/update")]
    progression = ["queued", "in_progress", "completed"]
    assert updates and updates[-1] == "completed", updates
    assert [progression.index(s) for s in updates] == sorted(progression.index(s) for s in updates), updates
    assert fake_github.tokens_minted == 1 and fake_github.statuses(REPO, kernels_repo["bug"]) == []
    assert len(fake_github.comments(REPO, 11)) == 1
    assert fake_github.violations == []


def test_a_github_outage_loses_no_report_and_does_not_hold_up_the_run(app_client: TestClient,
                                                                     fake_github: FakeGitHub,
                                                                     kernels_repo: dict[str, str],
                                                                     shared_corpus: Path) -> None:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import GitHubReport, Run
    from roofwatch.service.github import outbox

    fake_github.down()
    opened = pull_request_payload(shared_corpus, "opened", REPO, 13, kernels_repo["fix"], kernels_repo["docs"])
    assert deliver(app_client, "pull_request", opened).status_code == 202
    assert embedded.MEASURE.drain(900)
    with session_scope() as session:
        (run,) = session.exec(select(Run)).all()
        assert run.state == "succeeded"  # measured and decided while GitHub was away...
        waiting = session.exec(select(GitHubReport)).all()
        assert {r.target for r in waiting} == {"status", "comment"}
        assert all(r.delivered_version < r.version for r in waiting)  # ...and not one report went out
    # The reporter was still retrying when the run finished: nothing waited for it.
    assert not embedded.REPORTS.drain(0)
    assert fake_github.calls("repos/create-commit-status") and all(
        c.status == 503 for c in fake_github.calls("repos/create-commit-status"))

    fake_github.up()
    assert embedded.REPORTS.drain(120)
    with session_scope() as session:
        for row in session.exec(select(GitHubReport)).all():
            row.next_attempt_at = row.updated_at  # any backoff has passed
            session.add(row)
    delivered, pending = outbox.deliver_due()
    assert pending == 0
    with session_scope() as session:
        reports = session.exec(select(GitHubReport)).all()
        assert all(r.delivered_version == r.version for r in reports)
        (desired,) = [r.payload for r in reports if r.target == "status"]
    # GitHub ends on the newest desired state, never a stale phase after it, and that state is the verdict.
    posted = fake_github.statuses(REPO, kernels_repo["fix"])
    assert {key: posted[-1][key] for key in desired} == desired, posted
    assert _phases(posted)[-1] in SAME_CODE, posted
    assert len(fake_github.comments(REPO, 13)) == 1


def test_a_new_head_supersedes_and_closing_cancels(app_client: TestClient, fake_github: FakeGitHub,
                                                   kernels_repo: dict[str, str]) -> None:
    """Runs still queued when a newer head arrives, or when the pull request closes, are cancelled."""
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Commit, Repository, Run
    from roofwatch.service.flows import pull_request as pull_requests
    from roofwatch.service.github import reporting

    with session_scope() as session:
        repository = session.exec(select(Repository)).one()
        for i, sha in enumerate((kernels_repo["bug"], kernels_repo["fix"])):
            commit = Commit(repository_id=repository.id, sha=sha)
            session.add(commit)
            session.flush()
            session.add(Run(repository_id=repository.id, commit_id=commit.id, trigger="pull_request", pr_number=21,
                            idempotency_key=f"queued-{i}"))
        repository_id = repository.id
    head = pull_requests.PullRequestHead(repository_id, 21, kernels_repo["fix"], "main", kernels_repo["docs"])
    with session_scope() as session:
        ids = pull_requests._supersede(session, session.get(Repository, repository_id), head)
        assert pull_requests._active_run(session, session.get(Repository, repository_id), head) is not None
    assert len(ids) == 1
    reporting.send(ids)  # what start() does after its transaction
    assert pull_requests.cancel(repository_id, 21, "pull request closed") != []
    assert embedded.REPORTS.drain(60)
    with session_scope() as session:
        runs = {r.idempotency_key: (r.state, r.error) for r in session.exec(select(Run)).all()}
    assert runs == {"queued-0": ("cancelled", f"superseded by {kernels_repo['fix'][:7]}"),
                    "queued-1": ("cancelled", "pull request closed")}
    cancelled = [s for sha in ("bug", "fix") for s in fake_github.statuses(REPO, kernels_repo[sha])]
    assert [s["state"] for s in cancelled] == ["error", "error"]
    assert fake_github.violations == []


def test_a_push_to_the_default_branch_is_measured_and_reported(app_client: TestClient, fake_github: FakeGitHub,
                                                               kernels_repo: dict[str, str],
                                                               shared_corpus: Path) -> None:
    from support.github_support import example

    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Measurement, Run

    push = example(shared_corpus, "push/with-new-branch.payload.json")
    push["ref"], push["after"] = "refs/heads/main", kernels_repo["docs"]
    push["repository"]["full_name"] = REPO
    push.pop("installation", None)
    assert deliver(app_client, "push", push).json()["outcome"] == "accepted"
    other = dict(push, ref="refs/heads/feature", after=kernels_repo["fix"])
    assert "not tracked" in deliver(app_client, "push", other).json()["detail"]
    _settle()
    with session_scope() as session:
        (run,) = session.exec(select(Run)).all()
        assert run.trigger == "push" and run.state == "succeeded"
        assert session.exec(select(Measurement).where(Measurement.run_id == run.id)).all()
    statuses = fake_github.statuses(REPO, kernels_repo["docs"])
    assert _phases(statuses)[-1] == "success" and _in_order(_phases(statuses), ["queued", "running", "success"])
    assert statuses[-1]["description"] == "1 test passed · 1 benchmark measured"
    assert statuses[-1]["target_url"] == f"http://roofwatch.test/runs/{run.id}"
    assert deliver(app_client, "push", dict(push)).status_code == 202  # a redelivery under a new id
    _settle()
    with session_scope() as session:
        assert len(session.exec(select(Run)).all()) == 1  # the same head is not measured twice
    assert fake_github.violations == []


def test_a_push_to_another_tracked_branch_is_reported_and_kept_off_the_default_branch(
        app_client: TestClient, fake_github: FakeGitHub, kernels_repo: dict[str, str], shared_corpus: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ROOFWATCH_PUSH_BRANCHES measures a release branch's pushes: reported on the commit, never main's history."""
    from support.environment import _reset_caches
    from support.github_support import example

    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import LatestMeasurement, Measurement, Run

    monkeypatch.setenv("ROOFWATCH_PUSH_BRANCHES", "feat*")
    _reset_caches()
    push = example(shared_corpus, "push/with-new-branch.payload.json")
    push["ref"], push["after"] = "refs/heads/feature", kernels_repo["fix"]
    push["repository"]["full_name"], push["repository"]["default_branch"] = REPO, "main"
    push.pop("installation", None)
    assert deliver(app_client, "push", push).json()["outcome"] == "accepted"
    _settle()
    with session_scope() as session:
        (run,) = session.exec(select(Run)).all()
        assert (run.trigger, run.state, run.branch, run.base_sha) == ("push", "succeeded", "feature",
                                                                       kernels_repo["base"])
        assert session.exec(select(Measurement).where(Measurement.run_id == run.id)).all()
        assert session.exec(select(LatestMeasurement)).all() == []  # no newest state of main
    assert _phases(fake_github.statuses(REPO, kernels_repo["fix"]))[-1] == "success"
    assert "branch <b>feature</b>" in app_client.get(f"/runs/{run.id}").text
    # The same commit pushed to main later is a point of main's history: measured again, as main's.
    main = dict(push, ref="refs/heads/main")
    assert deliver(app_client, "push", main).json()["outcome"] == "accepted"
    _settle()
    with session_scope() as session:
        runs = session.exec(select(Run).order_by(Run.id)).all()  # type: ignore[arg-type]
        assert [r.branch for r in runs] == ["feature", ""]
        assert [latest.run_id for latest in session.exec(select(LatestMeasurement))] == [runs[1].id]
    assert fake_github.violations == []


@pytest.mark.redis
def test_with_a_broker_the_webhook_only_enqueues_and_a_worker_reports(
        redis_url: str, tmp_path: Path, fake_github: FakeGitHub, kernels_repo: dict[str, str],
        shared_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Distributed mode: serve answers at once; a real worker process on Redis runs and reports."""
    import json
    import socket
    import subprocess
    import time

    import httpx
    from support.tests_support import ROOFWATCH, child_env, roofwatch

    from roofwatch.service.github.signature import sign

    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_BROKER_URL": redis_url,
           "ROOFWATCH_GITHUB_WEBHOOK_SECRET": SECRET, "ROOFWATCH_GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN,
           "ROOFWATCH_GITHUB_API_URL": fake_github.url, "ROOFWATCH_AB_MAX_ROUNDS": "3",
           "ROOFWATCH_PUBLIC_URL": "http://roofwatch.test"}
    roofwatch(["db", "upgrade"], env)
    roofwatch(["repo", "add", REPO, "--clone-url", kernels_repo["path"]], env)
    full_env = child_env(env)
    # `roofwatch serve` in its own process, as deployed: this test process's Celery app is embedded.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with open(tmp_path / "serve.log", "w") as serve_log:
        serve = subprocess.Popen([str(ROOFWATCH), "serve", "--port", str(port)], env=full_env,
                                 stdout=serve_log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            body = json.dumps(pull_request_payload(shared_corpus, "opened", REPO, 31, kernels_repo["bug"],
                                                   kernels_repo["docs"])).encode()
            started = time.monotonic()
            response = httpx.post(url + "/webhooks/github", content=body, timeout=30, headers={
                "X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "broker-1",
                "X-Hub-Signature-256": sign(SECRET, body), "Content-Type": "application/json"})
            answered = time.monotonic() - started
        finally:
            serve.terminate()
            serve.wait(timeout=30)
    assert response.status_code == 202 and response.json()["outcome"] == "accepted", response.text
    assert answered < 5 and fake_github.statuses(REPO, kernels_repo["bug"]) == []  # nothing ran in serve

    with open(tmp_path / "worker.log", "w") as log:
        worker = subprocess.Popen([str(ROOFWATCH), "worker", "--loglevel", "warning"], env=full_env,
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                states = [s["state"] for s in fake_github.statuses(REPO, kernels_repo["bug"])]
                if states and states[-1] != "pending" and fake_github.comments(REPO, 31):
                    break
                time.sleep(1)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    # One worker serving every queue handles "running" only after the A/B, when the verdict is the
    # newest state already: the outbox then posts the verdict and skips the stale "running".
    assert states[0] == "pending" and states[-1] == "failure", (tmp_path / "worker.log").read_text()[-3000:]
    assert set(states[1:-1]) <= {"pending"}
    assert len(fake_github.comments(REPO, 31)) == 1
    assert fake_github.violations == []
