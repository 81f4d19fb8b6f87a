"""Secrets are masked wherever roofwatch writes text: URL userinfo and GitHub token shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from roofwatch.common.redaction import redact, redact_json, split_credentials

TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ012345"


@pytest.mark.parametrize(("text", "expected"), [
    (f"cannot fetch https://x-access-token:{TOKEN}@github.com/o/r.git: 403",
     "cannot fetch https://***@github.com/o/r.git: 403"),
    (f"token {TOKEN} leaked", "token *** leaked"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "***"),
    ("Authorization: Bearer abc.def-ghi", "Authorization: ***"),
    ("https://github.com/o/r.git", "https://github.com/o/r.git"),
    ("https://***@github.com/o/r.git", "https://***@github.com/o/r.git"),
])
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_split_credentials_keeps_the_url_usable() -> None:
    assert split_credentials(f"https://x-access-token:{TOKEN}@github.com/o/r.git") == (
        "https://github.com/o/r.git", f"x-access-token:{TOKEN}")
    assert split_credentials("/srv/git/r.git") == ("/srv/git/r.git", None)


def test_unauthenticated_repository_list_hides_clone_url_tokens(roofwatch_env: Path) -> None:
    # Its own database: the seeded one is shared by a worker's tests, which count its repositories.
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        register(session, "acme/secret", f"https://x-access-token:{TOKEN}@github.com/acme/secret.git")
    with TestClient(create_app()) as client:
        body = client.get("/api/repositories").text
    assert TOKEN not in body
    assert "https://***@github.com/acme/secret.git" in body


# -- the one place: shapes and configured values --------------------------------------------------

PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nxyz\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(("text", "expected"), [
    ("gho_abcdefghijklmnopqrstuvwxyz0123 and ghs_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123", "*** and ***"),
    ("curl -H 'Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig'", "curl -H '***'"),
    (f"key: {PEM} done", "key: *** done"),
    ("redis://:hunter2hunter2@broker:6379/0", "redis://***@broker:6379/0"),
    ("a bearer of good news", "a bearer of good news"),
])
def test_redact_more_shapes(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_configured_secrets_are_masked_by_value_once_the_settings_are_read(roofwatch_env,  # type: ignore[no-untyped-def]
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.core.config import get_settings

    secret = "correct-horse-battery-staple-0451"
    monkeypatch.setenv("ROOFWATCH_GITHUB_WEBHOOK_SECRET", secret)
    monkeypatch.setenv("ROOFWATCH_API_TOKEN", "short")
    get_settings.cache_clear()
    get_settings()
    assert redact(f"signed with {secret}!") == "signed with ***!"
    assert redact("a short word stays") == "a short word stays"  # too short to mask by value
    assert redact_json({"a": [f"x {secret}", 3, None], "b": {"c": secret}}) == {"a": ["x ***", 3, None],
                                                                               "b": {"c": "***"}}


# -- logs ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_lines_never_carry_credentials(fmt: str) -> None:
    import io
    import logging

    from roofwatch.workers.logs import configure_logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    try:
        configure_logging(fmt, "info", stream=out)  # type: ignore[arg-type]
        log = logging.getLogger("roofwatch.test")
        log.info("cloning %s", f"https://x-access-token:{TOKEN}@github.com/o/r.git")
        log.warning(f"token {TOKEN} in the message itself")
        try:
            raise RuntimeError(f"cannot fetch https://x-access-token:{TOKEN}@github.com/o/r.git")
        except RuntimeError:
            log.exception("fetch failed with %s", "Authorization: Bearer abcdefghijklmnop")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    written = out.getvalue()
    assert TOKEN not in written and "abcdefghijklmnop" not in written
    assert "https://***@github.com/o/r.git" in written and "Traceback" in written and "RuntimeError" in written


# -- what is stored: run logs, errors, test messages ------------------------------------------------------


def test_what_a_suite_printed_is_stored_redacted(roofwatch_env) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from sqlmodel import select

    from roofwatch.common.envelope import ENVELOPE_VERSION
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import Commit, Repository, Run, SuiteExecution, TestOutcome
    from roofwatch.service.records.runs import create_run
    from roofwatch.service.tasks import ingest

    migrate()
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels", clone_url="/nowhere")
        session.add(repository)
        session.flush()
        commit = Commit(repository_id=repository.id, sha="c" * 40)  # type: ignore[arg-type]
        session.add(commit)
        session.flush()
        run_id = create_run(session, repository, commit, "leaky-run").id
    leak = f"https://x-access-token:{TOKEN}@github.com/acme/kernels.git"
    now = datetime.now(UTC).isoformat()
    device = {"device_class": "cpu", "fingerprint": "fp", "hostname": "h"}
    ingest.delay({
        "version": ENVELOPE_VERSION, "run_id": run_id, "idempotency_key": "leaky-run", "repository": "acme/kernels",
        "sha": "c" * 40, "status": "failed", "reason": f"git said: {leak}", "device": device,
        "started_at": now, "finished_at": now,
        "suites": [{"name": "correctness", "kind": "correctness", "status": "failed", "reason": f"token {TOKEN}",
                    "output_tail": f"GITHUB_TOKEN={TOKEN}\nAuthorization: Bearer {TOKEN}",
                    "outcomes": [{"test_id": "t::x", "outcome": "failed", "message": f"saw {leak}"}]}],
    }).get()
    with session_scope() as session:
        run = session.get(Run, run_id)
        assert run is not None
        stored = [run.error, run.log_excerpt,
                  *(s.output_tail + s.reason for s in session.exec(select(SuiteExecution)).all()),
                  *(o.message for o in session.exec(select(TestOutcome)).all())]
    assert all(TOKEN not in text for text in stored), stored
    assert "https://***@github.com/acme/kernels.git" in run.error and "GITHUB_TOKEN=***" in run.log_excerpt


# -- what is posted to GitHub ----------------------------------------------------------------------------------


def test_nothing_posted_to_github_carries_a_credential(roofwatch_env, fake_github,  # type: ignore[no-untyped-def]
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Status descriptions, check-run output and the PR comment, as the fake GitHub received them."""
    import json

    from sqlmodel import select
    from support.environment import _reset_caches

    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import GitHubReport
    from roofwatch.service.github import outbox, reporting
    from roofwatch.service.github.comment import Summary
    from roofwatch.service.records.repositories import register

    monkeypatch.setenv("ROOFWATCH_GITHUB_TOKEN", fake_github.STATIC_TOKEN)
    monkeypatch.setenv("ROOFWATCH_GITHUB_API_URL", fake_github.url)
    _reset_caches()
    migrate()
    leak = f"cannot fetch https://x-access-token:{TOKEN}@github.com/acme/kernels.git: 403"
    sha = "a" * 40
    with session_scope() as session:
        repository = register(session, "acme/kernels", "/nowhere")
        ids = [*reporting.show_phase(session, repository, sha, "running", leak * 3, "http://roofwatch.test/runs/1"),
               *reporting.show_summary(session, repository, "b" * 40, Summary("failure", leak), "http://x.test",
                                       details=leak),
               *reporting.show_comment(session, repository, 7, f"<!-- roofwatch -->\n{leak}\n`{TOKEN}`")]
        # A check run (App mode) goes through the same door: what is kept to be posted is clean.
        check = outbox.publish(session, repository, "check_run", sha, {"output": {"title": leak, "summary": leak}})
        assert check is not None and TOKEN not in json.dumps(check.payload)
        session.delete(check)
    for report_id in ids:
        assert outbox.deliver(report_id)
    posted = [json.dumps(call.body) for call in fake_github.requests if call.body is not None]
    assert len(posted) == 3 and all(TOKEN not in body for body in posted), posted
    assert any("https://***@github.com" in body for body in posted)
    with session_scope() as session:
        assert all(TOKEN not in json.dumps(row.payload) for row in session.exec(select(GitHubReport)).all())
    assert fake_github.violations == []


