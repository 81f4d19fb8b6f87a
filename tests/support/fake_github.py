"""A fake api.github.com on loopback that checks every request against GitHub's REST description.

Roofwatch talks to GitHub through ``roofwatch.service.github.client``. Mocking that client would only prove the code agrees
with itself; this module instead runs a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1, random port) that
serves the few operations roofwatch uses, keeps their state (statuses, check runs, comments, tokens, pull requests),
records every request, and judges each one against GitHub's published OpenAPI description
(``shared/corpus/github-rest-subset.json``, $refs resolved inline — see ``shared/corpus/PROVENANCE.md``).

Every request that GitHub would refuse, or that breaks the description, becomes a *violation*: a line in
``fake.violations`` naming the request and the problem. The fake answers it the way GitHub would (404 for an unknown
route or a malformed path parameter, 401 without credentials, 403 without a User-Agent, 400 for a body that is not
JSON, 422 ``Validation Failed`` for a body or query parameter that breaks its schema). Problems GitHub itself lets
through (a missing ``Accept``, an unknown query parameter) are still violations, but the request is served, so a
test sees both the flow GitHub would produce and the complaint. Tests assert ``fake.violations == []`` after a flow.

The fake also checks its own answers against the description's response schemas, so a client parsing them is
parsing the shape GitHub documents; a mismatch there is reported as a violation that blames this file.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
import secrets
import string
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import jwt
import pytest
from jsonschema import Draft4Validator, Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

SPEC_PATH = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "github-rest-subset.json"
DOCS_URL = "https://docs.github.com/rest"
# The version every current client sends; later ones are read from the description (x-github-breaking-changes).
DEFAULT_API_VERSION = "2022-11-28"
APP_TOKEN_OPERATION = "apps/create-installation-access-token"
MAX_PER_PAGE = 100  # "The number of results per page (max 100)"; GitHub caps larger values silently.
APP_JWT_MAX_LIFETIME_S = 600  # GitHub refuses an app JWT whose exp is more than 10 minutes after iat.
CLOCK_LEEWAY_S = 1  # iat is whole seconds; allow the truncation, not real clock drift.
# The collaborator-permission endpoint's legacy ``permission`` for each role: "the `maintain` role is mapped to
# `write` and the `triage` role is mapped to `read`" (its description); ``role_name`` keeps the role itself.
ROLE_PERMISSION = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read",
                   "none": "none"}
SECONDARY_RATE_LIMIT = {
    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID.",
    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
}


# -- the REST description ------------------------------------------------------------------------------------------

_SCHEMA_MAP_KEYWORDS = ("properties", "patternProperties")
_SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf")
_SCHEMA_KEYWORDS = ("items", "not", "additionalProperties")
# OpenAPI-only annotations: meaningless to JSON Schema, and `examples` even means something else in draft 2020-12.
_OPENAPI_ONLY = ("nullable", "example", "examples", "discriminator", "xml", "externalDocs", "readOnly", "writeOnly",
                 "deprecated")


def to_json_schema(schema: Any) -> Any:
    """Translate an OpenAPI 3.0 schema object into plain JSON Schema.

    OpenAPI 3.0 spells "may be null" as ``nullable: true`` beside ``type``; JSON Schema knows only type lists, so a
    validator would reject every documented ``null`` (``target_url``, ``description`` …). Recursion follows only
    keywords that hold schemas, so a *property* called ``nullable`` or ``type`` is left alone. A 3.1 document has no
    ``nullable`` and passes through unchanged apart from the dropped annotations.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-") or key in _OPENAPI_ONLY:
            continue
        if key in _SCHEMA_MAP_KEYWORDS:
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LIST_KEYWORDS:
            out[key] = [to_json_schema(sub) for sub in value]
        elif key in _SCHEMA_KEYWORDS:
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    if schema.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif kind is None:  # a nullable oneOf/allOf: null is one more alternative
            out = {"anyOf": [out, {"type": "null"}]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def parse_timestamp(value: str) -> datetime | None:
    """An RFC 3339 timestamp with a zone (what GitHub documents as ``YYYY-MM-DDTHH:MM:SSZ``), else None."""
    if not _RFC3339.fullmatch(value):
        return None  # a naive isoformat() (no zone) lands here: GitHub would read it in an unknown zone
    try:
        return datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return None


# jsonschema checks "date-time" only when the optional rfc3339-validator is installed; do it here instead, and check
# no other format (the description's "uri"/"int64" annotate responses, and GitHub does not enforce them on input).
FORMATS = FormatChecker(formats=())


def _is_date_time(value: object) -> bool:
    return not isinstance(value, str) or parse_timestamp(value) is not None


FORMATS.checks("date-time")(_is_date_time)


@dataclass
class Operation:
    """One operation of the description, with its schemas already translated to JSON Schema."""

    method: str
    template: str
    operation_id: str
    pattern: re.Pattern[str]
    path_params: dict[str, Any]
    query_params: dict[str, Any]
    body_schema: Any | None
    body_required: bool
    response_schemas: dict[str, Any]  # status code -> application/json schema
    response_examples: dict[str, list[Any]]
    validator_class: type[Validator]
    _validators: dict[str, Validator] = field(default_factory=dict)

    def validator(self, key: str, schema: Any) -> Validator:
        """A validator for one of this operation's schemas, built once (the pull-request schema is large)."""
        if key not in self._validators:
            self._validators[key] = self.validator_class(schema, format_checker=FORMATS)
        return self._validators[key]

    def example(self, status: str) -> Any:
        """The description's first example answer for ``status``: a template of GitHub's own shape."""
        return copy.deepcopy(self.response_examples[status][0])


def _path_pattern(template: str, multi_segment: set[str]) -> tuple[re.Pattern[str], list[str]]:
    """A regex for a path template; ``x-multi-segment`` parameters (a sha, ``base...head``) may contain slashes."""
    names: list[str] = []
    regex = ""
    for literal, name in re.findall(r"([^{]*)(?:\{([^}]+)\})?", template):
        regex += re.escape(literal)
        if name:
            regex += f"(?P<p{len(names)}>{'.+' if name in multi_segment else '[^/]+'})"
            names.append(name)
    return re.compile(regex), names


class RestDescription:
    """The operations of an OpenAPI document, found by method and concrete path."""

    def __init__(self, document: dict[str, Any]) -> None:
        version = str(document.get("openapi", "3.0"))
        # 3.0 schemas are a draft-4 dialect (boolean exclusiveMaximum); 3.1 schemas are draft 2020-12.
        self.validator_class: type[Validator] = Draft202012Validator if version.startswith("3.1") else Draft4Validator
        self.operations = [self._operation(method, path, op, shared)
                           for method, path, op, shared in self._raw_operations(document)]
        # The most literal template wins when two match (none do today; keeps the lookup unambiguous anyway).
        self.operations.sort(key=lambda op: -len(re.sub(r"\{[^}]+\}", "", op.template)))
        self.operation_ids = {op.operation_id for op in self.operations}
        self.api_versions = {DEFAULT_API_VERSION} | set(re.findall(r'"version": "(\d{4}-\d{2}-\d{2})"',
                                                                   json.dumps(document)))

    @staticmethod
    def _raw_operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any], list[Any]]]:
        """(method, path template, operation, path-level parameters) from either document layout.

        A standard document nests operations under ``paths``; the corpus subset lists them flat under
        ``operations`` keyed ``"POST /repos/{owner}/{repo}/statuses/{sha}"``.
        """
        for key, op in document.get("operations", {}).items():
            method, _, path = key.partition(" ")
            yield method.upper(), path, op, []
        for path, item in document.get("paths", {}).items():
            for method, op in item.items():
                if method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
                    yield method.upper(), path, op, item.get("parameters", [])

    def _operation(self, method: str, template: str, op: dict[str, Any], shared: list[Any]) -> Operation:
        params = {(p["in"], p["name"]): p for p in [*shared, *op.get("parameters", [])]}  # operation-level wins
        multi = {name for (where, name), p in params.items() if where == "path" and p.get("x-multi-segment")}
        pattern, _ = _path_pattern(template, multi)
        body = op.get("requestBody") or {}
        body_schema = body.get("content", {}).get("application/json", {}).get("schema")
        responses: dict[str, Any] = {}
        examples: dict[str, list[Any]] = {}
        for status, response in op.get("responses", {}).items():
            media = response.get("content", {}).get("application/json", {})
            if "schema" in media:
                responses[status] = to_json_schema(media["schema"])
            examples[status] = [ex["value"] for ex in media.get("examples", {}).values() if "value" in ex]
        return Operation(
            method=method, template=template, operation_id=op["operationId"], pattern=pattern,
            path_params={name: to_json_schema(p.get("schema", {})) for (where, name), p in params.items()
                         if where == "path"},
            query_params={name: to_json_schema(p.get("schema", {})) for (where, name), p in params.items()
                          if where == "query"},
            body_schema=to_json_schema(body_schema) if body_schema is not None else None,
            body_required=bool(body.get("required")), response_schemas=responses, response_examples=examples,
            validator_class=self.validator_class)

    def match(self, method: str, path: str) -> tuple[Operation | None, dict[str, str], list[str]]:
        """The operation for ``method path``, its (decoded) path parameters, and the methods the path allows."""
        allowed: list[str] = []
        for op in self.operations:
            found = op.pattern.fullmatch(path)
            if not found:
                continue
            if op.method != method:
                allowed.append(op.method)
                continue
            names = re.findall(r"\{([^}]+)\}", op.template)
            return op, {name: unquote(found.group(f"p{i}")) for i, name in enumerate(names)}, allowed
        return None, {}, allowed


