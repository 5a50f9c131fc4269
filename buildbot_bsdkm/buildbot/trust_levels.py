"""Buildbot's side of worker trust levels (``worker_trust``): which worker a build request may start on.

``retrying_build.can_start_build`` asks ``worker_may_take`` before a request starts on a worker,
so a PR of an untrusted author never lands on a ``trusted`` worker whose results become history,
and a base-branch or release build never on an ``untrusted`` one.
"""

from __future__ import annotations

from typing import Any

from ..config.worker_trust import TRUST_TAGS, has_level, may_run
from ..contract import PR_AUTHOR_TRUSTED_PROPERTY, PR_NUMBER_PROPERTY, TAGS_PROPERTY


def _tags(worker: Any) -> list[str]:
    props = getattr(worker, "properties", None)
    tags = props.getProperty(TAGS_PROPERTY, []) if props is not None else []
    return list(tags) if isinstance(tags, list | tuple) else []


def _request_property(request: Any, name: str) -> Any:
    props = getattr(request, "properties", None)
    return props.getProperty(name) if props is not None else None


def worker_may_take(wfb: Any, request: Any) -> bool:
    """Whether the worker behind ``wfb`` may run ``request`` at its trust level."""
    if request is None:
        return True
    pr = _request_property(request, PR_NUMBER_PROPERTY) not in (None, "")
    author_trusted = _request_property(request, PR_AUTHOR_TRUSTED_PROPERTY) is True
    return may_run(_tags(wfb.worker), pr=pr, author_trusted=author_trusted)


def warn_without_levels(names_and_tags: list[tuple[str, tuple[str, ...]]]) -> str | None:
    """The start-up warning for workers that name no trust level (None when every one does)."""
    bare = [name for name, tags in names_and_tags if not has_level(tags)]
    return f"bsdkm: {no_level_sentence(bare)}" if bare else None


def no_level_sentence(bare: list[str]) -> str:
    """Which workers name no trust level, what that means, and where to name one."""
    *first, last = sorted(TRUST_TAGS)
    levels = f"{', '.join(first)} or {last}"
    one = len(bare) == 1
    who = f"worker {bare[0]} has" if one else f"workers {', '.join(bare)} have"
    return (f"{who} no trust level ({levels}) in {'its' if one else 'their'} tags, so "
            f"{'it runs' if one else 'they run'} every build: base-branch builds and pull requests of "
            f"untrusted authors alike. Name one in bsdkm.yml's workers.{bare[0] if one else '<name>'}.tags "
            "(docs: security model, trust levels).")
