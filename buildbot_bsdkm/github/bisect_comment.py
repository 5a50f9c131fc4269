"""A bisection's result as a commit comment on the culprit (``POST /repos/{o}/{r}/commits/{sha}/comments``).

The body is built from ``bisect.json`` (``report/bisection_report.py`` result_json): the culprit, the
evidence, the verification, the builds it took and a link to the master's page. Everything in it that came
from the repository or its logs is escaped (``report/blocks.py``), and it is cut to GitHub's limit.
A "could not decide" result is not posted: there is no commit to put it on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..report.blocks import md_code, md_text, md_url
from .client import ApiResponse, GitHubClient

MAX_BODY = 65536  # characters GitHub accepts in a comment
MARKER = "<!-- bsdkm-ci bisect -->"
SHA = re.compile(r"[0-9a-f]{40}")


def _count(value: Any) -> str:
    """A count from ``bisect.json`` (the worker's) as a number, or ``?``: never text of its own."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _number(value: Any, spec: str) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return format(value, spec)
    return "?"


async def checked_culprit(client: GitHubClient, repo: str, doc: Mapping[str, Any], request: Any) -> str:
    """The culprit's sha, once it is a full commit id strictly after the request's good end and no
    later than its bad end (GitHub's compare); ValueError otherwise. ``bisect.json`` comes from the
    worker, and the sha goes into the comment's URL."""
    culprit = doc.get("culprit")
    sha = culprit.get("sha") if isinstance(culprit, Mapping) else None
    if not isinstance(sha, str) or not SHA.fullmatch(sha):
        raise ValueError(f"the culprit {str(sha)[:60]!r} is not a full commit id (40 lowercase hex digits)")
    good, bad = (getattr(request, "good", None), getattr(request, "bad", None)) if request else (None, None)
    if not (isinstance(good, str) and SHA.fullmatch(good) and isinstance(bad, str) and SHA.fullmatch(bad)):
        raise ValueError("no bisection request with full good and bad commit ids to check the culprit by")
    after_good = await client.request("GET", f"/repos/{repo}/compare/{good}...{sha}")
    before_bad = await client.request("GET", f"/repos/{repo}/compare/{sha}...{bad}")
    status = (after_good.data or {}).get("status"), (before_bad.data or {}).get("status")
    if status[0] != "ahead" or status[1] not in ("ahead", "identical"):
        raise ValueError(f"the culprit {sha[:12]} is not in the range {good[:12]}..{bad[:12]} asked for "
                         f"(compare: {status[0]}, {status[1]})")
    return sha


def comment_body(doc: Mapping[str, Any], link: str | None = None) -> str:
    """Markdown for the culprit named in ``doc``; ValueError when it names none."""
    culprit = doc.get("culprit")
    if not doc.get("decided") or not isinstance(culprit, Mapping):
        raise ValueError("the bisection named no culprit: nothing to comment on")
    what = (f"the failure {md_code(doc['failure'])}" if doc.get("failure")
            else f"the regression of {md_code(doc.get('regression'))}")
    lines = [MARKER, f"**bsdkm-ci bisect**: this commit introduced {what} on "
             f"{md_code(doc.get('target'))}/{md_code(doc.get('variant'))}.", "",
             f"- evidence: {md_text(doc.get('why', ''))}",
             f"- confidence: {md_text(doc.get('confidence', ''))}",
             f"- parent {md_code(_parent_sha(doc))} passed; "
             f"{_count(doc.get('builds'))} build(s) for {_count(doc.get('commits'))} commit(s) "
             f"(limit {_count(doc.get('build_limit'))}), "
             f"{_number(doc.get('build_seconds') or 0, '.0f')} s of builds"]
    evidence = doc.get("evidence") if isinstance(doc.get("evidence"), Mapping) else {}
    if evidence.get("change_pct") is not None:
        bounds = evidence.get("interval_pct")
        lo, hi = (list(bounds) + [None, None])[:2] if isinstance(bounds, list) else (None, None)
        metric = md_text(evidence.get("metric") or "time")
        interval = (f", interval {_number(lo, '+.2f')} % to {_number(hi, '+.2f')} %"
                    if lo is not None and lo != hi else "")
        lines.append(f"- change: {_number(evidence['change_pct'], '+.2f')} % ({metric}{interval})")
    verify = [s for s in doc.get("steps") or [] if isinstance(s, Mapping) and s.get("purpose") == "verify"]
    if verify:
        lines.append("- verification: " + "; ".join(
            f"{md_code(str(s['commit']['sha'])[:12])} {md_text(s.get('outcome'))}" for s in verify))
    if link:
        lines += ["", f"[Bisection report]({md_url(link)})"]
    body = "\n".join(lines) + "\n"
    return body if len(body) <= MAX_BODY else body[:MAX_BODY - 20] + "\n\n(cut)\n"


def _parent_sha(doc: Mapping[str, Any]) -> str:
    parent = doc.get("parent")
    return str(parent.get("sha", "-")) if isinstance(parent, Mapping) else "-"


async def post_commit_comment(client: GitHubClient, repo: str, sha: str, body: str) -> ApiResponse:
    """One commit comment; not repeated after an answer that never came (it may have been made)."""
    if not SHA.fullmatch(sha):  # it is part of the URL
        raise ValueError(f"{sha[:60]!r} is not a full commit id")
    return await client.request("POST", f"/repos/{repo}/commits/{sha}/comments", {"body": body},
                                idempotent=False)
