"""Gate runs with the policy and write the output layout (docs/architecture.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.bsdkm_yml import Config
from ..contract import BASE_OUTCOMES_FILE, BASE_OUTCOMES_USED_FILE, BaselineError
from ..model import RunResult, from_json, run_to_dict
from ..perf.confirm import Remeasure, settle, to_confirm
from ..policy import Policy, Verdict, evaluate, load_policy
from ..policy.pairing import baseline_for
from ..report.charts import speedup_svg
from ..report.html_page import html_report
from ..report.junit import write_junit
from ..report.markdown import markdown_report
from ..triage.classify_checks import TriageInputs
from ..triage.known import KnownIssues
from ..triage.outcomes import BaseOutcome, outcomes_from_document, outcomes_of


def load_baseline(path: Path | None) -> list[RunResult] | None:
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BaselineError(f"{path}: baseline file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(f"{path}: cannot read baseline: {e}") from None
    try:
        return from_json(text, str(path))
    except ValueError as e:
        raise BaselineError(str(e)) from None


@dataclass(frozen=True)
class GateInputs:
    """The policy and the configured baseline, read once and handed to every gate of a run."""

    policy: Policy
    baseline: list[RunResult] | None
    known: KnownIssues = field(default_factory=KnownIssues)  # the config's known_issues (triage)

    @classmethod
    def load(cls, config: Config, *, read_baseline: bool = True) -> GateInputs:
        """Read them up front, so a typo fails in a second, not after the builds.

        ``read_baseline=False``: the gate has base runs of its own; the configured file is not read.
        """
        config_dir = config.path.parent if config.path is not None else None
        return cls(load_policy(config.policy, config_dir=config_dir),
                   load_baseline(config.baseline) if read_baseline else None, config.known_issues)



def gate_runs(inputs: GateInputs, runs: list[RunResult], baseline: list[RunResult] | None = None,
              history: list[RunResult] | None = None, *,
              base_outcomes: list[BaseOutcome] | None = None) -> Verdict:
    """The policy (default when the config names none) over ``runs``, against the baseline if any.

    ``baseline``: base runs measured next to ``runs`` (``bsdkm-ci run --base-*``); they take the
    place of the config's baseline file. ``base_outcomes``: what the base branch's builds did,
    oldest first, for the triage (a failure already there is pre-existing).
    """
    base = baseline_for(baseline, inputs.baseline, per_pair=False)
    triage = TriageInputs(known=inputs.known, base=list(base_outcomes or []))
    return evaluate(runs, inputs.policy, base, history, triage=triage)


def write_run_outputs(run_dir: Path, run: RunResult, verdict: Verdict) -> Path:

    path = run_dir / "junit.xml"
    write_junit([run], verdict, path)
    return path


def write_combined(
    out_dir: Path,
    runs: list[RunResult],
    verdict: Verdict,
    *,
    retries: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """summary.json, report.md, report.html, speedup.svg and a combined junit.xml."""

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        name: out_dir / name
        for name in ("summary.json", "report.md", "report.html", "speedup.svg", "junit.xml")
    }
    summary = {
        "schema": 1,
        "runs": [run_to_dict(r) for r in runs],
        "verdict": verdict.to_dict(),
        "retries": list(retries or []),
        **dict(extra or {}),
    }
    paths["summary.json"].write_text(json.dumps(summary, indent=2, default=str))
    paths["report.md"].write_text(markdown_report(runs, verdict, retries=retries))
    paths["report.html"].write_text(html_report(runs, verdict, retries=retries))
    paths["speedup.svg"].write_text(speedup_svg(verdict.checks))
    write_junit(runs, verdict, paths["junit.xml"])
    return paths


def confirm(verdict: Verdict, policy: Policy, remeasure: Remeasure | None,
            history: Sequence[RunResult] | None = None) -> Verdict:
    """``verdict`` with every learned regression confirmed (still failed) or withdrawn (passed).

    Changes ``verdict`` in place and returns it; does nothing unless the policy asks to confirm.
    """
    regressed = to_confirm(verdict)
    if not policy.perf.confirm or not regressed:
        return verdict
    if remeasure is None:
        verdict.notes.append(f"confirm: {len(regressed)} regression(s) not re-measured (nothing can "
                             "measure base and head again here): they stand unconfirmed")
        return verdict
    pairs = sorted({(c.target, c.variant) for c in regressed})
    heads, bases = remeasure(pairs)
    measured = {(r.target, r.variant) for r in heads} & {(r.target, r.variant) for r in bases}
    heads = [r for r in heads if (r.target, r.variant) in measured]
    bases = [r for r in bases if (r.target, r.variant) in measured]
    rerun = evaluate(heads, policy, bases, list(history or [])) if measured else Verdict()
    return settle(verdict, regressed, rerun, pairs, measured)


# --------------------------------------------------------------------------- base outcomes
# What ``stage gate`` triages a PR build's failures against: the base branch's outcomes the Buildbot
# master recorded for earlier base-branch builds of this (target, variant), oldest first, written
# beside the run as ``base-outcomes.json`` (``contract.BASE_OUTCOMES_FILE``). The base built and
# loaded next to the head (``stage gate --base-out DIR``) is only named in a note: the PR's
# configure, make and module ran on that machine first, so its failures could be the PR's doing and
# would make them "pre-existing". A file that cannot be read is a note, never a failure: the gate
# then triages without it.


def recorded_base_outcomes(run_dir: Path) -> tuple[list[BaseOutcome], str | None]:
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


def base_run_outcomes(base: RunResult | None, policy: Policy) -> list[BaseOutcome]:
    """The outcome of the base built next to the head, judged by the head's policy."""
    if base is None:
        return []
    return outcomes_of([base], evaluate([base], policy))


def base_outcomes_of(bases: list[RunResult], policy: Policy) -> list[BaseOutcome]:
    """The outcomes of base runs measured next to their heads (``bsdkm-ci run --base-*``)."""
    return outcomes_of(bases, evaluate(bases, policy)) if bases else []


def gather_base_outcomes(run_dir: Path, base: RunResult | None,
                         policy: Policy) -> tuple[list[BaseOutcome], list[str]]:
    """The base outcomes the gate triages against (the master's recorded ones, oldest first), and
    notes on where they came from and on the base built next to the head, which is not used."""
    outcomes, note = recorded_base_outcomes(run_dir)
    notes = [note] if note else []
    built = base_run_outcomes(base, policy)
    if built:
        what = "; ".join(f"{o.label}: {o.verdict}" for o in built)
        notes.append(f"base built and loaded next to the head ({what}), beside the PR's code: not used "
                     "for triage, which takes the master's recorded base outcomes only")
    return outcomes, notes


def keep_used_base_outcomes(run_dir: Path, outcomes: list[BaseOutcome]) -> None:
    """What the gate triaged against, for the Buildbot master's PR comment (none: no file)."""
    path = run_dir / BASE_OUTCOMES_USED_FILE
    if outcomes:
        path.write_text(json.dumps({"base_outcomes": [o.to_dict() for o in outcomes]}), encoding="utf-8")
    else:
        path.unlink(missing_ok=True)