@lru_cache(maxsize=2)
def load_description(path: Path = SPEC_PATH) -> RestDescription:
    """Parse the description once per test session (750 kB of JSON)."""
    return RestDescription(json.loads(path.read_text(encoding="utf-8")))


def coerce(value: str, schema: Any) -> Any:
    """A query or path string as the JSON value its schema describes, so the schema can judge it.

    What cannot be read as the declared type stays a string, and the schema then reports the mismatch.
    """
    kinds = schema.get("type") if isinstance(schema, dict) else None
    kinds = [kinds] if isinstance(kinds, str) else (kinds or [])
    if "integer" in kinds and re.fullmatch(r"-?\d+", value):
        return int(value)
    if "number" in kinds and re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", value):
        return float(value)
    if "boolean" in kinds and value in ("true", "false"):
        return value == "true"
    if "array" in kinds:
        return value.split(",")
    return value


# -- what the fake records -------------------------------------------------------------------------------------------


@dataclass
class Recorded:
    """One request as the fake saw it, and the status it answered."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: Any  # parsed JSON, or None (no body, or not JSON)
    status: int
    operation_id: str | None


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Problem:
    """Something wrong with a request. ``status`` None: GitHub serves it anyway (the fake does too)."""

    message: str
    status: int | None
    body: Any = None
    violation: bool = True  # False: a legitimate refusal (a revoked token), not a client bug


@dataclass
class Call:
    """A request that passed the checks, as the operation handlers see it."""

    operation: Operation
    path: str
    params: dict[str, Any]  # path parameters, coerced to their schema types
    query: dict[str, Any]  # coerced likewise
    raw_query: dict[str, str]
    body: Any


@dataclass
class _Fault:
    status: int
    headers: dict[str, str]
    body: Any
    remaining: int


@dataclass
class _App:
    app_id: str
    public_key: str | bytes


@dataclass
class _Pull:
    repo: str
    number: int
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    head_repo: str
    user: str
    author_association: str
    labels: tuple[str, ...]
    title: str
    state: str
    head_clone_url: str | None


@dataclass
class _Comment:
    id: int
    repo: str
    issue: int
    body: str
    user: str
    created: float
    updated: float


def error_body(message: str, status: int, **extra: Any) -> dict[str, Any]:
    """GitHub's error shape: message, documentation_url, and (lately) the status as a string."""
    return {"message": message, "documentation_url": DOCS_URL, "status": str(status), **extra}


