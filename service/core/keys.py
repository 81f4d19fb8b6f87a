"""Every idempotency key, and every look-up of the keys that share a prefix.

A key names one side effect, so that doing it twice stores it once: a ``Run`` or a
``Comparison`` is created only if no row holds its key. Their shapes::

    run (manual | branch | push | bisect)   OWNER/NAME@<sha>:<device>:<purpose>:<attempt>
    nightly run                    OWNER/NAME@<sha>:<device class>:nightly:<YYYY-MM-DD>
    pull-request run               OWNER/NAME#<number>@<head sha>:pull_request:<attempt>
    comparison                     OWNER/NAME@<base sha>..<head sha>:<device>:<purpose>:<attempt>
    an upload's comparison         <its pull-request run's key>:compare

``<device>`` is the device's fingerprint, except for push and nightly runs, which are keyed
by the device class they are queued for (the device that takes them is not known yet).
Everything up to the attempt is a *prefix*: the attempts of one thing are the keys that start
with it, found by ``starts_with``, which takes the prefix literally. SQL ``LIKE`` alone would
read the ``_`` in ``acme/fused_ops`` as "any character" (and match ``acme/fusedXops``), and on
SQLite it is blind to ASCII case; so the ``LIKE`` is escaped (``autoescape``) and a comparison
of the key's first characters decides.
"""

from __future__ import annotations

from datetime import date
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, and_, func
from sqlmodel import Session, col, select

from roofwatch.service.core.models import Comparison, Repository, Run

Keyed = TypeVar("Keyed", Run, Comparison)


def run_key_prefix(full_name: str, sha: str, device: str, purpose: str) -> str:
    """What every attempt of a ``purpose`` run of ``sha`` on ``device`` is keyed with."""
    return f"{full_name}@{sha}:{device}:{purpose}:"


def run_key(full_name: str, sha: str, device: str, purpose: str, attempt: int = 0) -> str:
    return f"{run_key_prefix(full_name, sha, device, purpose)}{attempt}"


def upload_comparison_key(run_key: str) -> str:
    """The comparison an uploaded pull-request run makes with its base's upload: one per run."""
    return f"{run_key}:compare"


def manual_run_key(full_name: str, sha: str, device_fingerprint: str, attempt: int = 0) -> str:
    """``roofwatch run``: a commit measured on this machine's device."""
    return run_key(full_name, sha, device_fingerprint, "manual", attempt)


def branch_run_key(full_name: str, sha: str, device_fingerprint: str, attempt: int = 0) -> str:
    """``roofwatch run`` of a commit off the default branch: keyed apart from the branch's own runs,
    so the same commit measured again once merged (fast-forward) is a run of the branch's history."""
    return run_key(full_name, sha, device_fingerprint, "branch", attempt)


def push_run_key(full_name: str, sha: str, device_class: str, branch: str = "") -> str:
    """A pushed head, measured once per device class it was queued for (and, off the default
    branch, once more when it reaches the default branch)."""
    return run_key(full_name, sha, device_class, "push" if not branch else "push-branch")


def nightly_run_key(full_name: str, sha: str, device_class: str, night: date) -> str:
    """One run of a default branch's head per night and device class."""
    return f"{full_name}@{sha}:{device_class}:nightly:{night.isoformat()}"


def pull_request_run_key_prefix(full_name: str, number: int, head_sha: str) -> str:
    return f"{full_name}#{number}@{head_sha}:pull_request:"


def pull_request_run_key(full_name: str, number: int, head_sha: str, attempt: int = 0) -> str:
    return f"{pull_request_run_key_prefix(full_name, number, head_sha)}{attempt}"


def bisect_key_prefix(repository: Repository, sha: str, device_fingerprint: str) -> str:
    """What every bisect run of ``sha`` on a device is keyed with, before its attempt number."""
    return run_key_prefix(repository.full_name, sha, device_fingerprint, "bisect")


def bisect_key(repository: Repository, sha: str, device_fingerprint: str, attempt: int = 0) -> str:
    return f"{bisect_key_prefix(repository, sha, device_fingerprint)}{attempt}"


def comparison_key_prefix(repository: Repository, base_sha: str, head_sha: str, device_fingerprint: str,
                          purpose: str) -> str:
    return f"{repository.full_name}@{base_sha}..{head_sha}:{device_fingerprint}:{purpose}:"


def comparison_key(repository: Repository, base_sha: str, head_sha: str, device_fingerprint: str,
                   purpose: str, attempt: int = 0) -> str:
    """An A/B of ``base_sha`` against ``head_sha``; ``purpose`` is manual, confirm or pull_request#N."""
    return f"{comparison_key_prefix(repository, base_sha, head_sha, device_fingerprint, purpose)}{attempt}"


def starts_with(column: Any, prefix: str) -> ColumnElement[bool]:
    """``column`` begins with ``prefix`` taken literally: LIKE's ``_`` and ``%`` escaped, case kept."""
    return and_(col(column).startswith(prefix, autoescape=True),
                func.substr(col(column), 1, len(prefix)) == prefix)


def with_key_prefix(session: Session, model: type[Keyed], prefix: str) -> list[Keyed]:
    """The rows of ``model`` whose idempotency key starts with ``prefix``, oldest key first."""
    key = col(model.idempotency_key)
    return list(session.exec(select(model).where(starts_with(key, prefix)).order_by(key)).all())


def next_attempt(session: Session, model: type[Keyed], prefix: str) -> int:
    """The attempt number a new row keyed ``prefix<attempt>`` gets: how many there are already."""
    return int(session.exec(select(func.count()).select_from(model).where(
        starts_with(model.idempotency_key, prefix))).one())
