"""``github_services(config)``: what ``master.cfg`` adds for GitHub.

Returns ``{"change_hook_dialects": {...}, "services": [...], "secretsProviders": []}``:
the ``github`` change hook (strict HMAC-SHA256, PR/comment rules), the service that turns
accepted events into buildsets, and the reporter (statuses + one edited PR comment).
Without a ``github:`` section in ``bsdkm.yml`` it returns an empty mapping.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from twisted.python import log

from ..config.bsdkm_yml import Config
from ..contract import builder_name
from ..model import from_json
from ..policy import load_policy
from .aggregate import PrReport
from .bodylimit import install_for_buildbot
from .buildsets import PrBuilder
from .client import GitHubClient
from .controller import PullRequestBuilds
from .hook import BsdkmGitHubEventHandler
from .inbox import INBOX_FILE, Inbox
from .master_secrets import SecretRef
from .outbox import Outbox
from .publisher import Publisher
from .reporters import GitHubPrReporter
from .settings import GitHubSettings, parse_settings


def pr_builders(config: Config, builder_names: Collection[str] | None = None) -> list[PrBuilder]:
    """The enabled (target, variant) pairs a PR builds; with ``builder_names``, only those the master
    has: a request for a builder no worker can run would stay pending, and the PR's report with it."""
    pairs = [PrBuilder(t, v, builder_name(t, v)) for t, v in config.pairs()]
    if builder_names is None:
        return pairs
    have = set(builder_names)
    return [b for b in pairs if b.name in have]


def _pr_report(config: Config) -> PrReport | None:
    try:
        policy = load_policy(config.policy)
        baseline = (
            from_json(Path(config.baseline).read_text(encoding="utf-8"), str(config.baseline))
            if (config.baseline and Path(config.baseline).exists())
            else None
        )
    except (ValueError, OSError) as e:
        log.msg(f"bsdkm github: PR reports not judged (statuses say each build's result alone): {e}")
        return None
    return PrReport(policy, baseline, config.known_issues)


def github_services(
    config: Config,
    *,
    env: dict[str, str] | None = None,
    basedir: str | None = None,
    builder_names: Collection[str] | None = None,
    settings: GitHubSettings | None = None,
) -> dict[str, Any]:
    """``settings``: the ``github:`` section already read (one App token cache for the whole master)."""
    if not config.github:
        return {}
    settings = settings or parse_settings(
        config.github,
        env=env if env is not None else dict(os.environ),
        variants=frozenset(config.variants),
        targets=frozenset(config.targets),
    )
    builders = pr_builders(config, builder_names)
    outbox_path = Path(settings.outbox)
    if not outbox_path.is_absolute():
        outbox_path = Path(basedir or os.getcwd()) / outbox_path
    publisher = Publisher(
        GitHubClient(settings.api_url, settings.auth(), spacing=settings.writes), Outbox(outbox_path),
        bot_login=settings.bot_login,
    )
    # Beside the outbox: events answered and not yet acted on (inbox.py).
    inbox = Inbox(outbox_path.with_name(INBOX_FILE))
    controller = PullRequestBuilds(settings, builders, publisher, inbox=inbox)
    reporter = GitHubPrReporter(
        publisher,
        builders,
        _pr_report(config),
        statuses=settings.statuses,
        comment=settings.comment,
        resend_interval_s=settings.resend_interval_s,
        secrets=settings.secrets,
    )
    install_for_buildbot(settings.max_payload_bytes)
    handler = functools.partial(
        BsdkmGitHubEventHandler, controller=controller, max_payload_bytes=settings.max_payload_bytes
    )
    secret = settings.webhook_secret
    # {secret: NAME}: Buildbot's util.Secret, which the hook renders through the master's providers.
    dialect = {"class": handler, "secret": secret.renderable() if isinstance(secret, SecretRef) else secret,
               "strict": True}
    return {
        "change_hook_dialects": {settings.dialect: dialect},
        "services": [controller, reporter],
        "secretsProviders": [],
    }
