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
from ..exit_codes import EXIT_OK, UsageError
from . import workflow as actions
from .github import ApiContext, read_event, with_github
from .run_files import write_runner_files

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
    """Retest only for a phrase on a PR by someone whose permission the API confirms, and only the
    head they looked at: no push after the comment, and on a fork's PR the commit they name."""
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

    async def ask(client: Any) -> tuple[str, Any, list[Any]]:
        perm = await client.request("GET", f"/repos/{ctx.repo}/collaborators/{event.author}/permission")
        permission = _permission_of(perm.data, event.author)
        if PERMISSION_RANK.get(permission, 0) < PERMISSION_RANK[min_permission]:
            return permission, None, []  # not allowed: nothing about the PR is looked up
        pull = await client.get_pull(ctx.repo, event.issue_number)
        return permission, pull.data, await _timeline(client, ctx.repo, event.issue_number)

    permission, pull, timeline = with_github(ctx, ask)
    if pull is None:
        return TriggerDecision(False, f"refused: @{event.author} has {permission!r} permission, "
                                      f"{min_permission!r} needed", pr=event.issue_number)
    head_sha = _head_sha_of(pull, event.issue_number)
    problem = (_named_head_problem(trigger.sha, head_sha, fork=_is_fork(pull, ctx.repo))
               or pushed_after_comment(timeline, event.comment_id, event.created_at))
    if problem:
        return TriggerDecision(False, f"refused: {problem}", pr=event.issue_number)
    variants = tuple(dict.fromkeys(s.variant for s in trigger.selectors))
    what = ", ".join(variants) if variants else "every variant"
    return TriggerDecision(True, f"retest of {what} at {head_sha[:12]} requested by @{event.author} "
                                 f"({permission})", pr=event.issue_number, head_sha=head_sha,
                           variants=variants, base_sha=_base_sha_of(pull))


TIMELINE_PAGES = 30  # 3000 events; a PR with more is refused, not half-read
PUSH_EVENTS = ("committed", "head_ref_force_pushed", "head_ref_restored")


async def _timeline(client: Any, repo: str, number: int) -> list[Any]:
    """The PR's timeline, oldest first, every page."""
    events: list[Any] = []
    for page in range(1, TIMELINE_PAGES + 1):
        got = await client.request("GET", f"/repos/{repo}/issues/{number}/timeline?per_page=100&page={page}")
        batch = got.data if isinstance(got.data, list) else []
        events += batch
        if len(batch) < 100:
            return events
    raise UsageError(f"PR #{number}: its timeline has more than {TIMELINE_PAGES * 100} events; "
                     "cannot tell what was pushed after the comment")


def pushed_after_comment(timeline: list[Any], comment_id: int, comment_at: str) -> str | None:
    """Why the PR's head may not be what the comment was about (None: no push after it).

    GitHub lists a PR's timeline oldest first, the comment among its events; a push after it
    shows as ``committed`` (a new commit) or ``head_ref_force_pushed`` (the branch moved, to an
    older commit too). A force-push carries GitHub's own time as well; a commit's dates are its
    author's to choose, so only its place in the timeline counts.
    """
    at = next((i for i, e in enumerate(timeline) if isinstance(e, dict) and e.get("event") == "commented"
               and e.get("id") == comment_id), None)
    if at is None:
        return f"the PR's timeline does not show comment {comment_id}; comment again"
    written = parse_time(comment_at)
    for i, e in enumerate(timeline):
        if not isinstance(e, dict) or e.get("event") not in PUSH_EVENTS:
            continue
        when = parse_time(str(e.get("created_at") or ""))
        if i > at or (when is not None and written is not None and when > written):
            sha = str(e.get("sha") or e.get("commit_id") or "")[:12]
            return (f"the PR's timeline shows a push after the comment ({e['event']}"
                    f"{' ' + sha if sha else ''}); comment again to test the head as it is now")
    return None


def _is_fork(pull: Any, repo: str) -> bool:
    head = pull.get("head") if isinstance(pull, dict) else None
    head_repo = head.get("repo") if isinstance(head, dict) else None
    name = head_repo.get("full_name") if isinstance(head_repo, dict) else None
    return name != repo  # a deleted fork has no repo: a fork still


def _named_head_problem(named: str | None, head: str, *, fork: bool) -> str | None:
    """Why the commit the comment names (if any) does not bind the retest to the PR's head.

    On a fork's PR the comment must name the head's whole sha: its author can push at any time,
    and can make a commit whose sha starts like the reviewed one's.
    """
    if named is None:
        if not fork:
            return None
        return ("on a fork's PR, name the commit you reviewed, all 40 digits: "
                f"`retest this please <sha>` (the PR's head is now {head})")
    if fork and len(named) != 40:
        return f"on a fork's PR, name the whole 40-digit sha, not {named!r}: a prefix can be matched"
    if not head.startswith(named):
        return f"the PR's head is {head[:12]}, not the commit the comment names ({named[:12]})"
    return None


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
