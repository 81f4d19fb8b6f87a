"""``POST /api/results``: a CI job sends the result file it wrote, with the bearer token."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from roofwatch.common.errors import RoofwatchError, UnknownRepository
from roofwatch.result_files.uploads import FORMATS, UploadFormatError
from roofwatch.service.api.deps import Actor, ActorDep
from roofwatch.service.api.request_limits import UPLOAD_BYTES
from roofwatch.service.core.db import session_scope
from roofwatch.service.flows.upload import UploadRequest, upload_and_report
from roofwatch.service.records.repositories import find_repository

router = APIRouter(prefix="/api", tags=["api"])

MAX_UPLOAD_BYTES = UPLOAD_BYTES

RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "an unreadable file, unknown format, unknown SHA or a device mismatch"},
    401: {"description": "missing or wrong bearer token"},
    403: {"description": "an upload token of another repository, or no token configured on the server"},
    404: {"description": "unknown repository"},
    413: {"description": "the file is larger than 64 MiB"},
}


def _check_scope(actor: Actor, repo: str) -> None:
    """An upload token uploads for its own repository only."""
    if actor.admin:
        return
    with session_scope() as session:
        try:
            repository_id = find_repository(session, repo).id
        except UnknownRepository as exc:
            raise HTTPException(403, "this upload token is not for that repository") from exc
    if not actor.may_upload_to(repository_id):
        raise HTTPException(403, "this upload token is not for that repository")


@router.post("/results", responses=RESPONSES)
async def post_results(
    request: Request, actor: ActorDep,
    repo: str = Query(..., description="registered OWNER/NAME"),
    commit: str = Query(..., description="the SHA the results were measured at"),
    format: str = Query("auto", description=f"auto | {' | '.join(FORMATS)}"),
    device_class: str | None = Query(None, description="the device the results were measured on"),
    suite: str | None = Query(None, description="suite name (default: the format)"),
    pr: int | None = Query(None, ge=1, le=2**31 - 1, description="pull request number"),
    base: str | None = Query(None, description="with pr: the base commit, uploaded before"),
) -> dict[str, Any]:
    """Store a result file sent as the request body (``curl --data-binary @file``)."""
    await run_in_threadpool(_check_scope, actor, repo)
    # The middleware has bounded the body already (request_limits.AuthenticatedFirst).
    body = await request.body()
    with tempfile.TemporaryDirectory(prefix="roofwatch-upload-") as scratch:
        path = Path(scratch) / "results.json"
        path.write_bytes(body)
        upload_request = UploadRequest(repo, commit, path, format, device_class, suite, pr, base)
        try:
            outcome = await run_in_threadpool(upload_and_report, upload_request)
        except UnknownRepository as exc:
            raise HTTPException(404, str(exc)) from exc
        except (UploadFormatError, RoofwatchError) as exc:
            raise HTTPException(400, str(exc)) from exc
    return asdict(outcome)
