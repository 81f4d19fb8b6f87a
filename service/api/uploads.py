"""``POST /api/results``: a CI job sends the result file it wrote, with the bearer token."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from starlette.concurrency import run_in_threadpool

from roofwatch.service.api.deps import TokenDep
from roofwatch.service.flows.upload import UploadRequest, upload_and_report
from roofwatch.service.records.upload_formats import FORMATS, UploadFormatError
from roofwatch.workers.errors import RoofwatchError, UnknownRepository

router = APIRouter(prefix="/api", tags=["api"])

MAX_UPLOAD_BYTES = 64 * 1024 * 1024  # nvbench files of large sweeps reach tens of MB

RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"description": "an unreadable file, unknown format, unknown SHA or a device mismatch"},
    401: {"description": "missing or wrong bearer token"},
    403: {"description": "write actions are disabled: ROOFWATCH_API_TOKEN is not set"},
    404: {"description": "unknown repository"},
    413: {"description": "the file is larger than 64 MiB"},
}


@router.post("/results", responses=RESPONSES)
async def post_results(
    request: Request, actor: TokenDep,
    repo: str = Query(..., description="registered OWNER/NAME"),
    commit: str = Query(..., description="the SHA the results were measured at"),
    format: str = Query("auto", description=f"auto | {' | '.join(FORMATS)}"),
    device_class: str | None = Query(None, description="the device the results were measured on"),
    suite: str | None = Query(None, description="suite name (default: the format)"),
    pr: int | None = Query(None, ge=1, le=2**31 - 1, description="pull request number"),
    base: str | None = Query(None, description="with pr: the base commit, uploaded before"),
) -> dict[str, Any]:
    """Store a result file sent as the request body (``curl --data-binary @file``)."""
    body = await request.body()
    if len(body) > MAX_UPLOAD_BYTES:
        raise HTTPException(413, f"the file is larger than {MAX_UPLOAD_BYTES} bytes")
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
