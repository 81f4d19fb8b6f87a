"""``POST /webhooks/github``: signed deliveries in, work queued, an answer within milliseconds.

Order of checks, each with its own status. Before a byte of the body is read: a configured
secret and an ``X-Hub-Signature-256`` header of the right shape (401), a declared size over
the limit (413), a free slot among the ``ROOFWATCH_WEBHOOK_MAX_CONCURRENT`` bodies being read
(503 with ``Retry-After``). While the body streams in: its size, counted as it arrives (413),
and the HMAC over it; then the signature (401). Then the event headers and the JSON (400), a
repeated ``X-GitHub-Delivery`` (200, no-op), the payload's shape and types for the events
roofwatch acts on (400 naming the field). An unauthenticated body is never held whole in
memory: past ``SPOOL_BYTES`` it waits in a temporary file until its signature is known.

Every delivery that gets past the signature and the payload checks is recorded in
``webhookdelivery`` with what became of it, so "why did my push not run?" has an answer. The
record is committed before its work is queued (the task looks it up); when queuing fails the
record is removed again, so GitHub's redelivery is not taken for a duplicate. Accepted work
runs after the response: on the measuring lane when embedded (``core/embedded.py``), on the ``cpu`` queue otherwise.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from roofwatch.service.core.config import get_settings
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.errors import PayloadError
from roofwatch.service.core.models import WebhookDelivery
from roofwatch.service.flows import dispatch
from roofwatch.service.flows import github_events as events
from roofwatch.service.github import payloads, signature
from roofwatch.service.github.payloads import EVENT_MODELS
from roofwatch.service.records.storable import without_nul

log = logging.getLogger(__name__)

router = APIRouter(tags=["github"])

# What one body being read may hold in memory before the rest goes to a temporary file.
SPOOL_BYTES = 1024 * 1024
# What a client refused for want of a free slot is told to wait, in seconds.
RETRY_AFTER_S = 10
# GitHub's delivery ids are UUIDs and its event names short words; longer ones are not GitHub's.
MAX_HEADER_VALUE = 100


class BodySlots:
    """How many webhook bodies are being read at once; at most ``limit``.

    Taken without waiting (a request that finds none free is answered 503 at once), from the
    event loop or from any thread.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.in_use >= self.limit:
                return False
            self.in_use += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.in_use -= 1


def body_slots(request: Request) -> BodySlots:
    """The application's slots, made on first use from ``ROOFWATCH_WEBHOOK_MAX_CONCURRENT``."""
    slots: BodySlots | None = getattr(request.app.state, "webhook_body_slots", None)
    if slots is None:
        slots = request.app.state.webhook_body_slots = BodySlots(get_settings().webhook_max_concurrent)
    return slots


async def _read_signed(request: Request, secret: str, header: str, limit: int) -> bytes:
    """The body, once its size is within ``limit`` and ``header`` is its signature."""
    mac = signature.hasher(secret)
    size = 0
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPException(413, f"payload is over the {limit}-byte limit")
            mac.update(chunk)
            spool.write(chunk)
        if not signature.matches(mac, header):
            raise HTTPException(401, "missing or wrong X-Hub-Signature-256")
        spool.seek(0)
        return spool.read()


def _validation_message(error: ValidationError, shown: int = 3) -> str:
    problems = [f"{'.'.join(str(part) for part in e['loc']) or 'payload'}: {e['msg']}" for e in error.errors()]
    more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
    return "; ".join(problems[:shown]) + more


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "a delivery already received (same X-GitHub-Delivery): nothing done"},
    400: {"description": "missing event/delivery headers, a body that is not a JSON object, or a payload "
                         "of the wrong shape or types"},
    401: {"description": "missing or wrong X-Hub-Signature-256, or no webhook secret configured"},
    413: {"description": "body over ROOFWATCH_WEBHOOK_MAX_BYTES"},
    503: {"description": "too many bodies being read (ROOFWATCH_WEBHOOK_MAX_CONCURRENT), or the work could "
                         "not be queued; redeliver later"},
}