def not_found() -> dict[str, Any]:
    return error_body("Not Found", 404)


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(repo_full_name: str) -> str:
    return repo_full_name.lower()  # "The name is not case sensitive."


def _stable_id(text: str) -> int:
    return zlib.crc32(text.encode()) + 1


def _github_media_type(accept: str) -> bool:
    """True when some type in ``Accept`` is GitHub's (``application/vnd.github+json``, ``.diff``, ``.v3+json`` …)."""
    types = (part.split(";")[0].strip().lower() for part in accept.split(","))
    return any(t == "application/vnd.github+json" or t.startswith("application/vnd.github.") for t in types)


def _describe(error: ValidationError) -> str:
    where = "/".join(str(part) for part in error.absolute_path) or "(body)"
    detail = f"{where}: {error.message}"
    if error.context:  # anyOf/oneOf: say why each alternative failed
        detail += " [" + "; ".join(sorted({sub.message for sub in error.context})) + "]"
    return detail


# -- the fake --------------------------------------------------------------------------------------------------------


class FakeGitHub:
    """api.github.com for tests: state, recording, validation, fault injection. Start with ``start()``."""

    STATIC_TOKEN = "ghp_roofwatchFakeStaticToken00000000000"  # accepted from the start, for token-mode clients

    def __init__(self, description: RestDescription | None = None, bot_login: str = "roofwatch[bot]") -> None:
        self.spec = description or load_description(SPEC_PATH)
        self.bot_login = bot_login  # who GitHub says wrote the comments the client posts
        self.token_lifetime = timedelta(hours=1)  # "Installation tokens expire one hour from the time you create them"
        self.stateless_tokens = False  # mint the 2026 "ghs_APPID_JWT"-style tokens, longer than 40 characters
        self._lock = threading.RLock()
        self._app: _App | None = None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._handlers: dict[str, Callable[[Call], Reply]] = {
            "repos/create-commit-status": self._create_status,
            "checks/create": self._create_check_run,
            "checks/update": self._update_check_run,
            "checks/get": self._get_check_run,
            "issues/list-comments": self._list_comments,
            "issues/create-comment": self._create_comment,
            "issues/update-comment": self._update_comment,
            APP_TOKEN_OPERATION: self._create_installation_token,
            "pulls/get": self._get_pull,
            "repos/get-collaborator-permission-level": self._get_permission,
        }
        self.reset()

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True  # a client that never closes its connection must not block stop()
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        # A short poll keeps shutdown() quick (the default 0.5 s would add half a second to every test).
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server, self._thread = None, None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, like ``http://127.0.0.1:PORT`` (what ``api.github.com`` is to a real client)."""
        if self._server is None:
            raise RuntimeError("the fake GitHub is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> None:
        """Forget traffic, stored objects, tokens, faults and outages; keep the app key and settings."""
        with self._lock:
            self.requests: list[Recorded] = []
            self.violations: list[str] = []
            self.tokens_minted = 0
            self._tokens: dict[str, float | None] = {self.STATIC_TOKEN: None}  # token -> expiry (epoch) or never
            self._statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}
            self._check_runs: dict[int, tuple[str, dict[str, Any]]] = {}
            self._comments: dict[int, _Comment] = {}
            self._pulls: dict[tuple[str, int], _Pull] = {}
            self._roles: dict[tuple[str, str], str] = {}  # (repo key, login casefolded) -> role
            self._faults: dict[str, deque[_Fault]] = {}
            self._down = False
            # GitHub's ids are far past 2**31 by now; starting there catches a client that stores them in int32.
            self._ids = {kind: itertools.count(start) for kind, start in
                         (("status", 35_000_000_001), ("check_run", 30_000_000_001), ("comment", 2_500_000_001))}

    # -- configuration used by tests -------------------------------------------------------------------------------

    def configure_app(self, app_id: int | str, public_key_pem: str | bytes,
                      token_lifetime: timedelta | None = None) -> None:
        """Require app JWTs signed (RS256) by the key matching ``public_key_pem`` with ``iss == str(app_id)``."""
        with self._lock:
            self._app = _App(str(app_id), public_key_pem)
            if token_lifetime is not None:
                self.token_lifetime = token_lifetime

    def add_token(self, token: str) -> None:
        """Accept ``token`` (a personal access token, say) on the repository endpoints."""
        with self._lock:
            self._tokens[token] = None

    def revoke_token(self, token: str) -> None:
        """GitHub forgets ``token``: it now gets 401 Bad credentials (a legitimate refusal, not a violation)."""
        with self._lock:
            self._tokens.pop(token, None)

    def add_pull(self, repo_full_name: str, number: int, head_sha: str, head_ref: str, base_ref: str, base_sha: str,
                 head_repo_full_name: str | None = None, user: str = "octocat", author_association: str = "OWNER",
                 labels: Iterable[str] = (), *, title: str | None = None, state: str = "open",
                 head_clone_url: str | None = None) -> None:
        """Register a pull request for ``GET /repos/{owner}/{repo}/pulls/{number}``.

        ``head_repo_full_name`` other than the repository makes it a pull from a fork; ``head_clone_url`` replaces
        the head repository's ``clone_url`` (a local path, so the checkout code can really clone it).
        """
        with self._lock:
            self._pulls[(_key(repo_full_name), number)] = _Pull(
                repo=repo_full_name, number=number, head_sha=head_sha, head_ref=head_ref, base_ref=base_ref,
                base_sha=base_sha, head_repo=head_repo_full_name or repo_full_name, user=user,
                author_association=author_association, labels=tuple(labels), title=title or f"Pull request #{number}",
                state=state, head_clone_url=head_clone_url)

    def set_permission(self, repo_full_name: str, login: str, role: str) -> None:
        """Give ``login`` a role on the repository: admin, maintain, write, triage, read or none (the default)."""
        if role not in ROLE_PERMISSION:
            raise ValueError(f"{role!r} is not a repository role ({', '.join(ROLE_PERMISSION)})")
        with self._lock:
            self._roles[(_key(repo_full_name), login.casefold())] = role

    def add_comment(self, repo_full_name: str, issue_number: int, body: str, user: str = "octocat") -> dict[str, Any]:
        """Seed a comment (someone else's, or the bot's from an earlier run) without a request."""
        with self._lock:
            return self._render_comment(self._store_comment(repo_full_name, issue_number, body, user))

    def fail_next(self, operation_id: str, status: int, times: int = 1, headers: dict[str, str] | None = None,
                  body: Any = None) -> None:
        """Answer the next ``times`` valid requests for ``operation_id`` with ``status`` (502, 429, 403 …)."""
        if operation_id not in self.spec.operation_ids:
            raise ValueError(f"{operation_id!r} is not an operation of the REST description")
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        fault = _Fault(status, dict(headers or {}),
                       body if body is not None else error_body(HTTPStatus(status).phrase, status), times)
        with self._lock:
            self._faults.setdefault(operation_id, deque()).append(fault)

    def down(self) -> None:
        """An outage: every request gets 503 until ``up()`` (still recorded and validated)."""
        with self._lock:
            self._down = True

    def up(self) -> None:
        with self._lock:
            self._down = False

    # -- what tests read --------------------------------------------------------------------------------------------

    def statuses(self, repo_full_name: str, sha: str) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._statuses.get((_key(repo_full_name), sha), []))

    def check_runs(self, repo_full_name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(run) for repo, run in self._check_runs.values() if repo == _key(repo_full_name)]

    def comments(self, repo_full_name: str, issue_number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [self._render_comment(c) for c in self._comments_on(repo_full_name, issue_number)]

    def calls(self, operation_id: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.operation_id == operation_id]

    def assert_clean(self) -> None:
        """Fail with every violation listed (more readable than ``assert fake.violations == []``)."""
        with self._lock:
            if self.violations:
                raise AssertionError("requests the real GitHub would refuse or that break its REST description:\n"
                                     + "\n".join(self.violations))

    # -- one request -------------------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], raw_body: bytes) -> Reply:
        """Judge, record and answer one request (the HTTP layer only parses and writes)."""
        split = urlsplit(target)
        raw_query = dict(parse_qsl(split.query, keep_blank_values=True))
        body, is_json = _parse_json(raw_body)
        with self._lock:
            operation, path_values, allowed = self.spec.match(method, split.path)
            problems: list[Problem] = []
            call: Call | None = None
            if operation is None:
                hint = f" (the description has {'/'.join(allowed)} there)" if allowed else ""
                problems.append(Problem(f"no operation in the REST description{hint}", 404, not_found()))
            else:
                params, path_problems = self._check_params(operation, "path", path_values)
                query, query_problems = self._check_params(operation, "query", raw_query)
                problems += path_problems + self._check_headers(headers) + self._check_auth(operation, headers)
                problems += query_problems + self._check_body(operation, raw_body, body, is_json)
                call = Call(operation, split.path, params, query, raw_query, body)
            label = f"{method} {target}"
            self.violations += [f"{label}: {p.message}" for p in problems if p.violation]
            reply = self._answer(operation, call, problems)
            self.requests.append(Recorded(method, split.path, raw_query, dict(headers), body if is_json else None,
                                          reply.status, operation.operation_id if operation else None))
            return reply

    def _answer(self, operation: Operation | None, call: Call | None, problems: list[Problem]) -> Reply:
        if self._down:
            return Reply(503, error_body("Service Unavailable", 503))
        refusal = next((p for p in problems if p.status is not None), None)
        if refusal is not None:
            reply = Reply(refusal.status or 400, refusal.body)
        else:
            assert operation is not None and call is not None
            fault = self._take_fault(operation.operation_id)
            if fault is not None:
                return Reply(fault.status, fault.body, fault.headers)  # the test's own body: not checked
            handler = self._handlers.get(operation.operation_id)
            if handler is None:
                self.violations.append(f"{call.path}: {operation.operation_id} is in the description but the fake "
                                       "does not serve it (add a handler to tests/support/fake_github.py)")
                return Reply(501, error_body("Not Implemented", 501))
            reply = handler(call)
        if operation is not None:
            self._check_response(operation, reply)
        return reply

    def _take_fault(self, operation_id: str) -> _Fault | None:
        queue = self._faults.get(operation_id)
        if not queue:
            return None
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.popleft()
        return fault

    # -- the checks --------------------------------------------------------------------------------------------------

    def _check_params(self, operation: Operation, where: str,
                      values: dict[str, str]) -> tuple[dict[str, Any], list[Problem]]:
        """Path or query parameters against their schemas: a bad path parameter means no such resource (404),
        a bad query value 422; an undeclared query parameter is noted, and ignored as GitHub ignores it."""
        schemas = operation.path_params if where == "path" else operation.query_params
        coerced: dict[str, Any] = {}
        problems: list[Problem] = []
        for name, text in values.items():
            if name not in schemas:
                problems.append(Problem(f"unknown {where} parameter {name!r}", None))
                continue
            value = coerce(text, schemas[name])
            errors = list(operation.validator(f"{where} {name}", schemas[name]).iter_errors(value))
            if errors:
                reason = "; ".join(e.message for e in errors)
                if where == "path":
                    problems.append(Problem(f"path parameter {name}={text!r}: {reason}", 404, not_found()))
                else:
                    problems.append(Problem(f"query parameter {name}={text!r}: {reason}", 422, self._validation_failed(
                        [{"resource": "query", "field": name, "code": "invalid", "message": reason}])))
                continue
            coerced[name] = value
        return coerced, problems

    def _check_headers(self, headers: dict[str, str]) -> list[Problem]:
        problems: list[Problem] = []
        if not headers.get("user-agent"):
            problems.append(Problem("no User-Agent header (GitHub refuses such requests)", 403, error_body(
                "Request forbidden by administrative rules. Please make sure your request has a User-Agent header.",
                403)))
        accept = headers.get("accept")
        if not accept:
            problems.append(Problem("no Accept header (GitHub documents application/vnd.github+json)", None))
        elif not _github_media_type(accept):
            problems.append(Problem(f"Accept {accept!r} is not application/vnd.github+json", None))
        version = headers.get("x-github-api-version")
        if version is not None and version not in self.spec.api_versions:
            problems.append(Problem(f"X-GitHub-Api-Version {version!r} is not one GitHub serves", 400,
                                    error_body(f"API version '{version}' is not supported.", 400)))
        return problems

    def _check_auth(self, operation: Operation, headers: dict[str, str]) -> list[Problem]:
        header = headers.get("authorization", "")
        if not header:
            return [Problem("no Authorization header", 401, error_body("Requires authentication", 401))]
        scheme, _, credential = header.partition(" ")
        if scheme.lower() not in ("bearer", "token") or not credential.strip():
            return [Problem(f"Authorization is not 'Bearer <token>' or 'token <token>' ({scheme!r} …)", 401,
                            error_body("Bad credentials", 401))]
        credential = credential.strip()
        if operation.operation_id == APP_TOKEN_OPERATION:
            if scheme.lower() != "bearer":
                return [Problem("an app JWT must be sent as 'Bearer <JWT>'", 401,
                                error_body("A JSON web token could not be decoded", 401))]
            problem = self._jwt_problem(credential)
            return [problem] if problem else []
        if credential not in self._tokens:
            return [Problem("unknown or revoked token", 401, error_body("Bad credentials", 401), violation=False)]
        expires = self._tokens[credential]
        if expires is not None and expires <= time.time():
            # The client kept an installation token past its expires_at: a caching bug.
            return [Problem(f"installation token used after it expired at {iso(expires)}", 401,
                            error_body("Bad credentials", 401))]
        return []

    def _jwt_problem(self, token: str) -> Problem | None:
        """Why GitHub would refuse this app JWT, or None. Claim mistakes are client bugs; a wrong key is not."""
        undecodable = "A JSON web token could not be decoded"  # GitHub's answer to a garbled or forged JWT

        def refuse(message: str, violation: bool = True, answer: str | None = None) -> Problem:
            return Problem(f"app JWT: {message}", 401, error_body(answer or message, 401), violation=violation)

        try:
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as exc:
            return refuse(f"not a JWT ({exc})", answer=undecodable)
        if header.get("alg") != "RS256":
            return refuse(f"signed with {header.get('alg')!r}; GitHub requires RS256")
        missing = [name for name in ("iat", "exp", "iss") if name not in claims]
        if missing:
            return refuse(f"missing claim(s) {', '.join(missing)}")
        if not all(isinstance(claims[name], int | float) for name in ("iat", "exp")):
            return refuse("'iat' and 'exp' must be numbers (seconds since the epoch)")
        now = time.time()
        if claims["exp"] - claims["iat"] > APP_JWT_MAX_LIFETIME_S:
            return refuse(f"'exp' is {claims['exp'] - claims['iat']} s after 'iat' (at most {APP_JWT_MAX_LIFETIME_S})")
        if claims["exp"] <= now:
            return refuse("expired ('exp' is in the past)")
        if claims["iat"] > now + CLOCK_LEEWAY_S:
            return refuse("'iat' is in the future")
        if self._app is None:
            return None  # no key configured: the claims are all the fake can judge
        if str(claims["iss"]) != self._app.app_id:
            return refuse(f"iss {claims['iss']!r} is not the configured app id {self._app.app_id!r}", violation=False)
        try:
            jwt.decode(token, self._app.public_key, algorithms=["RS256"],
                       options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
        except jwt.PyJWTError as exc:
            return refuse(f"does not verify against the app's public key ({exc})", violation=False, answer=undecodable)
        return None

    def _check_body(self, operation: Operation, raw: bytes, body: Any, is_json: bool) -> list[Problem]:
        unparsable = error_body("Problems parsing JSON", 400)
        if operation.body_schema is None:
            return [Problem("a body was sent to an operation that takes none", None)] if raw.strip() else []
        if not raw.strip():
            if operation.body_required:
                return [Problem("the operation requires a JSON body and none was sent", 400, unparsable)]
            return []
        if not is_json:
            return [Problem(f"the body is not JSON: {raw[:80]!r}", 400, unparsable)]
        validator = operation.validator("request", operation.body_schema)
        errors = sorted(validator.iter_errors(body), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            return [Problem("body breaks the schema: " + "; ".join(_describe(e) for e in errors), 422,
                            self._validation_failed([_error_entry(operation, e) for e in errors]))]
        rules = _documented_rules(operation.operation_id, body)
        if rules:
            return [Problem("body breaks a documented rule: " + "; ".join(rules), 422, self._validation_failed(
                [{"resource": operation.operation_id, "code": "custom", "message": rule} for rule in rules]))]
        return []

    @staticmethod
    def _validation_failed(errors: list[dict[str, Any]]) -> dict[str, Any]:
        return error_body("Validation Failed", 422, errors=errors)

    def _check_response(self, operation: Operation, reply: Reply) -> None:
        """The fake's own answer must have the documented shape; if not, the bug is in this file."""
        schema = operation.response_schemas.get(str(reply.status))
        if schema is None or reply.body is None:
            return
        errors = list(operation.validator(f"response {reply.status}", schema).iter_errors(reply.body))
        if errors:
            self.violations.append(f"fake's own {reply.status} answer for {operation.operation_id} breaks the "
                                   f"description (bug in tests/support/fake_github.py): " + "; ".join(map(_describe, errors)))

    # -- operations ----------------------------------------------------------------------------------------------------

    def _repo_of(self, call: Call) -> str:
        return f"{call.params['owner']}/{call.params['repo']}"

    def _create_status(self, call: Call) -> Reply:
        repo, sha, now = self._repo_of(call), call.params["sha"], iso(time.time())
        status_id = next(self._ids["status"])
        url = f"{self.url}/repos/{repo}/statuses/{sha}"
        status = {
            "url": url, "avatar_url": "https://avatars.githubusercontent.com/in/1?v=4", "id": status_id,
            "node_id": f"SC_fake{status_id}", "state": call.body["state"],
            "description": call.body.get("description"), "target_url": call.body.get("target_url"),
            "context": call.body.get("context", "default"), "created_at": now, "updated_at": now,
            "creator": self._user(self.bot_login),
        }
        self._statuses.setdefault((_key(repo), sha), []).append(status)
        return Reply(201, copy.deepcopy(status), {"Location": url})

    def _create_check_run(self, call: Call) -> Reply:
        repo, body, now = self._repo_of(call), call.body, iso(time.time())
        run_id = next(self._ids["check_run"])
        run = call.operation.example("201")  # GitHub's own shape (app, check_suite …); every field we know is set
        run.update({
            "id": run_id, "node_id": f"CR_fake{run_id}", "head_sha": body["head_sha"], "name": body["name"],
            "external_id": body.get("external_id"), "url": f"{self.url}/repos/{repo}/check-runs/{run_id}",
            "html_url": f"https://github.com/{repo}/runs/{run_id}", "details_url": body.get("details_url"),
            "status": body.get("status", "queued"), "conclusion": None, "started_at": body.get("started_at", now),
            "completed_at": None, "check_suite": {"id": _stable_id(f"{repo}@{body['head_sha']}")},
            "output": {"title": None, "summary": None, "text": None, "annotations_count": 0,
                       "annotations_url": f"{self.url}/repos/{repo}/check-runs/{run_id}/annotations"},
            "pull_requests": [],
        })
        _apply_check_run_fields(run, body, now)
        self._check_runs[run_id] = (_key(repo), run)
        return Reply(201, copy.deepcopy(run))

    def _stored_run(self, call: Call) -> dict[str, Any] | None:
        stored = self._check_runs.get(call.params["check_run_id"])
        return stored[1] if stored and stored[0] == _key(self._repo_of(call)) else None

    def _update_check_run(self, call: Call) -> Reply:
        run = self._stored_run(call)
        if run is None:
            return Reply(404, not_found())
        for name in ("name", "details_url", "external_id", "started_at"):
            if name in call.body:
                run[name] = call.body[name]
        _apply_check_run_fields(run, call.body, iso(time.time()))
        return Reply(200, copy.deepcopy(run))

    def _get_check_run(self, call: Call) -> Reply:
        run = self._stored_run(call)
        return Reply(200, copy.deepcopy(run)) if run is not None else Reply(404, not_found())

    def _list_comments(self, call: Call) -> Reply:
        since = parse_timestamp(call.query["since"]) if "since" in call.query else None
        items = [c for c in self._comments_on(self._repo_of(call), call.params["issue_number"])
                 if since is None or c.updated >= since.timestamp()]
        per_page = min(max(call.query.get("per_page", 30), 1), MAX_PER_PAGE)
        page = max(call.query.get("page", 1), 1)
        last = max(1, math.ceil(len(items) / per_page))
        chunk = items[(page - 1) * per_page:page * per_page]
        link = self._link_header(call, per_page, page, last)
        return Reply(200, [self._render_comment(c) for c in chunk], {"Link": link} if link else {})

    def _link_header(self, call: Call, per_page: int, page: int, last: int) -> str:
        """RFC 8288 links as GitHub sends them: next/last while pages remain, prev/first after the first."""
        def link(target: int, rel: str) -> str:
            query = urlencode({**call.raw_query, "per_page": per_page, "page": target})
            return f'<{self.url}{call.path}?{query}>; rel="{rel}"'

        links = []
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(min(page - 1, last), "prev"), link(1, "first")]
        return ", ".join(links)

    def _create_comment(self, call: Call) -> Reply:
        comment = self._store_comment(self._repo_of(call), call.params["issue_number"], call.body["body"],
                                      self.bot_login)
        body = self._render_comment(comment)
        return Reply(201, body, {"Location": body["url"]})

    def _update_comment(self, call: Call) -> Reply:
        comment = self._comments.get(call.params["comment_id"])
        if comment is None or comment.repo != _key(self._repo_of(call)):
            return Reply(404, not_found())
        comment.body, comment.updated = call.body["body"], time.time()
        return Reply(200, self._render_comment(comment))

    def _create_installation_token(self, call: Call) -> Reply:
        expires = time.time() + self.token_lifetime.total_seconds()
        alphabet = string.ascii_letters + string.digits
        if self.stateless_tokens:
            app_id = self._app.app_id if self._app else "1"
            token = f"ghs_{app_id}_" + "".join(secrets.choice(alphabet + "-_.") for _ in range(200))
        else:
            token = "ghs_" + "".join(secrets.choice(alphabet) for _ in range(36))
        self._tokens[token] = expires
        self.tokens_minted += 1
        body = call.body or {}
        permissions = body.get("permissions") or {"checks": "write", "statuses": "write", "issues": "write",
                                                  "pull_requests": "read", "contents": "read", "metadata": "read"}
        selection = "selected" if body.get("repositories") or body.get("repository_ids") else "all"
        return Reply(201, {"token": token, "expires_at": iso(expires), "permissions": permissions,
                           "repository_selection": selection})

    def _get_pull(self, call: Call) -> Reply:
        pull = self._pulls.get((_key(self._repo_of(call)), call.params["pull_number"]))
        return Reply(200, self._render_pull(pull)) if pull is not None else Reply(404, not_found())

    def _get_permission(self, call: Call) -> Reply:
        login = call.params["username"]
        role = self._roles.get((_key(self._repo_of(call)), login.casefold()), "none")
        body: dict[str, Any] = call.operation.example("200")
        permission = ROLE_PERMISSION[role]
        flags = {"pull": role != "none", "triage": role in ("triage", "write", "maintain", "admin"),
                 "push": permission in ("write", "admin"), "maintain": role in ("maintain", "admin"),
                 "admin": role == "admin"}
        body.update({"permission": permission, "role_name": role,
                     "user": {**self._user(login), "permissions": flags, "role_name": role}})
        return Reply(200, body)

    # -- building GitHub-shaped objects ----------------------------------------------------------------------------

    def _comments_on(self, repo_full_name: str, issue_number: int) -> list[_Comment]:
        return [c for c in self._comments.values() if c.repo == _key(repo_full_name) and c.issue == issue_number]

    def _store_comment(self, repo_full_name: str, issue_number: int, body: str, user: str) -> _Comment:
        now = time.time()
        comment = _Comment(next(self._ids["comment"]), _key(repo_full_name), issue_number, body, user, now, now)
        self._comments[comment.id] = comment
        return comment

    def _render_comment(self, c: _Comment) -> dict[str, Any]:
        return {
            "id": c.id, "node_id": f"IC_fake{c.id}", "url": f"{self.url}/repos/{c.repo}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{c.repo}/issues/{c.issue}#issuecomment-{c.id}", "body": c.body,
            "user": self._user(c.user), "created_at": iso(c.created), "updated_at": iso(c.updated),
            "issue_url": f"{self.url}/repos/{c.repo}/issues/{c.issue}",
            "author_association": "NONE" if c.user.endswith("[bot]") else "OWNER",
        }

    def _user(self, login: str) -> dict[str, Any]:
        api, user_id = f"{self.url}/users/{login}", _stable_id(login)
        return {
            "login": login, "id": user_id, "node_id": f"U_fake{user_id}",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4", "gravatar_id": "",
            "url": api, "html_url": f"https://github.com/{login}", "followers_url": f"{api}/followers",
            "following_url": f"{api}/following{{/other_user}}", "gists_url": f"{api}/gists{{/gist_id}}",
            "starred_url": f"{api}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{api}/subscriptions",
            "organizations_url": f"{api}/orgs", "repos_url": f"{api}/repos", "events_url": f"{api}/events{{/privacy}}",
            "received_events_url": f"{api}/received_events",
            "type": "Bot" if login.endswith("[bot]") else "User", "site_admin": False,
        }

    def _repo(self, template: dict[str, Any], full_name: str, fork: bool) -> dict[str, Any]:
        """The description's example repository, moved to ``full_name`` and to this server."""
        text = json.dumps(template).replace("octocat/Hello-World", full_name).replace("https://api.github.com",
                                                                                     self.url)
        repo: dict[str, Any] = json.loads(text)
        owner, _, name = full_name.partition("/")
        repo.update({"id": _stable_id(full_name), "name": name, "full_name": full_name, "owner": self._user(owner),
                     "fork": fork, "private": False})
        return repo

    def _render_pull(self, pull: _Pull) -> dict[str, Any]:
        operation = next(op for op in self.spec.operations if op.operation_id == "pulls/get")
        body: dict[str, Any] = operation.example("200")
        repo, number = pull.repo, pull.number
        api, web = f"{self.url}/repos/{repo}", f"https://github.com/{repo}"
        head_repo = self._repo(body["head"]["repo"], pull.head_repo, fork=_key(pull.head_repo) != _key(repo))
        if pull.head_clone_url is not None:
            head_repo["clone_url"] = pull.head_clone_url
        base_repo = self._repo(body["base"]["repo"], repo, fork=False)
        label_template = body["labels"][0]
        links = {"self": f"{api}/pulls/{number}", "html": f"{web}/pull/{number}", "issue": f"{api}/issues/{number}",
                 "comments": f"{api}/issues/{number}/comments", "review_comments": f"{api}/pulls/{number}/comments",
                 "review_comment": f"{api}/pulls/comments{{/number}}", "commits": f"{api}/pulls/{number}/commits",
                 "statuses": f"{api}/statuses/{pull.head_sha}"}
        body.update({
            "url": links["self"], "id": _stable_id(f"{repo}#{number}"), "node_id": f"PR_fake{number}",
            "html_url": links["html"], "diff_url": f"{web}/pull/{number}.diff", "patch_url": f"{web}/pull/{number}.patch",
            "issue_url": links["issue"], "commits_url": links["commits"], "review_comments_url": links["review_comments"],
            "review_comment_url": links["review_comment"], "comments_url": links["comments"],
            "statuses_url": links["statuses"], "number": number, "state": pull.state, "locked": False,
            "title": pull.title, "user": self._user(pull.user), "body": None, "active_lock_reason": None,
            "labels": [{**label_template, "id": _stable_id(name), "node_id": f"LA_fake{_stable_id(name)}",
                        "url": f"{api}/labels/{name}", "name": name, "default": False} for name in pull.labels],
            "milestone": None, "closed_at": None, "merged_at": None, "merge_commit_sha": None, "assignee": None,
            "assignees": [], "requested_reviewers": [], "requested_teams": [], "merged": False, "merged_by": None,
            "mergeable": None, "rebaseable": None, "mergeable_state": "unknown", "auto_merge": None,
            "author_association": pull.author_association,
            "head": {"label": f"{pull.head_repo.partition('/')[0]}:{pull.head_ref}", "ref": pull.head_ref,
                     "sha": pull.head_sha, "user": head_repo["owner"], "repo": head_repo},
            "base": {"label": f"{repo.partition('/')[0]}:{pull.base_ref}", "ref": pull.base_ref,
                     "sha": pull.base_sha, "user": base_repo["owner"], "repo": base_repo},
            "_links": {rel: {"href": href} for rel, href in links.items()},
        })
        return body


def _apply_check_run_fields(run: dict[str, Any], body: dict[str, Any], now: str) -> None:
    """Status, conclusion and output as GitHub applies them on create and update."""
    if "status" in body:
        run["status"] = body["status"]
    if "conclusion" in body:
        # "Providing conclusion will automatically set the status parameter to completed."
        run["conclusion"], run["status"] = body["conclusion"], "completed"
        run["completed_at"] = body.get("completed_at", run.get("completed_at") or now)
    elif "completed_at" in body:
        run["completed_at"] = body["completed_at"]
    output = body.get("output")
    if output:
        for name in ("title", "summary", "text"):
            if name in output:
                run["output"][name] = output[name]
        run["output"]["annotations_count"] += len(output.get("annotations", []))


def _documented_rules(operation_id: str, body: Any) -> list[str]:
    """Rules the description states in prose rather than in the schema (checks/create and checks/update)."""
    if operation_id not in ("checks/create", "checks/update") or not isinstance(body, dict):
        return []
    rules = []
    if body.get("conclusion") == "stale":
        rules.append("conclusion 'stale': only GitHub can set this")
    if operation_id == "checks/create" and "conclusion" not in body and (
            body.get("status") == "completed" or "completed_at" in body):
        rules.append("conclusion is required with completed_at or a status of completed")
    return rules


def _error_entry(operation: Operation, error: ValidationError) -> dict[str, Any]:
    entry: dict[str, Any] = {"resource": operation.operation_id.split("/")[0], "code": "invalid",
                             "message": _describe(error)}
    if error.absolute_path:
        entry["field"] = "/".join(str(part) for part in error.absolute_path)
    return entry


def _parse_json(raw: bytes) -> tuple[Any, bool]:
    if not raw.strip():
        return None, False
    try:
        return json.loads(raw.decode("utf-8")), True
    except (UnicodeDecodeError, ValueError):
        return None, False


class _Handler(BaseHTTPRequestHandler):
    """HTTP plumbing only; every decision is ``FakeGitHub.handle``'s. HTTP/1.0: one request per connection,
    so ``stop()`` never waits on an idle keep-alive socket."""

    server_version = "GitHub.com"
    sys_version = ""

    def _serve(self) -> None:
        fake: FakeGitHub = self.server.fake  # type: ignore[attr-defined]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = fake.handle(self.command, self.path, headers, raw)
        payload = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.body is not None:
            self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the recording is the log


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A started FakeGitHub on loopback; stopped afterwards. Skips when the REST description is not in the corpus."""
    if not SPEC_PATH.is_file():
        pytest.skip(f"GitHub's REST description is missing ({SPEC_PATH}); the fake GitHub server cannot validate")
    fake = FakeGitHub(load_description(SPEC_PATH)).start()
    try:
        yield fake
    finally:
        fake.stop()
