"""Gate runs with the policy and write the output layout (docs/architecture.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.bsdkm_yml import Config
from ..model import RunResult, from_json, run_to_dict
from ..policy import Policy, Verdict, evaluate, load_policy
from ..policy.pairing import baseline_for
from ..report.junit import write_junit
from ..report.verdict import html_report, markdown_report, speedup_svg
from ..triage.classify import TriageInputs
from ..triage.known import KnownIssues
from ..triage.outcomes import BaseOutcome


class BaselineError(ValueError):
    """The configured baseline cannot be read; the message names the file."""


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
        return cls(load_policy(config.policy), load_baseline(config.baseline) if read_baseline else None,
                   config.known_issues)


# The base runs a ``run --base-*`` measured next to the head, beside its summary.json: the Action's
# report job merges them and judges the merged heads against them (commands/action/results.py).
BASE_RUNS_JSON = "base-runs.json"


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
