"""``action comment``: keep the one marked PR comment up to date with the Markdown report,
through the same publisher (marker, retries, only our own comment edited) as the Buildbot reporter.

Which earlier comment is ours does not depend on being told the bot's login: the token's own
user (``GET /user``, a personal token) is ours, and so is a comment a GitHub App made as its own
bot user (``<app slug>[bot]``, as ``GITHUB_TOKEN`` and App installation tokens do), which no
person can post. ``BSDKM_BOT_LOGIN`` / ``--bot-login`` adds one more login to trust.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...github.outbox import Outbox
from ...policy import Verdict
from ...report.history import history_link
from ...report.pull_request import REPORT_MARKER, PullRequestReport
from ...report.sinks import PullRequestRef
from ..exit_codes import EXIT_OK, UsageError
from .github import ApiContext, pr_number_from_event, with_github
from .run_files import read_text

DEFAULT_BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN's comments are by

# comment-mode: when the comment is written.
MODE_ALWAYS = "always"  # create or edit it on every run
MODE_CHANGES = "changes"  # only when the report differs from the comment (none yet: unless it passed)
MODE_FAILURES = "failures"  # only when the verdict is not pass (an existing comment is still edited)
MODE_OFF = "off"
COMMENT_MODES = (MODE_ALWAYS, MODE_CHANGES, MODE_FAILURES, MODE_OFF)


def comment_mode(text: str) -> str:
    word = text.strip().lower()
    aliases = {"true": MODE_ALWAYS, "false": MODE_OFF, "": MODE_ALWAYS}
    word = aliases.get(word, word)
    if word not in COMMENT_MODES:
        raise argparse.ArgumentTypeError(f"comment-mode {text!r}: expected one of {', '.join(COMMENT_MODES)}")
    return word


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("comment", help="create or update the single bsdkm-ci comment on the PR")
    p.add_argument("--report", type=Path, required=True, help="Markdown report (the report-path output)")
    p.add_argument("--pr", type=_optional_pr, help="PR number (default: from $GITHUB_EVENT_PATH)")
    p.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--mode", type=comment_mode, default=MODE_ALWAYS,
                   help="always, changes, failures or off (default always)")
    p.add_argument("--verdict", default="", help="the run's verdict word (the verdict output), for --mode")
    p.add_argument("--bot-login", default=None,
                   help="a login whose marked comment is ours too (default: $BSDKM_BOT_LOGIN)")
    p.add_argument("--history-url", type=_history_url, default="",
                   help="the perf history page (the nightly's trend charts), linked below the report")
    p.set_defaults(func=run_comment)


def _history_url(text: str) -> str:
    url = text.strip()
    if url and not re.fullmatch(r"https?://[^\s()<>\[\]]+", url):
        raise argparse.ArgumentTypeError(f"--history-url {text!r}: not an http(s) URL")
    return url


def _optional_pr(text: str) -> int | None:
    if not text.strip():
        return None
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"--pr {text!r}: not a PR number")
    return int(text)


def run_comment(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    mode = getattr(args, "mode", MODE_ALWAYS)
    if mode == MODE_OFF:
        print("bsdkm-ci: comment-mode off: no PR comment written")
        return EXIT_OK
    pr = args.pr if args.pr is not None else pr_number_from_event(env)
    if pr is None:
        print("::notice title=bsdkm-ci::not a pull request event; no PR comment written")
        return EXIT_OK
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=args.repo)
    body = read_text(args.report, "report")
    if getattr(args, "history_url", ""):
        body = f"{body.rstrip()}\n\n{history_link(args.history_url)}\n"
    bot_login = getattr(args, "bot_login", None) or env.get("BSDKM_BOT_LOGIN") or None
    verdict = getattr(args, "verdict", "")
    written = upsert_comment(ctx, pr, body, mode=mode, verdict=verdict, bot_login=bot_login)
    print(f"bsdkm-ci: PR #{pr} report comment is up to date" if written
          else f"bsdkm-ci: comment-mode {mode}: PR #{pr} comment left as it is")
    return EXIT_OK


def is_ours(comment: Mapping[str, Any], logins: set[str]) -> bool:
    """A marked comment by one of ``logins`` or by a GitHub App's own bot user."""
    if not str(comment.get("body") or "").startswith(REPORT_MARKER):
        return False
    user = comment.get("user") if isinstance(comment.get("user"), Mapping) else {}
    login = str(user.get("login") or "").lower()  # type: ignore[union-attr]
    if login and login in logins:
        return True
    app = comment.get("performed_via_github_app")
    slug = app.get("slug") if isinstance(app, Mapping) else None
    return (user.get("type") == "Bot" and isinstance(slug, str)  # type: ignore[union-attr]
            and login == f"{slug}[bot]".lower())


def should_write(mode: str, verdict: str, existing: str | None, body: str) -> bool:
    if mode == MODE_OFF:
        return False
    if mode == MODE_FAILURES:
        return verdict != "pass" or existing is not None
    if mode == MODE_CHANGES:
        if existing is None:
            return verdict != "pass"
        return existing != body
    return True


def upsert_comment(ctx: ApiContext, pr: int, body: str, *, mode: str = MODE_ALWAYS, verdict: str = "",
                   bot_login: str | None = None) -> bool:
    """Create the PR's report comment or edit it: the Buildbot reporter's publisher, marker and retries."""
    # Twisted's: imported when a comment is written, as in with_github (start-up of other commands).
    from ...github.client import GitHubError
    from ...github.pr_sinks import PullRequestComment
    from ...github.publisher import Publisher

    report = PullRequestReport(Verdict(), [], body.removeprefix(f"{REPORT_MARKER}\n"))
    marked = report.body

    async def work(client: Any) -> tuple[bool, bool]:
        logins = {bot_login.lower()} if bot_login else set()
        try:
            me = await client.request("GET", "/user")
            if isinstance(me.data, dict) and isinstance(me.data.get("login"), str):
                logins.add(me.data["login"].lower())
        except GitHubError as e:
            if e.status not in (401, 403):  # an App's token has no user of its own: 403
                raise
        ours = [c for c in await client.list_issue_comments(ctx.repo, pr) if is_ours(c, logins)]
        existing = ours[0] if ours else None
        if not should_write(mode, verdict, None if existing is None else str(existing.get("body")), marked):
            return True, False
        outbox = Outbox(None)
        if existing is not None:
            outbox.set_comment_id(ctx.repo, pr, int(existing["id"]))
        login = str(existing["user"]["login"]) if existing is not None else (bot_login or DEFAULT_BOT_LOGIN)
        sink = PullRequestComment(Publisher(client, outbox, login))
        return await sink.deliver(report, PullRequestRef(ctx.repo, "", pr)), True

    publisher_ok, written = with_github(ctx, work)
    if not publisher_ok:
        raise UsageError(f"PR #{pr}: GitHub did not accept the report comment (see the messages above)")
    return written
