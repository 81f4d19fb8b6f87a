"""Text from suites and result files made storable on every database, before it is stored.

PostgreSQL refuses a NUL character in text and JSON (the whole transaction fails, and with it
every other suite of the run), and an index entry above about 2,700 bytes; SQLite takes both.
So a NUL becomes U+FFFD, and a name bound for an indexed column that is longer than
``INDEXED_BYTES`` keeps its start and ends in a hash of the whole, which keeps distinct names
distinct.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from pydantic import BaseModel

from roofwatch.common.envelope import Envelope

NUL = "\x00"
REPLACEMENT = "\ufffd"
INDEXED_BYTES = 1024
Model = TypeVar("Model", bound=BaseModel)


def without_nul(value: Any) -> Any:
    """``value`` (JSON-like) with every NUL in its strings and keys replaced."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    return value


def model_without_nul(model: Model) -> Model:
    """``model`` itself when none of its text holds a NUL (checked at C speed), else a cleaned copy."""
    if "\\u0000" not in model.model_dump_json():
        return model
    return type(model).model_validate(without_nul(model.model_dump()))


def bounded(name: str) -> str:
    """``name`` when it fits an index entry, else its start and a hash of all of it."""
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) <= INDEXED_BYTES:
        return name
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    start = encoded[:INDEXED_BYTES - 40].decode("utf-8", "ignore")
    return f"{start}…#{digest}"


def storable_envelope(envelope: Envelope) -> Envelope:
    """The envelope with no NUL anywhere and every indexed name bounded."""
    envelope = model_without_nul(envelope)
    device = envelope.device
    if len(device.device_class) > INDEXED_BYTES // 4:
        envelope.device = device.model_copy(update={"device_class": bounded(device.device_class)})
    for suite in envelope.suites:
        suite.name = bounded(suite.name)
        for measurement in suite.measurements:
            if len(measurement.name) > INDEXED_BYTES // 4:
                measurement.name = bounded(measurement.name)
        for outcome in suite.outcomes:
            if len(outcome.test_id) > INDEXED_BYTES // 4:
                outcome.test_id = bounded(outcome.test_id)
        for artifact in suite.artifacts:
            if len(artifact.kernel) > INDEXED_BYTES // 4:
                artifact.kernel = bounded(artifact.kernel)
    return envelope
