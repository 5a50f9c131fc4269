"""Who may make CI build a PR, and what each webhook event should do.

Pure functions over the parsed events (``events.py``) and small state objects with the
clock passed in, so the GitHub Action and tests use exactly what the Buildbot hook uses.

The rule: code from an untrusted author is loaded into no kernel until a trusted user
comments ``ok to test`` on that PR, and the approval covers only the head commit it was
given for: a later push needs a new approval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from .events import CommentEvent, PullRequest, PullRequestEvent
from .triggers import Trigger, TriggerKind

TRUSTED_ASSOCIATIONS: frozenset[str] = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
BUILDING_PR_ACTIONS: frozenset[str] = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})


@dataclass(frozen=True)
class TrustPolicy:
    associations: frozenset[str] = TRUSTED_ASSOCIATIONS
    allow_list: frozenset[str] = frozenset()  # GitHub logins, compared case-insensitively

    @classmethod
    def build(cls, allow_list: Iterable[str] = (), associations: Iterable[str] | None = None) -> TrustPolicy:
        return cls(
            associations=frozenset(a.upper() for a in associations) if associations else TRUSTED_ASSOCIATIONS,
            allow_list=frozenset(login.lower() for login in allow_list),
        )

    def trusts(self, login: str, association: str) -> bool:
        return association.upper() in self.associations or login.lower() in self.allow_list

    def describe(self) -> str:
        roles = ", ".join(sorted(a.lower().replace("_", " ") + "s" for a in self.associations))
        return f"the repository's {roles}" + (" and allow-listed users" if self.allow_list else "")


class Action(StrEnum):
    BUILD = "build"  # start the selected builders for head_sha
    IGNORE = "ignore"  # nothing to do, nothing to say
    REPLY = "reply"  # nothing runs; tell the commenter why
    AWAIT_APPROVAL = "await-approval"  # untrusted PR: ask a maintainer for `ok to test`


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    repo: str = ""
    number: int = 0
    head_sha: str = ""
    trigger: Trigger | None = None
    approve_head: bool = False  # record an approval of head_sha before building
    reply_to: str | None = None  # login the reply addresses

    @property
    def builds(self) -> bool:
        return self.action == Action.BUILD


@dataclass
class ApprovalBook:
    """``ok to test`` approvals: (repo, PR) → the head commit a trusted user approved."""

    approved: dict[tuple[str, int], str] = field(default_factory=dict)

    def approve(self, repo: str, number: int, head_sha: str) -> None:
        self.approved[(repo, number)] = head_sha

    def is_approved(self, repo: str, number: int, head_sha: str) -> bool:
        return self.approved.get((repo, number)) == head_sha


def decide_pull_request(event: PullRequestEvent, policy: TrustPolicy, approvals: ApprovalBook) -> Decision:
    pull = event.pull
    base = {"repo": pull.repo, "number": pull.number, "head_sha": pull.head_sha}
    if event.action not in BUILDING_PR_ACTIONS:
        return Decision(Action.IGNORE, f"pull_request action '{event.action}' starts no build", **base)
    if pull.draft:
        return Decision(Action.IGNORE, f"PR #{pull.number} is a draft", **base)
    if policy.trusts(pull.author, pull.author_association):
        trusted = f"PR #{pull.number} by trusted {pull.author} ({pull.author_association})"
        return Decision(Action.BUILD, trusted, **base)
    if approvals.is_approved(pull.repo, pull.number, pull.head_sha):
        return Decision(Action.BUILD, f"head {pull.head_sha[:12]} of PR #{pull.number} was approved", **base)
    return Decision(
        Action.AWAIT_APPROVAL,
        f"PR #{pull.number} by {pull.author} ({pull.author_association}) needs a trusted `ok to test` "
        f"for head {pull.head_sha[:12]}",
        reply_to=pull.author,
        **base,
    )


def decide_comment(
    event: CommentEvent,
    trigger: Trigger | None,
    pull: PullRequest | None,
    policy: TrustPolicy,
    approvals: ApprovalBook,
) -> Decision:
    """What a comment does. ``pull`` is the PR's current state (None when not a PR)."""
    base = {"repo": event.repo, "number": event.issue_number}
    if event.action != "created":
        return Decision(Action.IGNORE, f"issue_comment action '{event.action}' is ignored", **base)
    if not event.is_pull_request or pull is None:
        return Decision(Action.IGNORE, f"#{event.issue_number} is an issue, not a pull request", **base)
    if trigger is None:
        return Decision(Action.IGNORE, "comment holds no trigger phrase", **base)
    base["head_sha"] = pull.head_sha
    if not policy.trusts(event.author, event.author_association):
        return Decision(
            Action.REPLY,
            f"@{event.author}: only {policy.describe()} can start CI builds, so nothing ran. "
            "A maintainer can comment `ok to test` (untrusted PRs) or `retest this please`.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    if trigger.kind == TriggerKind.APPROVE:
        return Decision(
            Action.BUILD,
            f"{event.author} approved head {pull.head_sha[:12]} of PR #{pull.number}",
            trigger=trigger,
            approve_head=True,
            **base,
        )
    if trigger.unknown and not trigger.selectors:
        return Decision(
            Action.REPLY,
            f"@{event.author}: no variant or target called {', '.join(trigger.unknown)}, so nothing ran.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    author_trusted = policy.trusts(pull.author, pull.author_association)
    if not author_trusted and not approvals.is_approved(pull.repo, pull.number, pull.head_sha):
        return Decision(
            Action.REPLY,
            f"@{event.author}: head {pull.head_sha[:12]} of this PR by {pull.author} is not approved yet, "
            "so nothing ran. Comment `ok to test` to approve it.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    return Decision(Action.BUILD, f"{event.author} asked for a retest", trigger=trigger, **base)


@dataclass
class ReplyLimiter:
    """At most one explanation per (PR, login) per window, and a few per PR, so bots can't spam."""

    window_seconds: float = 3600.0
    per_pr_limit: int = 3
    _last: dict[tuple[str, int, str], float] = field(default_factory=dict)
    _per_pr: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def allow(self, repo: str, number: int, login: str, now: float) -> bool:
        key = (repo, number, login.lower())
        last = self._last.get(key)
        if last is not None and now - last < self.window_seconds:
            return False
        recent = [t for t in self._per_pr.get((repo, number), []) if now - t < self.window_seconds]
        if len(recent) >= self.per_pr_limit:
            self._per_pr[(repo, number)] = recent
            return False
        self._last[key] = now
        self._per_pr[(repo, number)] = [*recent, now]
        return True
