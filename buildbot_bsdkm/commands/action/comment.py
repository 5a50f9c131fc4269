"""``action comment``: keep the one marked PR comment up to date with the Markdown report,
through the same publisher (marker, retries, only our own comment edited) as the Buildbot reporter.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...github.outbox import Outbox
from ..errors import EXIT_OK, UsageError
from .github import ApiContext, pr_number_from_event, with_github
from .io import read_text

DEFAULT_BOT_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN's comments are by


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("comment", help="create or update the single bsdkm-ci comment on the PR")
    p.add_argument("--report", type=Path, required=True, help="Markdown report (the report-path output)")
    p.add_argument("--pr", type=int, help="PR number (default: from $GITHUB_EVENT_PATH)")
    p.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.set_defaults(func=run_comment)


def run_comment(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    pr = args.pr if args.pr is not None else pr_number_from_event(env)
    if pr is None:
        print("::notice title=bsdkm-ci::not a pull request event; no PR comment written")
        return EXIT_OK
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=args.repo)
    body = read_text(args.report, "report")
    upsert_comment(ctx, pr, body)
    print(f"bsdkm-ci: PR #{pr} report comment is up to date")
    return EXIT_OK


def upsert_comment(ctx: ApiContext, pr: int, body: str) -> None:
    """Create the PR's report comment or edit it: the Buildbot reporter's publisher, marker and retries."""
    # Twisted's: imported when a comment is written, as in with_github (start-up of other commands).
    from ...github.publisher import Publisher

    # Only a comment by the workflow's own user is ours to edit; anyone can copy the marker.
    bot_login = os.environ.get("BSDKM_BOT_LOGIN") or DEFAULT_BOT_LOGIN

    async def work(client: Any) -> bool:
        return bool(await Publisher(client, Outbox(None), bot_login).upsert_report(ctx.repo, pr, body))

    publisher_ok = with_github(ctx, work)
    if not publisher_ok:
        raise UsageError(f"PR #{pr}: GitHub did not accept the report comment (see the messages above)")
