"""``action trigger``: an ``issue_comment`` event → whether (and which variants) to retest, after
the API confirms the commenter's permission and that the PR's head is what they looked at.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...github.events import EventError, parse_comment_event, parse_time
from ...github.triggers import TriggerKind, parse_comment
from ..errors import EXIT_OK, UsageError
from . import workflow as actions
from .github import ApiContext, read_event, with_github
from .io import write_runner_files

PERMISSION_RANK: dict[str, int] = {"none": 0, "read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("trigger", help="decide from an issue_comment event whether to retest")
    p.add_argument("--event", type=Path, help="event payload (default: $GITHUB_EVENT_PATH)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--min-permission", default="write", choices=list(PERMISSION_RANK)[1:],
                   help="least repository permission a commenter needs (default write)")
    p.set_defaults(func=run_trigger)


@dataclass(frozen=True)
class TriggerDecision:
    run: bool
    reason: str
    pr: int | None = None
    head_sha: str = ""
    variants: tuple[str, ...] = ()
    base_sha: str = ""  # the PR's base: the retest measures the head next to it, as the PR check does

    def outputs(self) -> dict[str, str]:
        return {
            "run": "true" if self.run else "false",
            "reason": self.reason,
            "pr": str(self.pr) if self.pr is not None else "",
            "head-sha": self.head_sha,
            "base-sha": self.base_sha,
            "variants": " ".join(self.variants),
        }


def decide_trigger(ctx: ApiContext, event_path: Path, *, min_permission: str) -> TriggerDecision:
    """Retest only for a phrase on a PR by someone whose permission the API confirms."""
    try:
        event = parse_comment_event(read_event(event_path))
    except EventError as e:
        raise UsageError(f"event {event_path}: {e}") from None
    if event.action != "created" or not event.is_pull_request:
        return TriggerDecision(False, f"ignored: {event.action} comment, on a PR: {event.is_pull_request}")
    trigger = parse_comment(event.body)
    if trigger is None or trigger.kind != TriggerKind.RETEST:
        return TriggerDecision(False, "ignored: the comment does not ask for a retest")
    if event.repo != ctx.repo:
        raise UsageError(f"event is for {event.repo}, but the API context is {ctx.repo}")

    async def ask(client: Any) -> tuple[str, str | None, str | None, str]:
        perm = await client.request("GET", f"/repos/{ctx.repo}/collaborators/{event.author}/permission")
        permission = _permission_of(perm.data, event.author)
        if PERMISSION_RANK.get(permission, 0) < PERMISSION_RANK[min_permission]:
            return permission, None, None, ""  # not allowed: nothing about the PR is looked up
        pull = await client.get_pull(ctx.repo, event.issue_number)
        head = _head_sha_of(pull.data, event.issue_number)
        suites = await client.request("GET", f"/repos/{ctx.repo}/commits/{head}/check-suites?per_page=100")
        return permission, head, _first_suite_at(suites.data), _base_sha_of(pull.data)

    permission, head_sha, head_seen, base_sha = with_github(ctx, ask)
    if head_sha is None:
        return TriggerDecision(False, f"refused: @{event.author} has {permission!r} permission, "
                                      f"{min_permission!r} needed", pr=event.issue_number)
    problem = _head_after_comment(event.created_at, head_sha, head_seen)
    if problem:
        return TriggerDecision(False, f"refused: {problem}", pr=event.issue_number)
    variants = tuple(dict.fromkeys(s.variant for s in trigger.selectors))
    what = ", ".join(variants) if variants else "every variant"
    return TriggerDecision(True, f"retest of {what} requested by @{event.author} ({permission})",
                           pr=event.issue_number, head_sha=head_sha, variants=variants, base_sha=base_sha)


def _first_suite_at(data: Any) -> str | None:
    """When GitHub first made a check suite for the head (on its push): a server-side time."""
    runs = data.get("check_suites") if isinstance(data, dict) else None
    times = [r["created_at"] for r in runs or []
             if isinstance(r, dict) and isinstance(r.get("created_at"), str)]
    return min(times) if times else None


def _head_after_comment(comment_at: str, head_sha: str, head_seen: str | None) -> str | None:
    """Why the PR's head now may not be what the commenter looked at (same rule as the Buildbot hook).

    The job runs later than the comment; a push in between must not be built on that comment.
    The head counts as reviewed only if GitHub made a check suite for it (it does on every push
    that runs workflows) before the comment was written; commit dates are the author's to choose.
    """
    written, seen = parse_time(comment_at), parse_time(head_seen or "")
    if written is not None and seen is not None and seen < written:
        return None
    when = f"first seen {head_seen}" if head_seen else "no check suite shows when it was pushed"
    return (f"head {head_sha[:12]} may be newer than the comment ({when}, comment {comment_at or '?'}); "
            "comment again to test it")


def _permission_of(data: Any, login: str) -> str:
    permission = data.get("permission") if isinstance(data, dict) else None
    if not isinstance(permission, str):
        raise UsageError(f"permission of @{login}: response has no 'permission' string")
    return permission


def _head_sha_of(data: Any, number: int) -> str:
    head = data.get("head") if isinstance(data, dict) else None
    sha = head.get("sha") if isinstance(head, dict) else None
    if not isinstance(sha, str):
        raise UsageError(f"PR #{number}: response has no head.sha")
    return sha


def _base_sha_of(data: Any) -> str:
    base = data.get("base") if isinstance(data, dict) else None
    sha = base.get("sha") if isinstance(base, dict) else None
    return sha if isinstance(sha, str) else ""


def run_trigger(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    event_path = args.event or actions.env_path(env, "GITHUB_EVENT_PATH")
    if event_path is None:
        raise UsageError("no --event and no $GITHUB_EVENT_PATH")
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=None)
    decision = decide_trigger(ctx, event_path, min_permission=args.min_permission)
    actions.say(f"bsdkm-ci: {decision.reason}", err=True)
    write_runner_files(env, decision.outputs(), "")
    return EXIT_OK
