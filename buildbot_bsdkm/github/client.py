"""A small GitHub REST client for the master: retries with backoff, honours rate limits.

The token goes into the Authorization header only; log lines and exceptions carry the
method, path, status and GitHub's own message, never headers. The token is a personal token or a
GitHub App's installation tokens (``app_auth``), asked for before every attempt.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import treq
from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.python import log
from twisted.web.client import HTTPConnectionPool

from .app_auth import StaticToken
from .auth_health import AuthHealth
from .backoff import Advice, RetryPolicy, advise
from .request_errors import CredentialsError, GitHubError, Superseded
from .spacing import MUTATIVE_METHODS, WriteSpacing
from .tokens import ApiResponse, TokenSource

__all__ = ["ApiResponse", "GitHubClient", "GitHubError", "Superseded", "redact"]

USER_AGENT = "bsdkm-ci"
API_VERSION = "2022-11-28"


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def _github_message(body: bytes) -> str:
    try:
        doc = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body[:120].decode("utf-8", errors="replace")
    if not isinstance(doc, dict):
        return ""
    # 422s explain themselves in errors[].message ("body is too long (maximum is 65536 characters)").
    details = [
        str(e.get("message")) for e in doc.get("errors") or [] if isinstance(e, dict) and e.get("message")
    ]
    return "; ".join([str(doc.get("message", "")), *details])[:300]


@contextlib.asynccontextmanager
async def _unspaced() -> AsyncIterator[None]:
    yield


class GitHubClient:
    def __init__(
        self,
        api_url: str,
        token: str | TokenSource,
        *,
        reactor: IReactorTime | None = None,
        policy: RetryPolicy | None = None,
        timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
        spacing: WriteSpacing | None = None,
    ) -> None:
        """``spacing``: the installation's write slot (``spacing.WriteSpacing``); None: writes unspaced."""
        if isinstance(token, str):
            token = StaticToken(token)  # ValueError when empty
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor  # type: ignore[assignment]
        self.api_url = api_url.rstrip("/")
        self._auth: TokenSource = token
        self._reactor = reactor
        self.policy = policy or RetryPolicy()
        self.timeout = timeout
        self._clock = clock
        self.spacing = spacing
        self.sleeps: list[float] = []  # waits taken, for measurements and tests
        self._pool: HTTPConnectionPool | None = None  # kept-alive connections, for repeatable calls only

    def _pool_for(self, idempotent: bool) -> HTTPConnectionPool:
        """A request that must not run twice gets a connection of its own: a kept-alive one the
        server has meanwhile closed fails it after sending, and Twisted re-sends only repeatable
        methods on a new connection. Repeatable calls share this client's pool."""
        if not idempotent:
            return HTTPConnectionPool(self._reactor, persistent=False)
        if self._pool is None:
            self._pool = HTTPConnectionPool(self._reactor, persistent=True)
        return self._pool

    async def _forget_connections(self) -> None:
        """After a connection-level failure no kept-alive connection is trusted again."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.closeCachedConnections()

    @property
    def reactor(self) -> IReactorTime:
        return self._reactor

    @property
    def auth_health(self) -> AuthHealth:
        """Whether GitHub takes this client's credentials (shared with every client of them)."""
        return self._auth.health

    def _headers(self, authorization: str) -> dict[str, list[str]]:
        return {
            "Authorization": [authorization],
            "Accept": ["application/vnd.github+json"],
            "X-GitHub-Api-Version": [API_VERSION],
            "User-Agent": [USER_AGENT],
        }

    def _log(self, text: str) -> None:
        log.msg("bsdkm github: " + redact(text, self._auth.secrets()))

    async def own_login(self) -> str | None:
        """The login our comments are made under: the App's bot, or the token's user."""
        try:
            return await self._auth.login(self)
        except GitHubError as e:
            self._log(f"cannot tell our own login: {e}")
            return None

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        idempotent: bool = True,
        still_wanted: Callable[[], bool] | None = None,
        authorization: str | None = None,
        quiet: bool = False,
    ) -> ApiResponse:
        """One API call with retries.

        ``authorization``: this header instead of the token's (the App's JWT, for its own calls).
        ``quiet``: no log line when it fails (the caller says it once, as ``AuthHealth`` does).

        Our own credentials failing (no token to be had, a 401 GitHub still gives after a new
        token) raise ``CredentialsError``, which keeps the report for a re-send.

        ``idempotent=False`` (a POST that creates something): an attempt that got no answer or a
        5xx may have been carried out, so it is not repeated here; the caller checks first.
        ``still_wanted``: asked before each retry; False stops (a newer report replaced this one).
        """
        url = self.api_url + path
        attempt = 0
        renewed = False
        while True:
            attempt += 1
            status: int | None = None
            headers: dict[str, str] = {}
            raw = b""
            error = ""
            sent = authorization or await self._credentials()
            # Our writes wait for the installation's write slot; the App's own token calls do not.
            spaced = self.spacing is not None and authorization is None and method in MUTATIVE_METHODS
            try:
                async with self.spacing.turn() if spaced else _unspaced():  # type: ignore[union-attr]
                    response = await treq.request(
                        method,
                        url,
                        json=body,
                        headers=self._headers(sent),
                        timeout=self.timeout,
                        reactor=self._reactor,
                        pool=self._pool_for(idempotent),
                    )
                    raw = await response.content()
                status = response.code
                headers = {k.decode(): v[-1].decode() for k, v in response.headers.getAllRawHeaders()}
            except defer.CancelledError:
                error = f"timed out after {self.timeout:.0f} s"
            except Exception as e:  # connection refused/reset, DNS, TLS: all "no response"
                error = type(e).__name__
            if status is None:
                await self._forget_connections()
            if status == 401 and authorization is None and self._auth.refreshable and not renewed:
                # An installation token GitHub no longer takes (revoked, or its hour ran out early
                # by our clock): a new one, once, before this counts as a failure.
                self._auth.refused(sent)
                renewed = True
                attempt -= 1
                self._log(f"{method} {path}: 401 with our token; getting it again, once")
                continue
            if status == 401 and authorization is None:
                refused = CredentialsError(redact(f"{method} {path}: GitHub refused our credentials (401): "
                                                  f"{_github_message(raw)}", self._auth.secrets()), 401)
                self._auth.health.failed(str(refused))
                raise refused
            advice = advise(self.policy, attempt, status, headers, self._clock(), error)
            if status is not None and 200 <= status < 300:
                if authorization is None:
                    self._auth.health.worked()
                return ApiResponse(status, json.loads(raw) if raw else None, headers)
            maybe_done = status is None or status >= 500
            if advice.retry and not idempotent and maybe_done:
                advice = Advice(False, advice.delay, advice.reason + "; it may have been carried out", True)
            if advice.retry and still_wanted is not None and not still_wanted():
                raise Superseded(f"{method} {path}: {advice.reason}; a newer report replaced this one")
            self._raise_or_wait_reason(method, path, attempt, status, raw, advice, quiet)
            self.sleeps.append(advice.delay)
            await task.deferLater(self._reactor, advice.delay, lambda: None)

    async def _credentials(self) -> str:
        """The Authorization header of our credentials; a failure to get it is said once, and kept."""
        try:
            return await self._auth.authorization(self)
        except CredentialsError as e:
            failure = e
        except Exception as e:  # noqa: BLE001 - whatever broke (a missing secret, a bad key): keep the report
            failure = CredentialsError(f"GitHub credentials unavailable: {type(e).__name__}: {e}")
        failure = CredentialsError(redact(str(failure), self._auth.secrets()), failure.status)
        self._auth.health.failed(str(failure))
        raise failure

    def _raise_or_wait_reason(
        self, method: str, path: str, attempt: int, status: int | None, raw: bytes, advice: Advice,
        quiet: bool = False,
    ) -> None:
        detail = f"{method} {path}: {advice.reason}"
        message = _github_message(raw) if status is not None else ""
        if message:
            detail += f": {message}"
        if not advice.retry:
            if not quiet:
                self._log(f"giving up after {attempt} attempt(s): {detail}")
            raise GitHubError(redact(detail, self._auth.secrets()), status, advice.transient)
        if not quiet:
            self._log(f"attempt {attempt} failed, retrying in {advice.delay:.1f} s: {detail}")

    # --- the calls the reporters make --------------------------------------------------------

    async def create_status(
        self,
        repo: str,
        sha: str,
        state: str,
        context: str,
        description: str,
        target_url: str | None,
        still_wanted: Callable[[], bool] | None = None,
    ) -> ApiResponse:
        body: dict[str, Any] = {"state": state, "context": context, "description": description}
        if target_url:
            body["target_url"] = target_url
        return await self.request("POST", f"/repos/{repo}/statuses/{sha}", body, still_wanted=still_wanted)

    async def list_issue_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        comments: list[dict[str, Any]] = []
        page = 1
        while True:
            path = f"/repos/{repo}/issues/{number}/comments?per_page=100&page={page}"
            response = await self.request("GET", path)
            batch = response.data if isinstance(response.data, list) else []
            comments.extend(batch)
            if len(batch) < 100:
                return comments
            page += 1

    async def create_comment(
        self, repo: str, number: int, body: str, *, idempotent: bool = True
    ) -> ApiResponse:
        return await self.request(
            "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}, idempotent=idempotent
        )

    async def update_comment(self, repo: str, comment_id: int, body: str) -> ApiResponse:
        return await self.request("PATCH", f"/repos/{repo}/issues/comments/{comment_id}", {"body": body})

    async def get_pull(self, repo: str, number: int) -> ApiResponse:
        return await self.request("GET", f"/repos/{repo}/pulls/{number}")
