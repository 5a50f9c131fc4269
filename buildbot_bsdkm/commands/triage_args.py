"""``--config F`` and ``--base-results B.json ...`` of ``junit`` and ``compare``: what triage reads.

Known issues come from the config's ``known_issues``; base outcomes from results documents of base
builds, oldest first, as ``parse --json`` or ``run`` writes them (``summary.json``, ``results.json``),
judged with the same policy when a document carries no verdict.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from ..config.bsdkm_yml import ConfigError, load_config
from ..model import ModelError, RunResult, load_document
from ..policy import Policy, Verdict, evaluate
from ..triage.classify_checks import TriageInputs
from ..triage.known import KnownIssueError, KnownIssues
from ..triage.outcomes import BaseOutcome, outcomes_from_document
from .exit_codes import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="bsdkm.yml whose known_issues mark failures as known")
    p.add_argument("--base-results", nargs="+", metavar="B.json", default=[],
                   help="results documents of base-branch builds, oldest first (pre-existing, flaky, fixed)")


def known_issues(path: str | None) -> KnownIssues:
    if not path:
        return KnownIssues()
    try:
        return load_config(path).known_issues
    except ConfigError as e:
        raise UsageError(f"bad config: {e}") from None


def base_outcomes(paths: list[str], judge: Callable[[list[RunResult]], Verdict]) -> list[BaseOutcome]:
    out: list[BaseOutcome] = []
    for path in paths:
        p = Path(path)
        try:
            doc = load_document(p.read_text(encoding="utf-8"), path)
        except FileNotFoundError:
            raise UsageError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: cannot be read: {e}") from None
        except ModelError as e:  # nesting Python's decoder cannot follow, NaN, huge integers
            raise UsageError(str(e)) from None
        except ValueError as e:
            raise UsageError(f"{path}: not a JSON results document: {e}") from None
        if not isinstance(doc, dict):
            raise UsageError(f"{path}: not a results document (a JSON object with 'runs')")
        when = datetime.fromtimestamp(p.stat().st_mtime, UTC).replace(microsecond=0)
        try:
            out += outcomes_from_document(doc, path, judge, date=doc.get("date") or when.isoformat())
        except ValueError as e:
            raise UsageError(str(e)) from None
    return out


def triage_inputs(args: argparse.Namespace, policy: Policy) -> TriageInputs:
    known = known_issues(getattr(args, "config", None))

    def judge(runs: list[RunResult]) -> Verdict:
        with triage_errors():
            return evaluate(runs, policy, triage=TriageInputs())

    paths = list(getattr(args, "base_results", None) or [])
    return TriageInputs(known=known, base=base_outcomes(paths, judge))


@contextmanager
def triage_errors() -> Iterator[None]:
    """An expired known-issue entry (found once the runs say which version they tested): exit 2."""
    try:
        yield
    except KnownIssueError as e:
        raise UsageError(f"bad known issue: {e}") from None
