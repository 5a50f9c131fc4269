"""Webhook bodies built from GitHub's own example payloads (npm ``@octokit/webhooks-examples``).

Only the fields a scenario is about are changed (action, author association, draft, head
commit, fork, comment text); everything else is GitHub's example as published.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from .spec import webhook_examples


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
) -> dict[str, Any]:
    payload = example("pull_request", action)
    pr = payload["pull_request"]
    pr["author_association"] = association
    pr["draft"] = draft
    if login is not None:
        pr["user"]["login"] = login
    if head_sha is not None:
        pr["head"]["sha"] = head_sha
    if number is not None:
        payload["number"] = pr["number"] = number
        pr["html_url"] = f"{payload['repository']['html_url']}/pull/{number}"
    if fork:
        owner = pr["user"]["login"]
        pr["head"]["repo"] = copy.deepcopy(pr["head"]["repo"])
        pr["head"]["repo"]["full_name"] = f"{owner}-fork/{payload['repository']['name']}"
        pr["head"]["repo"]["fork"] = True
    return payload


def issue_comment(
    body: str,
    *,
    action: str = "created",
    association: str = "OWNER",
    login: str = "Codertocat",
    on_pull_request: bool = True,
    number: int | None = None,
    comment_id: int | None = None,
) -> dict[str, Any]:
    payload = example("issue_comment", action)
    comment = payload["comment"]
    comment["body"] = body
    comment["author_association"] = association
    comment["user"]["login"] = login
    if comment_id is not None:
        comment["id"] = comment_id
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
