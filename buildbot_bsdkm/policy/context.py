"""The evaluation in progress: one policy over runs (and a baseline, a history), the checks so far."""

from __future__ import annotations

from typing import Any

from ..checks import Check, CheckKind, Verdict
from ..model import RunResult
from .rules import Policy, policy_label


class Evaluation:
    """What every gate reads (runs, policy, baseline, history) and the verdict it adds checks to."""

    def __init__(self, runs: list[RunResult], policy: Policy, baseline: list[RunResult] | None,
                 history: list[RunResult] | None = None) -> None:
        self.runs = runs
        self.policy = policy
        self.baseline = baseline
        self.history = history or []
        # Before a non-perf target's baseline and history are dropped (evaluate): instruction counts
        # measure code, not the emulator, so policy/instruction_gates.py compares them for every target.
        self.counted_baseline: list[RunResult] | None = baseline
        self.counted_history: list[RunResult] = self.history
        self.verdict = Verdict(policy_source=policy.label or policy_label(policy.source),
                               inconclusive_fails=policy.inconclusive == "fail")

    def add(self, run: RunResult, name: str, kind: CheckKind | str, passed: bool, message: str,
            **kw: Any) -> None:
        check = Check(run.variant, run.target, name, CheckKind(kind), passed, message, **kw)
        self.verdict.checks.append(check)

    def note(self, text: str) -> None:
        if text not in self.verdict.notes:
            self.verdict.notes.append(text)
