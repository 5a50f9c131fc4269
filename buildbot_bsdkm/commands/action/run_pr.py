"""``action run-pr``: in a ``workflow_run`` job, the PR whose ``pull_request`` run finished.

GitHub leaves ``workflow_run.pull_requests`` empty for a fork's PR, so the PR run uploads its
own event; that file came from a job running the PR's code and is trusted for nothing but a PR
number to look up. The PR is taken only when the API says its head is the commit the finished
run built (``workflow_run.head_sha``, GitHub's own) from the same repository.

For a fork's PR it also asks GitHub what the PR changes (compare ``base...head``, nothing checked
out) and names what of that judges the run (``provenance.py``): the ``judges-changed`` output,
which turns every status of the run into ``error``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...config.bsdkm_yml import Config, ConfigError, load_config
from ..exit_codes import EXIT_OK, UsageError
from . import workflow as actions
from .github import ApiContext, read_event, with_github
from .provenance import JudgePaths, changed_judges
from .run_files import optional_path, write_runner_files

EVENT_FILE = "event.json"  # what the PR run uploads (its $GITHUB_EVENT_PATH)


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("run-pr", help="the PR of the finished pull_request run (workflow_run jobs)")
    p.add_argument("--event-dir", type=Path, required=True,
                   help=f"the PR run's uploaded event (a directory holding {EVENT_FILE})")
    p.add_argument("--token-env", default="GITHUB_TOKEN", help="environment variable holding the token")
    p.add_argument("--api-url", help="REST API root (default: $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--config", type=optional_path,
                   help="the base's bsdkm.yml: it and the files it names judge the run "
                        "(default: bsdkm-ci's own)")
    p.set_defaults(func=run_run_pr)


def _str_at(doc: Any, *keys: str) -> str:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc if isinstance(doc, str) else ""


def claimed_pr(event_dir: Path) -> int:
    path = event_dir / EVENT_FILE
    pr = read_event(path).get("pull_request")
    number = pr.get("number") if isinstance(pr, dict) else None
    if not isinstance(number, int) or number < 1:
        raise UsageError(f"{path}: no pull_request.number (upload the PR run's $GITHUB_EVENT_PATH)")
    return number


def find_run_pr(ctx: ApiContext, run_event: dict[str, Any], event_dir: Path,
                judges: JudgePaths | None = None) -> dict[str, str]:
    run = run_event.get("workflow_run")
    if not isinstance(run, dict):
        raise UsageError("not a workflow_run event ($GITHUB_EVENT_PATH has no workflow_run)")
    if run.get("event") != "pull_request":
        raise UsageError(f"the finished run was started by {run.get('event')!r}, not pull_request")
    head_sha = _str_at(run, "head_sha")
    head_repo = _str_at(run, "head_repository", "full_name")
    number = claimed_pr(event_dir)

    fork = head_repo != ctx.repo

    async def ask(client: Any) -> tuple[Any, list[Any]]:
        pull = (await client.get_pull(ctx.repo, number)).data
        base = _str_at(pull, "base", "sha")
        if not fork or _str_at(pull, "head", "sha") != head_sha or not base:
            return pull, []
        compared = await client.request("GET", f"/repos/{ctx.repo}/compare/{base}...{head_sha}")
        files = compared.data.get("files") if isinstance(compared.data, dict) else None
        return pull, files if isinstance(files, list) else []

    pull, files = with_github(ctx, ask)
    actual_sha, actual_repo = _str_at(pull, "head", "sha"), _str_at(pull, "head", "repo", "full_name")
    if actual_sha != head_sha or actual_repo != head_repo:
        raise UsageError(f"PR #{number}'s head is {actual_repo or '?'}@{actual_sha[:12] or '?'}, but the "
                         f"finished run built {head_repo or '?'}@{head_sha[:12] or '?'}: not reporting on it")
    changed = changed_judges(files, judges or JudgePaths()) if fork else []
    return {"pr": str(number), "head-sha": head_sha, "fork": "true" if fork else "false",
            "judges-changed": "\n".join(changed)}


def run_run_pr(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    path = actions.env_path(env, "GITHUB_EVENT_PATH")
    if path is None:
        raise UsageError("no $GITHUB_EVENT_PATH (run in a workflow_run job)")
    ctx = ApiContext.from_env(env, token_env=args.token_env, api_url=args.api_url, repo=None)
    judges = JudgePaths.of(_config(args.config), Path.cwd())
    outputs = find_run_pr(ctx, read_event(path), args.event_dir, judges)
    actions.say(f"bsdkm-ci: the run built PR #{outputs['pr']} at {outputs['head-sha'][:12]}", err=True)
    if outputs["judges-changed"]:
        changed = ", ".join(outputs["judges-changed"].splitlines())
        actions.say(f"bsdkm-ci: the PR changes what judges it: {changed}", err=True)
    write_runner_files(env, outputs, "")
    return EXIT_OK


def _config(path: Path | None) -> Config | None:
    """The base's config, read for the paths it names (none without --config)."""
    if path is None:
        return None
    try:
        return load_config(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None
