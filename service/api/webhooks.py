"""``POST /webhooks/github``: signed deliveries in, work queued, an answer within milliseconds.

Order of checks, each with its own status: body size (413), signature over the raw bytes
(401), event header and JSON (400), a repeated ``X-GitHub-Delivery`` (200, no-op), payload
shape for the events roofwatch acts on (400 naming the field). Every delivery that gets past
the signature is recorded in ``webhookdelivery`` with what became of it, so "why did my push
not run?" has an answer. Accepted work runs after the response: on a background thread when
embedded, on the ``cpu`` queue otherwise.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from roofwatch.service.api import background
from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import WebhookDelivery
from roofwatch.service.flows import github_events as events
from roofwatch.service.github import signature
from roofwatch.service.github.payloads import EVENT_MODELS

log = logging.getLogger(__name__)

router = APIRouter(tags=["github"])


async def _read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"payload of {declared} bytes is over the {limit}-byte limit")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise HTTPException(413, f"payload is over the {limit}-byte limit")
    return bytes(body)


def _validation_message(error: ValidationError, shown: int = 3) -> str:
    problems = [f"{'.'.join(str(part) for part in e['loc']) or 'payload'}: {e['msg']}" for e in error.errors()]
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "a delivery already received (same X-GitHub-Delivery): nothing done"},
    400: {"description": "missing event/delivery headers, a body that is not a JSON object, or a payload of the wrong shape"},
    401: {"description": "missing or wrong X-Hub-Signature-256, or no webhook secret configured"},
    413: {"description": "body over ROOFWATCH_WEBHOOK_MAX_BYTES"},
    503: {"description": "the work could not be queued; redeliver later"},
}


@router.post("/webhooks/github", status_code=202, responses=RESPONSES)
async def github_webhook(request: Request) -> JSONResponse:
    settings = get_settings()
    body = await _read_limited(request, settings.webhook_max_bytes)
    if not settings.github_webhook_secret:
        raise HTTPException(401, "webhooks are refused: ROOFWATCH_GITHUB_WEBHOOK_SECRET is not set on the server")
    if not signature.verify(settings.github_webhook_secret, body, request.headers.get("x-hub-signature-256")):
        raise HTTPException(401, "missing or wrong X-Hub-Signature-256")
    event = request.headers.get("x-github-event")
    delivery_id = request.headers.get("x-github-delivery")
    if not event or not delivery_id:
        raise HTTPException(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HTTPException(400, f"payload is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise HTTPException(400, "payload must be a JSON object")
    return _accept(event, delivery_id, data)


def _accept(event: str, delivery_id: str, data: dict[str, Any]) -> JSONResponse:
    settings = get_settings()
    model = EVENT_MODELS.get(event)
    payload: Any = None
    if model is not None:
        try:
            payload = model.model_validate(data)
        except ValidationError as exc:
            raise HTTPException(400, f"{event} payload has the wrong shape: {_validation_message(exc)}") from exc
    action = str(data.get("action", ""))
    with session_scope() as session:
        if session.exec(select(WebhookDelivery.id).where(WebhookDelivery.delivery_id == delivery_id)).first():
            return JSONResponse({"delivery": delivery_id, "outcome": "duplicate"}, status_code=200)
        decision = events.route(session, event, payload, settings) if payload is not None else \
            events.Decision(False, f"event {event!r} is not one roofwatch acts on")
        record = WebhookDelivery(delivery_id=delivery_id, event=event, action=action,
                                 repository=events.repository_name(event, payload) if payload else "",
                                 outcome="accepted" if decision.accepted else "ignored", detail=decision.detail)
        session.add(record)
        try:
            session.flush()
        except IntegrityError:  # the same delivery arriving twice at once
            session.rollback()
            return JSONResponse({"delivery": delivery_id, "outcome": "duplicate"}, status_code=200)
        if decision.accepted:
            try:
                _enqueue(event, delivery_id, data)
            except Exception as exc:  # broker down: not recorded, so a redelivery is not a duplicate
                raise HTTPException(503, f"cannot queue the work now ({type(exc).__name__}); redeliver later") from exc
    log.info("delivery %s %s%s: %s (%s)", delivery_id, event, f".{action}" if action else "",
             record.outcome, decision.detail)
    return JSONResponse({"delivery": delivery_id, "outcome": record.outcome, "detail": decision.detail},
                        status_code=202)


def _enqueue(event: str, delivery_id: str, data: dict[str, Any]) -> None:
    from roofwatch.service.tasks import handle_github_event

    if get_settings().embedded:
        background.submit(handle_github_event.apply, (event, delivery_id, data))
    else:
        handle_github_event.apply_async((event, delivery_id, data))
