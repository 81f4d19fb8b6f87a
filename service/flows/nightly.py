"""The nightly full run: every registered repository's default branch, measured again.

A quiet branch still gets a point a night, so slow drift (a driver update, a throttling
host, a dependency bump in the image) shows up in the series even when nobody pushes.
One run per repository, head and night: a beat that fires twice does not measure twice.
"""

from __future__ import annotations

import logging
from datetime import date

from sqlmodel import col, select

from roofwatch.common.task_names import queue_name
from roofwatch.common.vocabulary import Trigger
from roofwatch.git import checkout
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import CheckoutError
from roofwatch.service.core.keys import nightly_run_key
from roofwatch.service.core.models import Repository, Run
from roofwatch.service.flows.measure import job_for, submit
from roofwatch.service.flows.pull_request import device_class
from roofwatch.service.records.runs import create_run, upsert_commit

log = logging.getLogger(__name__)


def start_all(night: date) -> dict[str, int | str]:
    """Submit tonight's run of each repository; repository → run id, or why it was not started."""
    settings = get_settings()
    device = device_class()
    with session_scope() as session:
        repositories = [(r.id, r.full_name, r.clone_url, r.default_branch)
                        for r in session.exec(select(Repository).order_by(col(Repository.id))).all()]
    started: dict[str, int | str] = {}
    for repository_id, full_name, clone_url, branch in repositories:
        try:
            mirror = checkout.ensure_mirror(settings.mirrors_dir, clone_url)
            sha = checkout.resolve(mirror, f"refs/heads/{branch}")
            info = checkout.commit_info(mirror, sha)
        except CheckoutError as exc:
            # One unreachable repository must not keep the others from their nightly run.
            log.warning("nightly run of %s not started: %s", full_name, exc)
            started[full_name] = f"not started: {exc}"
            continue
        key = nightly_run_key(full_name, sha, device, night)
        with session_scope() as session:
            if session.exec(select(Run.id).where(Run.idempotency_key == key)).first() is not None:
                started[full_name] = "already started tonight"
                continue
            repository = session.get(Repository, repository_id)
            assert repository is not None
            commit = upsert_commit(session, repository, info)
            run = create_run(session, repository, commit, key, trigger=Trigger.SCHEDULE)
            job = job_for(run, repository, commit, settings)
        log.info("nightly run %s: %s@%s on %s", job.run_id, full_name, sha[:12], device)
        submit(job, queue_name(device))
        started[full_name] = job.run_id
    return started