def test_a_push_from_a_repository_with_a_credentialed_clone_url_leaks_nothing(  # type: ignore[no-untyped-def]
        roofwatch_env, fake_github, shared_corpus, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack from the issue: the fetch fails, and its message names the clone URL."""
    import json

    from sqlmodel import select
    from support.environment import _reset_caches
    from support.github_support import SECRET, deliver, example

    from roofwatch.service.api.app import create_app
    from roofwatch.service.core import embedded
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.core.models import WebhookDelivery
    from roofwatch.service.records.repositories import register

    for name, value in {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": fake_github.STATIC_TOKEN,
                        "GITHUB_API_URL": fake_github.url}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    migrate()
    with session_scope() as session:  # port 1 on loopback: nothing listens, the fetch fails at once
        register(session, "Codertocat/Hello-World", f"https://x-access-token:{TOKEN}@127.0.0.1:1/o/r.git",
                 default_branch="master")
    payload = example(shared_corpus, "push/with-new-branch.payload.json")
    payload["ref"] = "refs/heads/master"
    opened = example(shared_corpus, "pull_request/opened.payload.json")
    with TestClient(create_app()) as client:
        assert deliver(client, "push", payload).status_code == 202
        assert deliver(client, "pull_request", opened).status_code == 202
        assert embedded.MEASURE.drain(120) and embedded.REPORTS.drain(60)
        listed = client.get("/api/repositories").text
    with session_scope() as session:
        records = session.exec(select(WebhookDelivery)).all()
    assert [r.outcome for r in records] == ["failed", "failed"]
    assert all("***@127.0.0.1:1" in r.detail and TOKEN not in r.detail for r in records)
    posted = [json.dumps(call.body) for call in fake_github.requests if call.body is not None]
    assert all(TOKEN not in body for body in posted), posted
    assert any("could not measure: cannot fetch https://***@127.0.0.1:1" in body for body in posted), posted
    assert TOKEN not in listed


# -- cost: linear in the text, whoever sent it ----------------------------------------------------------

# Texts a client controls (a query string, a benchmark or suite name) shaped to make a pattern
# retry from every character: (head, unit repeated to about HOSTILE_LENGTH characters). At that
# length a pattern quadratic in its input needs tens of minutes for one of them; linear, all of
# them together take about a second.
HOSTILE_LENGTH = 500_000
HOSTILE_SHAPES = {
    "letters": ("", "a"), "digits": ("", "7"), "schemes": ("", "a://"), "userinfo": ("x://", "a:"),
    "token prefixes": ("", "ghp_"), "key headers": ("", "-----BEGIN "), "bearer words": ("", "bearer "),
}
LINEAR_CHECK = """
import json, sys
from roofwatch.common.redaction import redact
for name, (head, unit) in json.loads(sys.argv[1]).items():
    redact(head + unit * (int(sys.argv[2]) // len(unit)))
    print(name, flush=True)
"""


def test_redaction_of_long_hostile_text_is_linear() -> None:
    """In a child process with a deadline, so a quadratic pattern fails here instead of hanging."""
    import json
    import subprocess
    import sys

    argv = [sys.executable, "-c", LINEAR_CHECK, json.dumps(HOSTILE_SHAPES), str(HOSTILE_LENGTH)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"redaction did not finish within 120 s; done before that: {out.splitlines()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(HOSTILE_SHAPES)


@pytest.mark.parametrize(("text", "expected"), [
    ("a" * 100_000 + f" https://x-access-token:{TOKEN}@github.com/o/r.git",
     "a" * 100_000 + " https://***@github.com/o/r.git"),
    ("x://" + "a:" * 50_000 + "b@host", "x://***@host"),
    ("1https://u:hunter2hunter2@h", "1https://***@h"),
    ("cloning...https://u:hunter2hunter2@h", "cloning...https://***@h"),
    ("git+ssh://u:hunter2hunter2@h/r", "git+ssh://***@h/r"),
    ("123://u:p@h", "123://u:p@h"),
])
def test_credentials_after_long_or_odd_prefixes_are_still_masked(text: str, expected: str) -> None:
    assert redact(text) == expected
