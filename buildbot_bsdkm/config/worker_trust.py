"""Which worker may run which build, and which builds may record history.

On ``freebsd-kmod`` a PR's module is loaded into the worker's own kernel: once loaded it can stay
and forge every later result on that machine. So a worker carries a trust level in its tags:

- ``trusted``: runs base-branch, release and history-recording builds, and PRs of trusted authors;
  never a PR of an untrusted author (unless it is also ``vm-reset``);
- ``untrusted``: runs PR builds, whoever wrote them; never a build whose results become history;
- ``vm-reset``: a VM reset to a clean image after each build, where nothing a PR loaded survives:
  it may run untrusted authors' PRs, and with ``trusted`` everything.

A worker with none of these tags keeps the behaviour of a master that names no levels (every build
anywhere), and the master says so when it starts.

``may_record_history`` is the one rule every recording obeys (the perf history and the base-branch
outcomes the triage reads): a build of the configured source, not a PR, not a forced build of a
revision someone typed, on a worker that is not ``untrusted``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..contract import PR_NUMBER_PROPERTY, TAGS_PROPERTY

TRUSTED, UNTRUSTED, VM_RESET = "trusted", "untrusted", "vm-reset"
TRUST_TAGS = frozenset({TRUSTED, UNTRUSTED, VM_RESET})
FORCE_SCHEDULER = "force"  # master_config's ForceScheduler


def has_level(tags: Iterable[str]) -> bool:
    return bool(TRUST_TAGS & set(tags))


def may_run(tags: Iterable[str], *, pr: bool, author_trusted: bool) -> bool:
    """Whether a worker with ``tags`` may take a build (a PR build, and whether its author is trusted)."""
    have = set(tags)
    if not has_level(have):
        return True  # no levels named: as before
    if not pr:  # base branch, release, nightly, forced: results may become history
        return TRUSTED in have and UNTRUSTED not in have
    if author_trusted:
        return True
    return UNTRUSTED in have or VM_RESET in have


def why_not_recorded(get: Callable[[str], Any], worker_tags: Iterable[str]) -> str | None:
    """Why a build's results must not become history (None: they may). ``get`` reads a build property."""
    if get(PR_NUMBER_PROPERTY) not in (None, ""):
        return "a PR build"
    if get("scheduler") == FORCE_SCHEDULER and any(get(k) not in (None, "") for k in
                                                   ("revision", "branch", "repository")):
        # The force form's fields are whatever the forcer typed: the history would be labelled
        # with it while the build fetched the configured source.
        return "a forced build of a typed revision"
    if UNTRUSTED in set(worker_tags):
        return "built on an untrusted worker"
    return None


def may_record_history(step: Any) -> bool:
    """The one rule for recording a build's results as base-branch history (perf and triage)."""
    tags = step.getProperty(TAGS_PROPERTY) or []
    return why_not_recorded(step.getProperty, tags if isinstance(tags, list | tuple) else []) is None
