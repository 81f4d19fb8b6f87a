"""A small GitHub REST client: token or App auth, retries with backoff, nothing else.

Only the calls roofwatch makes are here (statuses, check runs, issue comments, pull requests,
installation tokens). Transient failures — 5xx, 429, secondary rate limits (403 with
``retry-after`` or the documented message), connection errors — are retried with exponential
backoff and jitter, honouring ``retry-after`` and ``x-ratelimit-reset`` (tenacity). What still
fails raises ``GitHubError``; the caller (the report outbox) keeps the report and tries later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import jwt
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from roofwatch.service.core.config import Settings
from roofwatch.service.core.errors import GitHubError, RetryableGitHubError

API_VERSION = "2022-11-28"
USER_AGENT = "roofwatch"
# Installation tokens live an hour; renew this long before GitHub would refuse one.
TOKEN_MARGIN_S = 300


@dataclass
class _Token:
    value: str
    expires_at: float  # epoch seconds


class AppAuth:
    """GitHub App: a short-lived RS256 JWT buys an installation token, cached until near expiry."""

    _cache: dict[tuple[str, str, int], _Token] = {}
    _lock = threading.Lock()

    def __init__(self, app_id: str, private_key: str) -> None:
        self.app_id = app_id
        # Environment variables often carry the PEM with literal "\n".
        self.private_key = private_key.replace("\\n", "\n")

    def app_jwt(self) -> str:
        now = int(time.time())
        # iat 60 s in the past tolerates clock drift; GitHub refuses an exp over 10 minutes ahead.
        return jwt.encode({"iat": now - 60, "exp": now + 540, "iss": self.app_id}, self.private_key, algorithm="RS256")

    def installation_token(self, client: GitHubClient, installation_id: int) -> str:
        key = (client.api_url, self.app_id, installation_id)
        with self._lock:
            cached = self._cache.get(key)
            if cached and cached.expires_at - TOKEN_MARGIN_S > time.time():
                return cached.value
            response = client.send("POST", f"/app/installations/{installation_id}/access_tokens",
                                   authorization=f"Bearer {self.app_jwt()}")
            body = response.json()
            expires = datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00")).timestamp()
            self._cache[key] = _Token(body["token"], expires)
            return body["token"]

    def forget(self, client: GitHubClient, installation_id: int) -> None:
        with self._lock:
            self._cache.pop((client.api_url, self.app_id, installation_id), None)


def _wait(backoff: float, max_wait: float) -> Callable[[RetryCallState], float]:
    exponential = wait_exponential(multiplier=backoff, max=max_wait) + wait_random(0, backoff)

    def wait(state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, RetryableGitHubError) and error.retry_after is not None:
            return min(max(error.retry_after, 0.0), max_wait)
        return exponential(state)

    return wait


def _retry_after(response: httpx.Response) -> float | None:
    if "retry-after" in response.headers:
        try:
            return float(response.headers["retry-after"])
        except ValueError:
            return None
    if response.headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in response.headers:
        return float(response.headers["x-ratelimit-reset"]) - time.time()
    return None


def _is_transient(response: httpx.Response) -> bool:
    if response.status_code >= 500 or response.status_code == 429:
        return True
    if response.status_code == 403:
        # Primary limit exhausted, or a secondary limit (GitHub documents both as 403).
        return ("retry-after" in response.headers or response.headers.get("x-ratelimit-remaining") == "0"
                or "rate limit" in response.text.lower())
    return False


class GitHubClient:
    def __init__(self, api_url: str, token: str | None = None, app: AppAuth | None = None,
                 installation_id: int | None = None, attempts: int = 5, backoff: float = 1.0,
                 max_wait: float = 60.0, timeout: float = 15.0) -> None:
        if app is not None and installation_id is None:
            raise GitHubError("a GitHub App needs the repository's installation id (from its webhooks)")
        self.api_url = api_url.rstrip("/")
        self.token, self.app, self.installation_id = token, app, installation_id
        self.attempts, self.backoff, self.max_wait = attempts, backoff, max_wait
        self.http = httpx.Client(base_url=self.api_url, timeout=timeout, headers={
            "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION, "User-Agent": USER_AGENT})

    @classmethod
    def from_settings(cls, settings: Settings, installation_id: int | None = None, **options: Any) -> GitHubClient:
        if settings.github_mode == "app":
            app = AppAuth(settings.github_app_id or "", settings.github_app_private_key or "")
            return cls(settings.github_api_url, app=app, installation_id=installation_id, **options)
        if settings.github_mode == "token":
            return cls(settings.github_api_url, token=settings.github_token, **options)
        raise GitHubError("no GitHub credentials: set ROOFWATCH_GITHUB_TOKEN, or ROOFWATCH_GITHUB_APP_ID and "
                          "ROOFWATCH_GITHUB_APP_PRIVATE_KEY")

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    def send(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
             authorization: str | None = None) -> httpx.Response:
        """One call with retries; raises ``GitHubError`` when it does not succeed."""
        retrying = Retrying(stop=stop_after_attempt(self.attempts), wait=_wait(self.backoff, self.max_wait),
                            retry=retry_if_exception_type((RetryableGitHubError, httpx.TransportError)),
                            reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    return self._send_once(method, path, json, params, authorization)
        except httpx.TransportError as exc:
            raise GitHubError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _send_once(self, method: str, path: str, json: Any, params: dict[str, Any] | None,
                   authorization: str | None) -> httpx.Response:
        headers = {"Authorization": authorization or self._authorization()}
        response = self.http.request(method, path, json=json, params=params, headers=headers)
        if response.is_success:
            return response
        message = f"{method} {path}: HTTP {response.status_code}: {_message(response)}"
        if _is_transient(response):
            raise RetryableGitHubError(message, response.status_code, _retry_after(response))
        if response.status_code == 401 and self.app is not None and self.installation_id is not None:
            self.app.forget(self, self.installation_id)  # a revoked token: mint a new one next time
        raise GitHubError(message, response.status_code)

    def _authorization(self) -> str:
        if self.app is not None:
            return f"Bearer {self.app.installation_token(self, self.installation_id)}"  # type: ignore[arg-type]
        return f"Bearer {self.token}"

    # -- the calls roofwatch makes -------------------------------------------------------------

    def create_status(self, repo: str, sha: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.send("POST", f"/repos/{repo}/statuses/{sha}", json=body).json()

    def create_check_run(self, repo: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.send("POST", f"/repos/{repo}/check-runs", json=body).json()

    def update_check_run(self, repo: str, check_run_id: int, body: dict[str, Any]) -> dict[str, Any]:
        return self.send("PATCH", f"/repos/{repo}/check-runs/{check_run_id}", json=body).json()

    def comments(self, repo: str, issue_number: int) -> Iterator[dict[str, Any]]:
        """Every comment on an issue or pull request, following ``Link: rel="next"`` pages."""
        path: str | None = f"/repos/{repo}/issues/{issue_number}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        while path:
            response = self.send("GET", path, params=params)
            yield from response.json()
            following = response.links.get("next", {}).get("url")
            path, params = (following.removeprefix(self.api_url), None) if following else (None, None)

    def create_comment(self, repo: str, issue_number: int, body: str) -> dict[str, Any]:
        return self.send("POST", f"/repos/{repo}/issues/{issue_number}/comments", json={"body": body}).json()

    def update_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        return self.send("PATCH", f"/repos/{repo}/issues/comments/{comment_id}", json={"body": body}).json()

    def pull_request(self, repo: str, number: int) -> dict[str, Any]:
        return self.send("GET", f"/repos/{repo}/pulls/{number}").json()

    def collaborator_permission(self, repo: str, username: str) -> dict[str, Any]:
        """``permission`` (admin, write, read, none; maintain counts as write) and ``role_name`` of a user."""
        return self.send("GET", f"/repos/{repo}/collaborators/{quote(username, safe='')}/permission").json()


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("message", ""))[:300]
    except ValueError:
        return response.text[:300]
