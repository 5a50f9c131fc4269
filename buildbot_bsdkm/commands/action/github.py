"""The GitHub REST API for ``action comment`` and ``action trigger``: where it is, the token, and
one run of the shared GitHub client (``github/client.py``) on a Twisted reactor.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..exit_codes import UsageError
from . import workflow as actions
from .run_files import read_text

DEFAULT_API_URL = "https://api.github.com"

T = TypeVar("T")


@dataclass(frozen=True)
class ApiContext:
    """Where the REST API is and how to authenticate; the token is never printed."""

    api_url: str
    repo: str
    token: str = field(repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, token_env: str, api_url: str | None,
                 repo: str | None) -> ApiContext:
        token = env.get(token_env, "")
        if not token:
            raise UsageError(f"no token: ${token_env} is empty (pass the action's github-token input)")
        repo = repo or env.get("GITHUB_REPOSITORY", "")
        if repo.count("/") != 1:
            raise UsageError(f"repository {repo!r} is not owner/name (set --repo or $GITHUB_REPOSITORY)")
        return cls((api_url or env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/"), repo, token)


def read_event(path: Path) -> dict[str, Any]:
    text = read_text(path, "event")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"event file {path} is not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"event file {path} is not a JSON object")
    return doc


def pr_number_from_event(env: Mapping[str, str]) -> int | None:
    """The PR of a ``pull_request``/``pull_request_target``/``issue_comment`` event, else None."""
    path = actions.env_path(env, "GITHUB_EVENT_PATH")
    if path is None:
        return None
    event = read_event(path)
    pr = event.get("pull_request")
    if isinstance(pr, dict) and isinstance(pr.get("number"), int):
        return int(pr["number"])
    issue = event.get("issue")
    if isinstance(issue, dict) and isinstance(issue.get("pull_request"), dict):
        number = issue.get("number")
        return number if isinstance(number, int) else None
    return None


def with_github(ctx: ApiContext, work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(client)`` with the shared GitHub client on a Twisted reactor (once per process)."""
    # Imported here, not at the top: importing the reactor installs it, and Twisted with treq
    # costs every other bsdkm-ci command 0.3-0.5 s of start-up (measured); only comment and
    # trigger talk to GitHub.
    from twisted.internet import defer, reactor
    from twisted.python import log
    from twisted.python.failure import Failure

    from ...github.client import GitHubClient, GitHubError

    # The client logs its retries through Twisted; show them (already token-free) on stderr.
    log.startLoggingWithObserver(_github_log_observer, setStdout=False)
    client = GitHubClient(ctx.api_url, ctx.token, reactor=reactor)
    box: dict[str, Any] = {}

    def finish(result: Any) -> None:
        box["result"] = result
        reactor.callLater(0, reactor.stop)  # type: ignore[attr-defined]

    reactor.callWhenRunning(  # type: ignore[attr-defined]
        lambda: defer.ensureDeferred(work(client)).addBoth(finish))
    reactor.run(installSignalHandlers=False)  # type: ignore[attr-defined]
    result = box.get("result")
    if isinstance(result, Failure):
        if result.check(GitHubError):
            raise UsageError(f"GitHub API: {result.value}") from None
        result.raiseException()
    return result  # type: ignore[return-value]


def _github_log_observer(event: dict[str, Any]) -> None:
    text = " ".join(str(m) for m in event.get("message", ()))
    if text.startswith("bsdkm github:"):
        actions.say(text, err=True)
