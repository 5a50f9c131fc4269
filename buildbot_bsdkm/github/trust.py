"""Who may make CI build a PR, and what each webhook event should do.

Pure functions over the parsed events (``events.py``) and small state objects with the
clock passed in, so the GitHub Action and tests use exactly what the Buildbot hook uses.

The rule: code from an untrusted author, pusher or fork owner is loaded into no kernel until a
trusted user comments ``ok to test`` on that PR, and the approval covers only a head commit that
existed when the comment was written (or the commit it names: ``ok to test 1a2b3c4``): a push
after the comment, even one that reaches the master before the comment does, needs a new one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from .events import CommentEvent, PullRequest, PullRequestEvent, parse_time
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

    def push_problem(self, pull: PullRequest, sender: str) -> str | None:
        """Why the head's pusher or the repository it comes from is not trusted, or None.

        A webhook tells who pushed (``sender``) but not their role, so only the PR's trusted author
        and allow-listed users count as trusted pushers; the head must live in the base repository's
        owner's account, the author's own fork, or an allow-listed user's.
        """
        who = sender.lower()
        if who != pull.author.lower() and who not in self.allow_list:
            return f"the head was pushed by {sender}, not by the PR's author"
        return self.repo_problem(pull)

    def repo_problem(self, pull: PullRequest) -> str | None:
        """Why the repository the head comes from is not trusted, or None."""
        owner = (pull.head_owner or "").lower()
        trusted_owners = {pull.repo.split("/")[0].lower(), pull.author.lower(), *self.allow_list}
        if not owner:
            return "the head repository was deleted"
        if owner not in trusted_owners:
            return f"the head comes from {pull.head_repo}, a fork owned by {pull.head_owner}"
        return None

    def describe(self) -> str:
        roles = ", ".join(sorted(a.lower().replace("_", " ") + "s" for a in self.associations))
        return f"the repository's {roles}" + (" and allow-listed users" if self.allow_list else "")


class Action(StrEnum):
    BUILD = "build"  # start the selected builders for head_sha
    IGNORE = "ignore"  # nothing to do, nothing to say
    REPLY = "reply"  # nothing runs; tell the commenter why
    AWAIT_APPROVAL = "await-approval"  # untrusted PR: ask a maintainer for `ok to test`


@dataclass(frozen=True)
class TrustDecision:
    action: Action
    reason: str
    repo: str = ""
    number: int = 0
    head_sha: str = ""
    trigger: Trigger | None = None
    approve_head: bool = False  # record an approval of head_sha before building
    reply_to: str | None = None  # login the reply addresses
    author_trusted: bool = False  # the PR's author and head pusher are trusted (not only approved)

    @property
    def builds(self) -> bool:
        return self.action == Action.BUILD


MAX_APPROVED_PER_PR = 20  # approved commits remembered per PR (newest kept)


@dataclass
class PrRecord:
    """What the master remembers about one PR across restarts (``state_store.py`` persists it)."""

    head: str = ""
    head_seen_at: str = ""  # GitHub's time of the event that showed this head first
    head_before: str = ""  # the head that push replaced, when its event said (``head_order``)
    # Whether a push of this head was seen (opened, synchronize: the sender pushed it), and whether
    # every one seen was by someone trusted. A head shown only by an event that names no pusher
    # (reopened, ready_for_review), or whose push event was lost, is not vetted.
    head_pushed: bool = False
    head_vetted: bool = False
    approved: list[str] = field(default_factory=list)
    # Unfinished buildsets of this PR: bsid -> {"head": sha, "requests": {brid: status context}}.
    buildsets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_doc(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "head_seen_at": self.head_seen_at,
            "head_before": self.head_before,
            "head_pushed": self.head_pushed,
            "head_vetted": self.head_vetted,
            "approved": list(self.approved),
            "buildsets": self.buildsets,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any] | None) -> PrRecord:
        if not isinstance(doc, Mapping):
            return cls()
        buildsets = doc.get("buildsets")
        return cls(
            head=str(doc.get("head") or ""),
            head_seen_at=str(doc.get("head_seen_at") or ""),
            head_before=str(doc.get("head_before") or ""),
            head_pushed=bool(doc.get("head_pushed", False)),
            head_vetted=bool(doc.get("head_vetted", False)),
            approved=[str(x) for x in doc.get("approved") or []],
            buildsets=dict(buildsets) if isinstance(buildsets, Mapping) else {},
        )


@dataclass
class ApprovalBook:
    """Per PR: the approved commits and when (and by whom) its current head was pushed."""

    records: dict[tuple[str, int], PrRecord] = field(default_factory=dict)

    def record(self, repo: str, number: int) -> PrRecord:
        return self.records.setdefault((repo, number), PrRecord())

    def approve(self, repo: str, number: int, head_sha: str) -> None:
        approved = self.record(repo, number).approved
        if head_sha not in approved:
            approved.append(head_sha)
            del approved[:-MAX_APPROVED_PER_PR]

    def is_approved(self, repo: str, number: int, head_sha: str) -> bool:
        record = self.records.get((repo, number))
        return record is not None and head_sha in record.approved

    def saw_head(self, repo: str, number: int, head_sha: str, at: str, vetted: bool | None,
                 before: str = "") -> bool:
        """Note a pull_request event's head; True when it is a head not seen before.

        ``vetted``: whether the push the event reports was made by, and from the repository of,
        someone the policy trusts; None when the event reports no push (reopened, ready_for_review).
        """
        record = self.record(repo, number)
        new = record.head != head_sha
        if new:
            record.head, record.head_seen_at, record.head_before = head_sha, at, before
            record.head_pushed = record.head_vetted = False
        if vetted is not None:
            record.head_vetted = vetted and (record.head_vetted or not record.head_pushed)
            record.head_pushed = True
        return new

    def head_vetted(self, repo: str, number: int, head_sha: str) -> bool:
        """Whether a push of ``head_sha`` was seen, and every one seen was by someone trusted."""
        record = self.records.get((repo, number))
        return record is not None and record.head == head_sha and record.head_pushed and record.head_vetted

    def pushed_untrusted(self, repo: str, number: int, head_sha: str) -> bool:
        """Whether someone the policy does not trust was seen pushing ``head_sha``."""
        record = self.records.get((repo, number))
        return (record is not None and record.head == head_sha and record.head_pushed
                and not record.head_vetted)

    def head_since(self, pull: PullRequest) -> datetime | None:
        """A time the PR's current head is known to have existed by.

        From the event that showed the head when we saw one; otherwise the PR's ``updated_at``
        (a push moves it, so a comment written after it was written after the push).
        """
        record = self.records.get((pull.repo, pull.number))
        if record is not None and record.head == pull.head_sha and record.head_seen_at:
            return parse_time(record.head_seen_at)
        return parse_time(pull.updated_at)


PUSH_ACTIONS: frozenset[str] = frozenset({"opened", "synchronize"})  # the sender is who pushed the head


def push_vetted(event: PullRequestEvent, policy: TrustPolicy) -> bool | None:
    """Whether the push this event reports was by, and from the repository of, someone trusted; None
    for an event that reports no push (on ``reopened``/``ready_for_review`` the sender only clicked)."""
    if event.action not in PUSH_ACTIONS:
        return None
    return policy.push_problem(event.pull, event.sender) is None


def event_push_problem(event: PullRequestEvent, policy: TrustPolicy, approvals: ApprovalBook) -> str | None:
    """Why the event's head is not vetted, or None.

    On ``opened``/``synchronize`` the sender pushed the head; on ``reopened``/``ready_for_review``
    the sender only clicked, so what counts is the head's own push, as the master saw it: a head
    it saw no push of is not vetted, whoever the PR's author is (events can arrive out of order,
    and a push by someone else may still be on its way).
    """
    pull = event.pull
    untrusted = approvals.pushed_untrusted(pull.repo, pull.number, pull.head_sha)
    if event.action in PUSH_ACTIONS:
        problem = policy.push_problem(pull, event.sender)
    else:
        problem = policy.repo_problem(pull)
        if problem is None and not untrusted and not approvals.head_vetted(pull.repo, pull.number,
                                                                           pull.head_sha):
            problem = (f"this master saw no push of head {pull.head_sha[:12]}, so it does not know who "
                       f"pushed it ('{event.action}' does not say)")
    if problem is None and untrusted:
        problem = f"head {pull.head_sha[:12]} was pushed by someone the policy does not trust"
    return problem


def decide_pull_request(
    event: PullRequestEvent, policy: TrustPolicy, approvals: ApprovalBook
) -> TrustDecision:
    pull = event.pull
    base = {"repo": pull.repo, "number": pull.number, "head_sha": pull.head_sha}
    if event.action not in BUILDING_PR_ACTIONS:
        return TrustDecision(Action.IGNORE, f"pull_request action '{event.action}' starts no build", **base)
    if pull.draft:
        return TrustDecision(Action.IGNORE, f"PR #{pull.number} is a draft", **base)
    push_problem = event_push_problem(event, policy, approvals)
    if policy.trusts(pull.author, pull.author_association) and push_problem is None:
        trusted = f"PR #{pull.number} by trusted {pull.author} ({pull.author_association})"
        return TrustDecision(Action.BUILD, trusted, author_trusted=True, **base)
    if approvals.is_approved(pull.repo, pull.number, pull.head_sha):
        approved = f"head {pull.head_sha[:12]} of PR #{pull.number} was approved"
        return TrustDecision(Action.BUILD, approved, **base)
    why = push_problem if policy.trusts(pull.author, pull.author_association) else (
        f"{pull.author} ({pull.author_association}) is not trusted"
    )
    return TrustDecision(
        Action.AWAIT_APPROVAL,
        f"PR #{pull.number} needs a trusted `ok to test` for head {pull.head_sha[:12]}: {why}",
        reply_to=pull.author,
        **base,
    )


def decide_commenter(
    event: CommentEvent, trigger: Trigger | None, policy: TrustPolicy
) -> TrustDecision | None:
    """What a comment does when that needs no look at the PR (None: it depends on the PR's state).

    Anyone can comment, so a comment that cannot start anything is settled from the event alone:
    reading the PR from GitHub for it would let strangers spend the master's API budget.
    """
    base = {"repo": event.repo, "number": event.issue_number}
    if event.action != "created":
        return TrustDecision(Action.IGNORE, f"issue_comment action '{event.action}' is ignored", **base)
    if not event.is_pull_request:
        return TrustDecision(Action.IGNORE, f"#{event.issue_number} is an issue, not a pull request", **base)
    if trigger is None:
        return TrustDecision(Action.IGNORE, "comment holds no trigger phrase", **base)
    if not policy.trusts(event.author, event.author_association):
        return TrustDecision(
            Action.REPLY,
            f"@{event.author}: only {policy.describe()} can start CI builds, so nothing ran. "
            "A maintainer can comment `ok to test` (untrusted PRs) or `retest this please`.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    return None


def decide_comment(
    event: CommentEvent,
    trigger: Trigger | None,
    pull: PullRequest | None,
    policy: TrustPolicy,
    approvals: ApprovalBook,
) -> TrustDecision:
    """What a comment does. ``pull`` is the PR's current state (None when not a PR).

    An approval without a commit covers the current head only if that head is known to have
    existed before the comment was written; otherwise the maintainer is asked to name the commit.
    """
    early = decide_commenter(event, trigger, policy)
    if early is not None:
        return early
    base: dict[str, Any] = {"repo": event.repo, "number": event.issue_number}
    if pull is None:
        return TrustDecision(Action.IGNORE, f"#{event.issue_number} is an issue, not a pull request", **base)
    assert trigger is not None  # decide_commenter ignores a comment without one
    base["head_sha"] = pull.head_sha
    if trigger.kind == TriggerKind.APPROVE:
        problem = _approval_problem(event, trigger, pull, approvals)
        if problem is not None:
            return TrustDecision(Action.REPLY, problem, trigger=trigger, reply_to=event.author, **base)
        return TrustDecision(
            Action.BUILD,
            f"{event.author} approved head {pull.head_sha[:12]} of PR #{pull.number}",
            trigger=trigger,
            approve_head=True,
            **base,
        )
    if trigger.unknown and not trigger.selectors:
        return TrustDecision(
            Action.REPLY,
            f"@{event.author}: no variant or target called {', '.join(trigger.unknown)}, so nothing ran.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    author_trusted = policy.trusts(pull.author, pull.author_association) and approvals.head_vetted(
        pull.repo, pull.number, pull.head_sha
    )
    if not author_trusted and not approvals.is_approved(pull.repo, pull.number, pull.head_sha):
        return TrustDecision(
            Action.REPLY,
            f"@{event.author}: head {pull.head_sha[:12]} of this PR by {pull.author} is not approved yet, "
            "so nothing ran. Comment `ok to test` to approve it.",
            trigger=trigger,
            reply_to=event.author,
            **base,
        )
    return TrustDecision(Action.BUILD, f"{event.author} asked for a retest", trigger=trigger,
                         author_trusted=author_trusted, **base)


def _approval_problem(
    event: CommentEvent, trigger: Trigger, pull: PullRequest, approvals: ApprovalBook
) -> str | None:
    """Why this ``ok to test`` does not cover the PR's current head, or None when it does."""
    head = pull.head_sha
    if trigger.sha is not None:
        if head.startswith(trigger.sha):
            return None
        return (
            f"@{event.author}: `ok to test {trigger.sha}` names a commit that is not the PR's head "
            f"({head[:12]}), so nothing ran."
        )
    written = parse_time(event.created_at)
    since = approvals.head_since(pull)
    if written is not None and since is not None and since < written:
        return None
    return (
        f"@{event.author}: head {head[:12]} may have been pushed after your comment was written, so it "
        f"is not approved and nothing ran. Review it and comment `ok to test {head[:12]}`."
    )


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