@router.post("/webhooks/github", status_code=202, responses=RESPONSES)
async def github_webhook(request: Request) -> JSONResponse:
    settings = get_settings()
    secret, header = settings.github_webhook_secret, request.headers.get("x-hub-signature-256")
    if not secret:
        raise HTTPException(401, "webhooks are refused: ROOFWATCH_GITHUB_WEBHOOK_SECRET is not set on the server")
    if header is None or not signature.well_formed(header):
        raise HTTPException(401, "missing or wrong X-Hub-Signature-256")
    limit = settings.webhook_max_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"payload of {declared} bytes is over the {limit}-byte limit")
    slots = body_slots(request)
    if not slots.take():
        raise HTTPException(503, f"{slots.limit} webhook bodies are being read already; redeliver later",
                            headers={"Retry-After": str(RETRY_AFTER_S)})
    try:
        body = await _read_signed(request, secret, header, limit)
    finally:
        slots.give_back()
    event = request.headers.get("x-github-event")
    delivery_id = request.headers.get("x-github-delivery")
    if not event or not delivery_id:
        raise HTTPException(400, "X-GitHub-Event and X-GitHub-Delivery headers are required")
    if len(event) > MAX_HEADER_VALUE or len(delivery_id) > MAX_HEADER_VALUE:
        raise HTTPException(400, f"X-GitHub-Event and X-GitHub-Delivery are at most {MAX_HEADER_VALUE} characters")
    try:
        # A NUL is valid JSON but no text PostgreSQL stores; GitHub never sends one.
        data = without_nul(payloads.parse(body))
    except PayloadError as exc:
        raise HTTPException(400, str(exc)) from exc
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
    action = data.get("action")
    action = action if isinstance(action, str) else ""
    with session_scope() as session:
        if session.exec(select(WebhookDelivery.id).where(WebhookDelivery.delivery_id == delivery_id)).first():
            return JSONResponse({"delivery": delivery_id, "outcome": "duplicate"}, status_code=200)
        decision = events.route(session, event, payload, settings) if payload is not None else \
            events.Decision(False, f"event {event!r} is not one roofwatch acts on")
        record = WebhookDelivery(delivery_id=delivery_id, event=event, action=action,
                                 repository=events.repository_name(payload) if payload else "",
                                 outcome="accepted" if decision.accepted else "ignored", detail=decision.detail)
        session.add(record)
        try:
            session.flush()
        except IntegrityError:  # the same delivery arriving twice at once
            session.rollback()
            return JSONResponse({"delivery": delivery_id, "outcome": "duplicate"}, status_code=200)
        outcome = record.outcome
    # Committed above: the task looks the record up to write what became of the delivery.
    if decision.accepted:
        assert payload is not None  # only a validated event is ever accepted
        try:
            _enqueue(event, delivery_id, payloads.for_queue(payload))
        except Exception as exc:
            _forget(delivery_id)
            raise HTTPException(503, f"cannot queue the work now ({type(exc).__name__}); redeliver later") from exc
    log.info("delivery %s %s%s: %s (%s)", delivery_id, event, f".{action}" if action else "",
             outcome, decision.detail)
    return JSONResponse({"delivery": delivery_id, "outcome": outcome, "detail": decision.detail},
                        status_code=202)


def _forget(delivery_id: str) -> None:
    """Remove the record of a delivery whose work was not queued, so a redelivery is not a duplicate."""
    with session_scope() as session:
        for record in session.exec(select(WebhookDelivery).where(WebhookDelivery.delivery_id == delivery_id)):
            session.delete(record)


def _enqueue(event: str, delivery_id: str, data: dict[str, Any]) -> None:
    # On a cpu worker, or (embedded) on the server's measuring lane: the webhook is answered at once.
    dispatch.github_event(event, delivery_id, data)
