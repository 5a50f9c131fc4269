"""A bisection's result as a commit comment on the culprit (``POST /repos/{o}/{r}/commits/{sha}/comments``).

The body is built from ``bisect.json`` (``report/bisect.py`` result_json): the culprit, the evidence,
the verification, the builds it took and a link to the master's page. Everything in it that came
from the repository or its logs is escaped (``report/blocks.py``), and it is cut to GitHub's limit.
A "could not decide" result is not posted: there is no commit to put it on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..report.blocks import md_code, md_text, md_url
from .client import ApiResponse, GitHubClient

MAX_BODY = 65536  # characters GitHub accepts in a comment
MARKER = "<!-- bsdkm-ci bisect -->"


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
             f"- parent {md_code((doc.get('parent') or {}).get('sha', '-'))} passed; "
             f"{doc.get('builds')} build(s) for {doc.get('commits')} commit(s) "
             f"(limit {doc.get('build_limit')}), {float(doc.get('build_seconds') or 0):.0f} s of builds"]
    evidence = doc.get("evidence") or {}
    if evidence.get("change_pct") is not None:
        lo, hi = (evidence.get("interval_pct") or [None, None])[:2]
        metric = md_text(evidence.get("metric") or "time")
        interval = f", interval {lo} % to {hi} %" if lo is not None and lo != hi else ""
        lines.append(f"- change: {float(evidence['change_pct']):+.2f} % ({metric}{interval})")
    verify = [s for s in doc.get("steps") or [] if s.get("purpose") == "verify"]
    if verify:
        lines.append("- verification: " + "; ".join(
            f"{md_code(str(s['commit']['sha'])[:12])} {md_text(s.get('outcome'))}" for s in verify))
    if link:
        lines += ["", f"[Bisection report]({md_url(link)})"]
    body = "\n".join(lines) + "\n"
    return body if len(body) <= MAX_BODY else body[:MAX_BODY - 20] + "\n\n(cut)\n"


async def post_commit_comment(client: GitHubClient, repo: str, sha: str, body: str) -> ApiResponse:
    """One commit comment; not repeated after an answer that never came (it may have been made)."""
    return await client.request("POST", f"/repos/{repo}/commits/{sha}/comments", {"body": body},
                                idempotent=False)
