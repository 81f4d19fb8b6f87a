"""What ``roofwatch compare`` records: the two commits, the comparison and its A/B job, then the verdict.

The CLI takes the arguments and shows progress and the table; resolving the revisions, the
comparison's row (an idempotency key that names the attempt, like every other purpose's) and the
job the worker gets are decided here, as ``pull_request`` and ``confirmation`` decide theirs.
Everything that can be wrong with the input (an unknown repository, a revision the repository does
not have, an unreadable suites file) is raised by ``prepare`` before a row is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from roofwatch.common.device import probe
from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.jobs import ABJob
from roofwatch.git import checkout
from roofwatch.service.core.config import Settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.keys import comparison_key, comparison_key_prefix, next_attempt
from roofwatch.service.core.models import Comparison, Repository
from roofwatch.service.core.reports import ComparisonReport
from roofwatch.service.flows import ab
from roofwatch.service.flows.repositories import mirror_and_source, resolve_repository
from roofwatch.service.flows.run_selection import one_off_suites
from roofwatch.service.records import acceptances
from roofwatch.service.records.comparisons import comparison_report
from roofwatch.service.records.runs import upsert_commit

PURPOSE = "manual"


@dataclass(frozen=True)
class Asked:
    """A comparison as the user asks for it: revisions as they name them, and how to run it."""

    repo: str
    base: str
    head: str
    min_rounds: int | None = None
    max_rounds: int | None = None
    suites_file: Path | None = None  # one-off suites (TOML), not stored, as for `run`
    suites_from: str | None = None


@dataclass(frozen=True)
class Prepared:
    """A recorded comparison ready to start: what the terminal names, and the job a worker gets."""

    repository: str  # OWNER/NAME or the path it was registered under
    base_sha: str
    head_sha: str
    device: DeviceInfo
    job: ABJob


def prepare(asked: Asked, settings: Settings) -> Prepared:
    """Resolve both revisions and record the comparison (``RoofwatchError`` or ``OSError`` on bad
    input, raised before anything is recorded)."""
    with session_scope() as session:
        repository = resolve_repository(session, asked.repo)
    mirror, source = mirror_and_source(repository, settings.mirrors_dir)
    base_sha, head_sha = checkout.resolve(source, asked.base), checkout.resolve(source, asked.head)
    infos = [checkout.commit_info(mirror, sha) for sha in (base_sha, head_sha)]
    one_off = one_off_suites(asked.suites_file, asked.suites_from, source)

    device = probe()
    with session_scope() as session:
        row = session.get(Repository, repository.id)
        assert row is not None
        base, head = (upsert_commit(session, row, info) for info in infos)
        attempt = next_attempt(session, Comparison, comparison_key_prefix(
            row, base.sha, head.sha, device.fingerprint, PURPOSE))
        key = comparison_key(row, base.sha, head.sha, device.fingerprint, PURPOSE, attempt)
        # The revision asked for as the base, so the dashboard's rendering of the PR comment names it.
        _, job = ab.prepare(session, row, base, head, key, purpose=PURPOSE, details={"base_ref": asked.base},
                            max_rounds=asked.max_rounds, min_rounds=asked.min_rounds)
    return Prepared(repository.full_name, base_sha, head_sha, device, replace(job, **one_off))


def report(comparison_id: int, accepted_by: str | None = None) -> ComparisonReport:
    """The finished comparison's report; with ``accepted_by``, the base's benchmarks missing on the
    head are first accepted in that user's name (``--accept-missing``)."""
    with session_scope() as session:
        if accepted_by is not None:
            stored = session.get(Comparison, comparison_id)
            if stored is not None and stored.finished_at is not None:
                acceptances.accept(session, stored, accepted_by, "cli")
        return comparison_report(session, comparison_id)

