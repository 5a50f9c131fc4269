"""Webhook bodies built from GitHub's own example payloads (npm ``@octokit/webhooks-examples``).

Only the fields a scenario is about are changed (action, author association, draft, head
commit, fork, comment text); everything else is GitHub's example as published.
"""

from __future__ import annotations

import copy
import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from .spec import webhook_examples

# Comment ids are unique on GitHub, and the service acts on each only once: every comment a test
# writes gets its own id unless the test repeats one on purpose.
_comment_ids = itertools.count(int(time.time() * 1000) % 10**9 * 10)


def example(event: str, action: str | None = None) -> dict[str, Any]:
    for payload in webhook_examples()[event]:
        if action is None or payload.get("action") == action:
            return copy.deepcopy(payload)
    raise LookupError(f"no {event}/{action} example in @octokit/webhooks-examples")


def pull_request(
    action: str = "opened",
    *,
    association: str = "OWNER",
    login: str | None = None,
    draft: bool = False,
    head_sha: str | None = None,
    number: int | None = None,
    fork: bool = False,
    sender: str | None = None,
    fork_owner: str | None = None,
    updated_at: str | None = None,
) -> dict[str, Any]:
    """A pull_request event as sent now; the author pushed the head (``sender``) unless told otherwise."""
    payload = example("pull_request", action)
    pr = payload["pull_request"]
    # GitHub stamps the event when the head is pushed; a comment written afterwards is later.
    pr["updated_at"] = updated_at or github_time(-2)
    pr["author_association"] = association
    pr["draft"] = draft
    if login is not None:
        pr["user"]["login"] = login
    if head_sha is not None:
        pr["head"]["sha"] = head_sha
    if number is not None:
        payload["number"] = pr["number"] = number
        pr["html_url"] = f"{payload['repository']['html_url']}/pull/{number}"
    payload["sender"]["login"] = sender or pr["user"]["login"]
    if fork:
        owner = fork_owner or pr["user"]["login"]
        if owner == payload["repository"]["owner"]["login"]:
            owner += "-fork"  # a fork cannot live in the base repository's own account
        pr["head"]["repo"] = copy.deepcopy(pr["head"]["repo"])
        pr["head"]["repo"]["full_name"] = f"{owner}/{payload['repository']['name']}"
        pr["head"]["repo"]["owner"]["login"] = owner
        pr["head"]["repo"]["fork"] = True
    return payload


def github_time(offset_s: float = 0.0) -> str:
    """Now (plus ``offset_s``) in GitHub's timestamp format."""
    return (datetime.now(UTC) + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def issue_comment(
    body: str,
    *,
    action: str = "created",
    association: str = "OWNER",
    login: str = "Codertocat",
    on_pull_request: bool = True,
    number: int | None = None,
    comment_id: int | None = None,
    created_at: str | None = None,
) -> dict[str, Any]:
    payload = example("issue_comment", action)
    comment = payload["comment"]
    comment["created_at"] = created_at or github_time()
    comment["body"] = body
    comment["author_association"] = association
    comment["user"]["login"] = login
    comment["id"] = comment_id if comment_id is not None else next(_comment_ids)
    issue = payload["issue"]
    if number is not None:
        issue["number"] = number
    if on_pull_request:
        html = f"{payload['repository']['html_url']}/pull/{issue['number']}"
        issue["pull_request"] = {
            "url": f"{payload['repository']['url']}/pulls/{issue['number']}",
            "html_url": html,
            "diff_url": html + ".diff",
            "patch_url": html + ".patch",
        }
    else:
        issue.pop("pull_request", None)
    return payload


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode()
