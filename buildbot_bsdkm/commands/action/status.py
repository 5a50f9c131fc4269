"""``action status``: a commit status per (target, variant) on the PR head, named as Buildbot names
them (``bsdkm/<target>/<variant>``), so either shell can be the required check of a branch.

The statuses are the core's PR report's (``report/pull_request.py``, as the Buildbot reporter's),
labelled by where the results came from (``provenance.py``); they go out through the Buildbot
reporter's sink and publisher (``github/pr_sinks.py``: retries, description cut to GitHub's limit).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from typing import Any

from ...github.outbox import Outbox
from ...policy import Verdict
from ...report.commit_status import CommitStatus
from ...report.pull_request import PullRequestReport
from ...report.sinks import PullRequestRef, deliver
from ..exit_codes import EXIT_OK, UsageError
from . import workflow as actions
from .github import ApiContext, read_event, with_github
from .results import ResultsRequest, _results_args, load_outcome


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("status", help="post a commit status per (target, variant) on the PR head")
    _results_args(p)
    p.add_argument("--sha", default="", help="commit to mark (default: the event's PR head, or $GITHUB_SHA)")
    p.add_argument("--repo", help="owner/name (default: $GITHUB_REPOSITORY)")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--target-url", default="", help="link of every status (default: this workflow run)")
    p.set_defaults(func=run_status)


def head_sha_from_event(env: Mapping[str, str]) -> str:
    """The commit a run's statuses belong on: a PR's head, a workflow_run's head, else $GITHUB_SHA."""
    path = actions.env_path(env, "GITHUB_EVENT_PATH")
    event = read_event(path) if path is not None else {}
    pr = event.get("pull_request")
    if isinstance(pr, dict) and isinstance(pr.get("head"), dict) and isinstance(pr["head"].get("sha"), str):
        return str(pr["head"]["sha"])
    run = event.get("workflow_run")
    if isinstance(run, dict) and isinstance(run.get("head_sha"), str):
        return str(run["head_sha"])
    if isinstance(event.get("issue"), dict):
        return ""  # a comment's PR head is the trigger's to find (its head-sha output)
    return env.get("GITHUB_SHA", "")


def run_url(env: Mapping[str, str]) -> str | None:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else None


def post_statuses(ctx: ApiContext, sha: str, states: list[CommitStatus], target_url: str | None) -> bool:
    # Twisted's, as in with_github: the judging steps run where the GitHub client is not installed.
    from ...github.pr_sinks import CommitStatuses
    from ...github.publisher import Publisher

    report = PullRequestReport(Verdict(), states, "")
    where = PullRequestRef(ctx.repo, sha, None, target_url)

    async def work(client: Any) -> bool:
        return await deliver(report, where, [CommitStatuses(Publisher(client, Outbox(None)))])

    return bool(with_github(ctx, work))


def run_status(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    sha = args.sha.strip() or head_sha_from_event(env)
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UsageError(f"commit {sha!r} is not a 40-digit sha (pass --sha, the action's head-sha input)")
    outcome = load_outcome(ResultsRequest.from_args(args))
    if outcome.unusable is not None:
        raise UsageError(f"no statuses: {outcome.unusable}")
    states = outcome.states()
    if not states:
        raise UsageError("no statuses: the results hold no run")
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=args.repo)
    if not post_statuses(ctx, sha, states, args.target_url or run_url(env)):
        raise UsageError(f"GitHub did not take every status for {sha[:12]} (see the messages above)")
    for s in states:
        actions.say(f"bsdkm-ci: {s.context}: {s.state}: {s.description}", err=True)
    return EXIT_OK
