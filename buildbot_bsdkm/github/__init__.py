"""GitHub integration: signed webhooks in, commit statuses and one edited PR comment out.

Pure rules live in ``webhook_signature``, ``events``, ``triggers``, ``trust``, ``coalesce`` and ``texts`` (the
GitHub Action uses them too); Buildbot glue lives in ``hook``, ``controller`` (with its event queue,
``pr_queue``, and buildset manager, ``buildsets``), ``reporters`` and ``services``. The PR's report is
the core's (``report/pull_request.py``); ``pr_sinks`` deliver it through the publisher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config.bsdkm_yml import Config


def github_services(config: Config, **kwargs: Any) -> dict[str, Any]:
    """What ``master.cfg`` adds for GitHub; see ``services.github_services``.

    """
    # Buildbot is an extra: the pure modules (the GitHub Action uses them) must import without it.
    from .services import github_services as build

    return build(config, **kwargs)
