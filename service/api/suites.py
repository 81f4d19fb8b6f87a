"""``/api/repositories/{owner}/{name}/suites``: a repository's stored suite config and its versions.

``GET`` shows the version in force and every earlier one, credentials in URLs and GitHub tokens
masked and, unless the admin token is sent, every value of every suite's ``env`` (where API keys
for a suite live) shown as ``***``; ``PUT`` (bearer token) keeps a new version, validated exactly
as ``roofwatch repo set-suites`` validates a file. The body is the TOML itself (any content type
but JSON; ``?origin=`` names it) or the JSON form ``{"content": "<TOML>", "origin": "suites.toml"}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import tomlkit
from fastapi import APIRouter, HTTPException, Query, Request, Response
from pydantic import BaseModel, Field, ValidationError
from sqlmodel import Session, col, select
from starlette.concurrency import run_in_threadpool
from tomlkit.exceptions import TOMLKitError

from roofwatch.common.errors import SuiteConfigError
from roofwatch.common.redaction import MASK, MIN_REMEMBERED_LENGTH, redact
from roofwatch.service.api.deps import AdminSeen, TokenDep
from roofwatch.service.core.models import Repository, SuiteConfig
from roofwatch.service.core.requests import SessionDep
from roofwatch.service.records.suite_configs import store
from roofwatch.suite_config.external import parse_suites_file

router = APIRouter(prefix="/api", tags=["api"])

MAX_CONFIG_BYTES = 1024 * 1024
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"  # an origin is a file name or a short label, shown in run records
Origin = Annotated[str, Field(max_length=200, pattern=NO_CONTROL)]


class SuitesBody(BaseModel):
    """The JSON form of a ``PUT``: the TOML text, and what to call it in run records."""

    content: str = Field(max_length=MAX_CONFIG_BYTES)
    origin: Origin = "API"


class SuiteVersion(BaseModel):
    version: int
    origin: str
    created_at: datetime
    content: str
    env_masked: bool = Field(description="the values of every suite's env are shown as *** (no admin token sent)")


class StoredSuites(BaseModel):
    repository: str
    # The version in force (the newest) with what it declares; null when none was ever stored.
    current: SuiteVersion | None
    override: bool | None = None
    suites: list[str] = Field(default_factory=list)
    versions: list[SuiteVersion] = Field(default_factory=list, description="every version, oldest first")


NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "unknown repository"}}
WRITE: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND,
    201: {"description": "stored as a new version"},
    400: {"description": "a body that is not UTF-8 text, or JSON that is not the documented form"},
    401: {"description": "missing or wrong bearer token"},
    403: {"description": "write actions are disabled: ROOFWATCH_API_TOKEN is not set"},
    413: {"description": "the config is larger than 1 MiB"},
    422: {"description": "not a valid suite config (the reason is in `detail`); nothing is stored"},
}
BODY = {"requestBody": {"required": True, "content": {
    "text/plain": {"schema": {"type": "string"}, "example": (
        '[[tool.roofwatch.suites]]\nname = "benchmarks"\nkind = "benchmark"\n'
        'command = "python -m pytest bench -q --benchmark-only"\n')},
    "application/json": {"schema": SuitesBody.model_json_schema()},
}}}


def _repository(session: Session, owner: str, name: str) -> Repository:
    found = session.exec(select(Repository).where(Repository.full_name == f"{owner}/{name}")).first()
    if found is None:
        raise HTTPException(404, f"{owner}/{name} is not registered")
    return found


UNMASKABLE = ("# not shown: this version cannot be read as TOML to mask the values of its env tables;\n"
              "# the admin token shows it\n")


def env_masked(content: str) -> str:
    """``content`` with every value of every suite's ``env`` shown as ``***``, wherever else it appears too.

    The document is edited, not rewritten (tomlkit keeps its comments and layout); a value long
    enough to mask by value (as configured secrets are) is masked anywhere else in the text too,
    say in a ``setup`` command or a comment.
    """
    try:
        document = tomlkit.parse(content)
        tool = document.get("tool")
        roofwatch_table = tool.get("roofwatch") if isinstance(tool, dict) else None
        suites = roofwatch_table.get("suites") if isinstance(roofwatch_table, dict) else None
        values: set[str] = set()
        for suite in suites if isinstance(suites, list) else []:
            env = suite.get("env") if isinstance(suite, dict) else None
            if not isinstance(env, dict):
                continue
            for key in list(env):
                values.add(str(env[key]))
                env[key] = MASK
        masked = tomlkit.dumps(document)
    except (TOMLKitError, RecursionError, ValueError):
        return UNMASKABLE
    for value in sorted((v for v in values if len(v) >= MIN_REMEMBERED_LENGTH), key=len, reverse=True):
        masked = masked.replace(value, MASK)
    return masked


def _stored(session: Session, repository: Repository, admin: bool = False) -> StoredSuites:
    rows = session.exec(select(SuiteConfig).where(SuiteConfig.repository_id == repository.id)
                        .order_by(col(SuiteConfig.version))).all()
    # Unauthenticated like every GET: a suites_repo URL may carry a token, never shown, and a
    # suite's env holds the API keys it needs, shown to the admin token only.
    versions = [SuiteVersion(version=r.version, origin=redact(r.origin), created_at=r.created_at,
                             content=redact(r.content if admin else env_masked(r.content)), env_masked=not admin)
                for r in rows]
    if not versions:
        return StoredSuites(repository=repository.full_name, current=None)
    try:
        parsed = parse_suites_file(rows[-1].content)
    except SuiteConfigError:  # stored under an older, looser check: shown as it is, without a summary
        return StoredSuites(repository=repository.full_name, current=versions[-1], versions=versions)
    return StoredSuites(repository=repository.full_name, current=versions[-1], override=parsed.override,
                        suites=[s.name for s in parsed.suites], versions=versions)


@router.get("/repositories/{owner}/{name}/suites", responses=NOT_FOUND)
def get_suites(owner: str, name: str, session: SessionDep, admin: AdminSeen) -> StoredSuites:
    """The stored suite config in force and every earlier version; env values as ``***`` without the admin token."""
    return _stored(session, _repository(session, owner, name), admin)


def _body(raw: bytes, content_type: str, origin: str) -> SuitesBody:
    if len(raw) > MAX_CONFIG_BYTES:
        raise HTTPException(413, f"the config is larger than {MAX_CONFIG_BYTES} bytes")
    if content_type.split(";")[0].strip().lower() == "application/json":
        try:
            return SuitesBody.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
            raise HTTPException(400, f'expected {{"content": "<TOML>", "origin": "..."}}: {problems}') from exc
    try:
        return SuitesBody(content=raw.decode("utf-8"), origin=origin)
    except UnicodeDecodeError as exc:
        raise HTTPException(400, f"the config is not UTF-8 text: {exc}") from exc


def _put(session: Session, owner: str, name: str, body: SuitesBody) -> tuple[StoredSuites, bool]:
    repository = _repository(session, owner, name)
    before = _stored(session, repository).current
    try:
        config = store(session, repository, body.content, body.origin)
    except SuiteConfigError as exc:
        raise HTTPException(422, str(exc)) from exc
    session.commit()
    return _stored(session, repository, admin=True), before is None or config.version != before.version


@router.put("/repositories/{owner}/{name}/suites", responses=WRITE, openapi_extra=BODY)
async def put_suites(
    owner: str, name: str, request: Request, response: Response, session: SessionDep, actor: TokenDep,
    origin: Annotated[str, Query(max_length=200, pattern=NO_CONTROL,
                                 description="with a TOML body: what run records call it (e.g. the file name)")] = "API",
) -> StoredSuites:
    """Keep a new version of the repository's suites (the same text as the newest is no new version)."""
    body = _body(await request.body(), request.headers.get("content-type", ""), origin)
    stored, created = await run_in_threadpool(_put, session, owner, name, body)
    response.status_code = 201 if created else 200
    return stored
