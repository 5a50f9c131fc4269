"""Where judged results came from when no job of the base repository produced them.

A fork's PR is tested by its own ``pull_request`` run: its workflow, its action steps and its code
are the PR's, so its results artifact says whatever the PR wants. The ``workflow_run`` companion
judges them again with the base's config and policy, but that proves nothing when the PR changes
what produced or judges them: a workflow, an action, ``bsdkm.yml``, the policy or the known
issues. Such a PR's statuses are ``error``, never ``success``; every status and comment made from a
fork's artifact says where it came from. GitHub names what a PR changes (compare
``base...head``); nothing of the PR is checked out to find out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...config.bsdkm_yml import Config
from ...report.blocks import md_code
from ...report.commit_status import CommitStatus, short_description

# Paths whose change alters what runs or judges a PR, wherever the config points.
JUDGE_DIRS = (".github/workflows/", ".github/actions/")
ACTION_FILES = ("action.yml", "action.yaml")
COMPARE_FILES_LIMIT = 300  # GitHub lists at most this many files of a comparison
RETEST_HINT = "a maintainer's retest runs the base's workflow"
FORK_RUN = "fork run"


@dataclass(frozen=True)
class JudgePaths:
    """What judges a PR's results, as paths in the repository (relative, with ``/``)."""

    files: frozenset[str] = frozenset()
    dirs: tuple[str, ...] = JUDGE_DIRS

    @classmethod
    def of(cls, config: Config | None, workspace: Path) -> JudgePaths:
        """The fixed places plus the config file and the files it names (policy, baseline, known issues)."""
        found = set()
        if config is not None:
            named = [config.path, config.policy, config.baseline, Path(config.known_issues.source or ".")]
            found = {rel for p in named if p is not None and (rel := _in_repo(p, workspace))}
        return cls(frozenset(found))

    def judges(self, path: str) -> bool:
        return (path in self.files or path.startswith(self.dirs)
                or path.rsplit("/", 1)[-1] in ACTION_FILES)


def _in_repo(path: Path, workspace: Path) -> str | None:
    """``path`` relative to the repository's checkout, or None when it lies outside it."""
    try:
        rel = os.path.relpath(path.resolve(), workspace.resolve())
    except ValueError:
        return None
    if rel == "." or rel.startswith(".."):
        return None
    return Path(rel).as_posix()


def changed_judges(files: Sequence[Any], judges: JudgePaths) -> list[str]:
    """What of ``judges`` a comparison's ``files`` change; a list GitHub may have cut counts as all."""
    if len(files) >= COMPARE_FILES_LIMIT:
        return [f"{len(files)}+ files (GitHub lists {COMPARE_FILES_LIMIT}: cannot tell which)"]
    found: list[str] = []
    for entry in files:
        if not isinstance(entry, dict):
            continue
        for key in ("filename", "previous_filename"):
            name = entry.get(key)
            if isinstance(name, str) and judges.judges(name) and name not in found:
                found.append(name)
    return found


@dataclass(frozen=True)
class Provenance:
    """Whether results come from a fork's own run, and what of their judges that PR changes."""

    fork: bool = False
    changed: tuple[str, ...] = ()

    @classmethod
    def from_args(cls, fork_run: str | None, judges_changed: str | None) -> Provenance:
        changed = tuple(line.strip() for line in (judges_changed or "").splitlines() if line.strip())
        fork = (fork_run or "").strip().lower() == "true"
        return cls(fork or bool(changed), changed)

    @property
    def judged_by_pr(self) -> bool:
        return bool(self.changed)

    def _named(self) -> str:
        more = f" +{len(self.changed) - 1}" if len(self.changed) > 1 else ""
        return f"{self.changed[0]}{more}"

    def headline(self) -> str:
        return f"ERROR: the PR changes what judges it ({self._named()}): {RETEST_HINT}"

    def states(self, states: Iterable[CommitStatus]) -> list[CommitStatus]:
        """The statuses as posted: ``error`` when the PR changes its judges; a fork's run says so."""
        if self.judged_by_pr:
            text = f"{FORK_RUN}: the PR changes what judges it ({self._named()}): {RETEST_HINT}"
            return [replace(s, state="error", description=short_description(text)) for s in states]
        if self.fork:
            return [replace(s, description=short_description(f"{FORK_RUN}: {s.description}")) for s in states]
        return list(states)

    def banner(self) -> str:
        """The Markdown that opens the report of a fork's results ("" for the base's own jobs)."""
        if self.judged_by_pr:
            names = ", ".join(md_code(n) for n in self.changed)
            return ("> [!CAUTION]\n"
                    f"> **Not judged: this PR changes what judges it** ({names}). These results come from "
                    "the fork's own `pull_request` run, which ran the PR's version of those files, so they "
                    "prove nothing and every status is `error`. A maintainer's `retest this please <sha>` "
                    "runs the base's workflow.\n\n")
        if self.fork:
            return ("> [!NOTE]\n"
                    "> These results come from the fork's own `pull_request` run: the base's configuration "
                    "and policy judged them, but the workflow and the code that produced them were the PR's. "
                    "A maintainer's `retest this please <sha>` runs the base's workflow.\n\n")
        return ""
