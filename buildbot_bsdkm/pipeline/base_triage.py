"""What ``stage gate`` triages a PR build's failures against: the base branch's outcomes.

Two sources, both optional:

- ``base-outcomes.json`` beside the run (``contract.BASE_OUTCOMES_FILE``): the outcomes the Buildbot
  master recorded for earlier base-branch builds of this (target, variant), oldest first;
- the base built and loaded next to the head (``stage gate --base-out DIR``): a target that
  measures no base builds one for correctness when nothing is recorded yet; its run is judged by
  the same policy and its outcome is the newest.

A file that cannot be read is a note, never a failure: the gate then triages without it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..contract import BASE_OUTCOMES_FILE, BASE_OUTCOMES_USED_FILE
from ..model import RunResult
from ..policy import Policy, evaluate
from ..triage.outcomes import BaseOutcome, outcomes_from_document, outcomes_of


def recorded(run_dir: Path) -> tuple[list[BaseOutcome], str | None]:
    """The master's recorded base outcomes next to the run, with a note when unusable."""
    path = run_dir / BASE_OUTCOMES_FILE
    if not path.is_file():
        return [], None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        return outcomes_from_document(doc, str(path)), None
    except (OSError, ValueError) as e:
        return [], f"base outcomes {path} unusable, not used for triage: {e}"


def of_base_run(base: RunResult | None, policy: Policy) -> list[BaseOutcome]:
    """The outcome of the base built next to the head, judged by the head's policy."""
    if base is None:
        return []
    return outcomes_of([base], evaluate([base], policy))


def of_runs(bases: list[RunResult], policy: Policy) -> list[BaseOutcome]:
    """The outcomes of base runs measured next to their heads (``bsdkm-ci run --base-*``)."""
    return outcomes_of(bases, evaluate(bases, policy)) if bases else []


def gather(run_dir: Path, base: RunResult | None, policy: Policy) -> tuple[list[BaseOutcome], list[str]]:
    """Every base outcome the gate has for this run, oldest first, and notes on where they came from."""
    outcomes, note = recorded(run_dir)
    notes = [note] if note else []
    built = of_base_run(base, policy)
    if built:
        what = "; ".join(f"{o.label}: {o.verdict}" for o in built)
        notes.append(f"base built and loaded next to the head, its failures are the base's ({what})")
    return outcomes + built, notes


def keep_used(run_dir: Path, outcomes: list[BaseOutcome]) -> None:
    """What the gate triaged against, for the Buildbot master's PR comment (none: no file)."""
    path = run_dir / BASE_OUTCOMES_USED_FILE
    if outcomes:
        path.write_text(json.dumps({"base_outcomes": [o.to_dict() for o in outcomes]}), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)
