"""GitHub webhook payloads → the few facts the trigger and trust rules need.

Payloads are untrusted input: every field read is checked, and a missing or mistyped
one raises EventError naming it, never KeyError/TypeError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class EventError(ValueError):
    """A webhook payload that is not what GitHub sends for that event."""


def _field(payload: Any, path: str, kind: type | tuple[type, ...]) -> Any:
    node = payload
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise EventError(f"payload has no '{path}'")
        node = node[part]
    # bool is an int subclass; a PR number must not be True.
    if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
        raise EventError(f"payload field '{path}' is {type(node).__name__}, not {_kind_name(kind)}")
    return node


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def parse_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    """JSON object from a webhook body (application/json or GitHub's form encoding)."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/x-www-form-urlencoded":
        from urllib.parse import parse_qs

        values = parse_qs(body.decode("utf-8", errors="replace")).get("payload")
        if not values:
            raise EventError("form-encoded webhook without a 'payload' field")
        text = values[0]
    elif ctype == "application/json":
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise EventError("webhook body is not UTF-8") from None
    else:
        raise EventError(f"unsupported Content-Type {content_type!r} (expected application/json)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise EventError(f"webhook body is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        # Signed is not the same as sane: nothing GitHub sends nests this deep.
        raise EventError("webhook body is JSON nested too deeply to be a GitHub event") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise EventError(f"webhook body is unusable JSON: {e}") from None
    if not isinstance(doc, dict):
        raise EventError(f"webhook body is a JSON {type(doc).__name__}, not an object")
    return doc


@dataclass(frozen=True)
class PullRequest:
    """The state of a PR that decides whether and what to build."""

    repo: str  # owner/name of the base repository
    number: int
    head_sha: str
    head_repo: str | None  # None when the fork was deleted
    base_ref: str
    author: str
    author_association: str
    draft: bool
    html_url: str
    title: str = ""
    updated_at: str = ""  # GitHub's clock: a push to the head moves it
    base_sha: str = ""  # base.sha: the base branch's commit the perf gate builds next to the head

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.repo

    @property
    def head_owner(self) -> str | None:
        """Who owns the repository the head commits come from (None: the fork was deleted)."""
        return self.head_repo.split("/")[0] if self.head_repo else None


@dataclass(frozen=True)
class PullRequestEvent:
    action: str
    sender: str
    pull: PullRequest
    before: str = ""  # synchronize: the head this push replaced (``head_order``)


@dataclass(frozen=True)
class CommentEvent:
    action: str
    repo: str
    issue_number: int
    is_pull_request: bool
    comment_id: int
    body: str
    author: str
    author_association: str
    html_url: str
    created_at: str = ""  # when the comment was written (GitHub's clock)


def parse_time(text: str) -> datetime | None:
    """GitHub's ISO 8601 timestamp (``2019-05-15T15:20:33Z``), or None when absent or malformed."""
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def pull_request_from(pr: Any, repo: str) -> PullRequest:
    """A PullRequest from the ``pull_request`` object of a webhook or of GET /pulls/{n}."""
    head_repo = pr.get("head", {}).get("repo") if isinstance(pr, dict) else None
    return PullRequest(
        repo=repo,
        number=_field(pr, "number", int),
        head_sha=_field(pr, "head.sha", str),
        head_repo=head_repo.get("full_name") if isinstance(head_repo, dict) else None,
        base_ref=_field(pr, "base.ref", str),
        author=_field(pr, "user.login", str),
        author_association=_field(pr, "author_association", str),
        draft=bool(pr.get("draft", False)),
        html_url=_field(pr, "html_url", str),
        title=str(pr.get("title") or ""),
        updated_at=str(pr.get("updated_at") or ""),
        base_sha=_base_sha(pr),
    )


def parse_pull_request_event(payload: dict[str, Any]) -> PullRequestEvent:
    repo = _field(payload, "repository.full_name", str)
    return PullRequestEvent(
        action=_field(payload, "action", str),
        sender=_field(payload, "sender.login", str),
        pull=pull_request_from(_field(payload, "pull_request", dict), repo),
        before=_sha_or_empty(payload.get("before")),
    )


def parse_comment_event(payload: dict[str, Any]) -> CommentEvent:
    issue = _field(payload, "issue", dict)
    comment = _field(payload, "comment", dict)
    body = comment.get("body")
    return CommentEvent(
        action=_field(payload, "action", str),
        repo=_field(payload, "repository.full_name", str),
        issue_number=_field(issue, "number", int),
        # Only PR conversations carry issue.pull_request; a plain issue has none (or null).
        is_pull_request=isinstance(issue.get("pull_request"), dict),
        comment_id=_field(comment, "id", int),
        body=body if isinstance(body, str) else "",
        author=_field(comment, "user.login", str),
        author_association=_field(comment, "author_association", str),
        html_url=str(comment.get("html_url") or ""),
        created_at=str(comment.get("created_at") or ""),
    )


def _sha_or_empty(value: Any) -> str:
    """A commit sha as GitHub writes it, or "" (a missing or odd value orders nothing)."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}", value):
        return ""
    return value


def _base_sha(pr: Any) -> str:
    """``base.sha`` when it is a commit sha; anything else is left out (the gate then uses history)."""
    base = pr.get("base") if isinstance(pr, dict) else None
    return _sha_or_empty(base.get("sha") if isinstance(base, dict) else None).lower()
