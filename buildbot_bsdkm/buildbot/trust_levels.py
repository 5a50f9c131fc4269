"""Buildbot's side of worker trust levels (``worker_trust``): which worker a build request may start on.

``retrying_build.can_start_build`` asks ``worker_may_take`` before a request starts on a worker,
so a PR of an untrusted author never lands on a ``trusted`` worker whose results become history,
and a base-branch or release build never on an ``untrusted`` one.
"""

from __future__ import annotations

from typing import Any

from twisted.python import log

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
    if not bare:
        return None
    text = (f"bsdkm: worker(s) {', '.join(bare)} name no trust level ({', '.join(sorted(TRUST_TAGS))}): "
            "they run every build, PRs of untrusted authors and base-branch builds alike")
    log.msg(text)
    return text
