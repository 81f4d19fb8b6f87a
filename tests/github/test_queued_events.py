"""An accepted delivery travels on the queue as the event the webhook validated, not GitHub's whole payload.

Every example payload GitHub documents for an event roofwatch handles is validated as the webhook
validates it, sent as ``for_queue`` sends it, and read back as the task reads it: the same
event comes out, from a message that holds only the fields roofwatch declares.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from roofwatch.service.github.payloads import EVENT_MODELS, for_queue, from_queue


def _examples(corpus: Path) -> list[tuple[str, Path]]:
    return [(event, path) for event in sorted(EVENT_MODELS)
            for path in sorted((corpus / "webhooks" / event).glob("*.json"))]


def _declared(model: type[BaseModel], data: object) -> bool:
    """Whether every key of ``data`` is a field ``model`` declares, all the way down."""
    if not isinstance(data, dict):
        return True
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            return False
        inner = [a for a in getattr(field.annotation, "__args__", (field.annotation,))
                 if isinstance(a, type) and issubclass(a, BaseModel)]
        items = value if isinstance(value, list) else [value]
        if inner and not all(_declared(inner[0], item) for item in items):
            return False
    return True


def test_every_handled_example_comes_back_the_same_from_a_message_of_declared_fields(shared_corpus: Path) -> None:
    examples = _examples(shared_corpus)
    assert {event for event, _ in examples} == set(EVENT_MODELS)  # each handled event has examples
    for event, path in examples:
        raw = json.loads(path.read_text())
        validated = EVENT_MODELS[event].model_validate(raw)
        queued = for_queue(validated)
        assert json.loads(json.dumps(queued)) == queued, path  # plain JSON: any Celery serializer carries it
        assert _declared(EVENT_MODELS[event], queued), (path, queued)
        assert from_queue(event, queued) == validated, path
        assert len(json.dumps(queued)) < len(json.dumps(raw)), path


def test_a_push_message_is_a_small_part_of_what_github_sent(shared_corpus: Path) -> None:
    raw = json.loads((shared_corpus / "webhooks" / "push" / "with-new-branch.payload.json").read_text())
    queued = for_queue(EVENT_MODELS["push"].model_validate(raw))
    assert set(queued) == {"ref", "after", "deleted", "repository", "installation"}
    assert len(json.dumps(queued)) * 5 < len(json.dumps(raw))


@pytest.mark.parametrize("event", sorted(EVENT_MODELS))
def test_a_message_queued_before_an_upgrade_is_read_as_the_webhook_read_it(shared_corpus: Path, event: str) -> None:
    # Before, the whole payload was queued: the task reads it the same way, its unknown fields ignored.
    _, path = next(e for e in _examples(shared_corpus) if e[0] == event)
    raw = json.loads(path.read_text())
    assert from_queue(event, raw) == EVENT_MODELS[event].model_validate(raw)
