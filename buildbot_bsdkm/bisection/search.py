"""Bisection: which commit of a linear history broke a check or made an item slower.

Pure search logic, apart from any build: a ``Runner`` builds and runs (or measures) one commit and
says ``good``, ``bad`` or ``skip`` (``Probe``); ``bisect`` decides which commit to ask about next
and what the answers prove. ``commands/bisect_cmd.py`` gives it the real runner (the pipeline's
stages on a git source, ``pipeline/jobs/bisect.py``); tests give it a fake one.

The rules, as ``git bisect`` and the CI systems that name culprits apply them:

* The ends are what the user says they are, but the bad end is tested first: a failure that does
  not show at the bad end cannot be bisected, and saying so costs one build, not a whole search.
* ``skip`` (a commit that does not build for another reason, an infrastructure failure that
  outlived its retries, a measurement that stayed inconclusive) is never counted as good or bad:
  the next commit asked about is the untested one nearest the middle, and when only skipped
  commits separate the last good from the first bad, the result names all of them.
* A failure seen to be flaky is ``good`` only after ``flaky_k`` passing runs; one failing run is
  ``bad``.
* The culprit is verified before it is named: it shows the failure (or regression) ``k`` more
  times and its parent passes ``k`` times (runs of the builds already made, not new builds).
  Anything else is "could not decide", with what contradicted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class Outcome(StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


class Purpose(StrEnum):
    """Why a commit is run: the bad end's check, a search step, or verifying the culprit/its parent."""

    END = "end"
    SEARCH = "search"
    VERIFY = "verify"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str = ""
    author: str = ""
    date: str = ""

    @property
    def short(self) -> str:
        return self.sha[:12]

    def to_dict(self) -> dict[str, str]:
        return {"sha": self.sha, "subject": self.subject, "author": self.author, "date": self.date}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Commit:
        return cls(str(d["sha"]), str(d.get("subject", "")), str(d.get("author", "")), str(d.get("date", "")))


@dataclass
class Probe:
    """One run of one commit: its outcome and why."""

    outcome: Outcome
    reason: str = ""  # the failing check, the gate's line, "does not build: ...", "inconclusive ..."
    rounds: int = 0  # perf: rounds a side measured; failures: 0
    seconds: float = 0.0  # wall time of this run, its build included
    built: bool = True  # a new build was made (False: a build made earlier was run again)
    build_seconds: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)  # the check, or the change with its interval
    extra_builds: int = 0  # builds made for this run besides the commit's own (a perf bisection's good end)

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.value, "reason": self.reason, "rounds": self.rounds,
                "seconds": round(self.seconds, 2), "built": self.built,
                "build_seconds": round(self.build_seconds, 2), "extra_builds": self.extra_builds,
                "evidence": dict(self.evidence)}


class Runner(Protocol):
    def __call__(self, commit: Commit, purpose: Purpose) -> Probe: ...


@dataclass(frozen=True)
class BisectSettings:
    """How much evidence a verdict needs (the policy's ``bisect:``; the issue's defaults)."""

    k: int = 1  # verification runs of the culprit and of its parent for a failure not seen to be flaky
    flaky_k: int = 3  # the same for a flaky one, and the passing runs that make a step "good"
    flaky: bool = False  # the failure has been seen to be flaky (triage, or the user says so)
    max_steps: int = 200  # a safety net: no history here needs this many runs

    def __post_init__(self) -> None:
        for name in ("k", "flaky_k", "max_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"bisect.{name}: must be an integer of at least 1, got {value!r}")

    @property
    def verify_runs(self) -> int:
        return self.flaky_k if self.flaky else self.k

    @property
    def runs_for_good(self) -> int:
        return self.flaky_k if self.flaky else 1


@dataclass
class Step:
    commit: Commit
    index: int  # position in the history (0 = the good end)
    purpose: Purpose
    probe: Probe

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit.to_dict(), "index": self.index, "purpose": self.purpose.value,
                **self.probe.to_dict()}


@dataclass
class BisectResult:
    decided: bool
    culprit: Commit | None
    parent: Commit | None
    why: str  # decided: what proves it; else why not
    remaining: list[Commit]  # the commits the culprit is still among ("could not decide")
    confidence: str  # high | medium | none
    steps: list[Step]
    commits: int  # commits after the good end
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def builds(self) -> int:
        return sum(int(s.probe.built) + s.probe.extra_builds for s in self.steps)

    @property
    def build_seconds(self) -> float:
        return sum(s.probe.build_seconds for s in self.steps)

    @property
    def seconds(self) -> float:
        return sum(s.probe.seconds for s in self.steps)

    @property
    def verification(self) -> list[Step]:
        return [s for s in self.steps if s.purpose == Purpose.VERIFY]

    @property
    def status(self) -> str:
        return "culprit" if self.decided else "could not decide"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "decided": self.decided,
            "culprit": self.culprit.to_dict() if self.culprit else None,
            "parent": self.parent.to_dict() if self.parent else None,
            "why": self.why,
            "remaining": [c.to_dict() for c in self.remaining],
            "confidence": self.confidence,
            "commits": self.commits,
            "builds": self.builds,
            "build_limit": build_limit(self.commits),
            "build_seconds": round(self.build_seconds, 2),
            "seconds": round(self.seconds, 2),
            "evidence": dict(self.evidence),
            "steps": [s.to_dict() for s in self.steps],
        }


def build_limit(commits: int) -> int:
    """⌈log₂N⌉ + 3: the search, the bad end, the good end and one spare (the issue's target)."""
    return max(0, (max(1, commits) - 1).bit_length()) + 3


class _Search:
    def __init__(self, history: Sequence[Commit], run: Runner, settings: BisectSettings) -> None:
        self.history = list(history)
        self.run = run
        self.settings = settings
        self.steps: list[Step] = []
        self.results: dict[int, Outcome] = {}
        self.reasons: dict[int, str] = {}

    def ask(self, index: int, purpose: Purpose) -> Probe:
        if len(self.steps) >= self.settings.max_steps:
            raise _OutOfSteps()
        probe = self.run(self.history[index], purpose)
        self.steps.append(Step(self.history[index], index, purpose, probe))
        return probe

    def judge(self, index: int, purpose: Purpose) -> Outcome:
        """One commit's outcome: bad on a failing run, good after ``runs_for_good`` passing runs."""
        for _ in range(self.settings.runs_for_good):
            probe = self.ask(index, purpose)
            self.reasons[index] = probe.reason
            if probe.outcome != Outcome.GOOD:
                self.results[index] = probe.outcome
                return probe.outcome
        self.results[index] = Outcome.GOOD
        return Outcome.GOOD


class _OutOfSteps(Exception):
    pass


def next_index(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The untested commit between ``lo`` (good) and ``hi`` (bad) nearest their middle, or None.

    Ties go to the older side, as ``git bisect`` does after a skip.
    """
    mid = (lo + hi) // 2
    for distance in range(hi - lo):
        for i in (mid - distance, mid + distance):
            if lo < i < hi and i not in skipped:
                return i
    return None


def bisect(history: Sequence[Commit], run: Runner, settings: BisectSettings | None = None,
           what: str = "the failure") -> BisectResult:
    """Search ``history`` (oldest first: ``history[0]`` the good end, ``history[-1]`` the bad end).

    ``what`` names the failure or regression in the messages. Never raises for what the runs say:
    every way the search can end is a ``BisectResult``.
    """
    settings = settings or BisectSettings()
    if len(history) < 2:
        raise ValueError("a bisection needs a good and a bad commit (the history has fewer than 2)")
    s = _Search(history, run, settings)
    n = len(history) - 1

    def undecided(why: str, remaining: Sequence[int]) -> BisectResult:
        return BisectResult(False, None, None, why, [history[i] for i in remaining], "none", s.steps, n)

    try:
        end = s.judge(n, Purpose.END)
        if end != Outcome.BAD:
            shown = "does not build or could not be measured" if end == Outcome.SKIP else "does not show it"
            return undecided(f"the bad end {history[n].short} {shown} ({s.reasons.get(n) or end.value}): "
                             f"{what} cannot be bisected in this range", range(1, n + 1))
        lo, hi = 0, n
        skipped: set[int] = set()
        while (i := next_index(lo, hi, skipped)) is not None:
            outcome = s.judge(i, Purpose.SEARCH)
            if outcome == Outcome.GOOD:
                lo = i
            elif outcome == Outcome.BAD:
                hi = i
            else:
                skipped.add(i)
        between = [i for i in range(lo + 1, hi) if i in skipped]
        if between:
            names = ", ".join(f"{history[i].short} ({s.reasons.get(i) or 'skipped'})" for i in between)
            return undecided(f"{what} came with one of {len(between) + 1} commits: the ones before "
                             f"{history[hi].short} could not be tested: {names}", [*between, hi])
        return _verify(s, lo, hi, what)
    except _OutOfSteps:
        return undecided(f"stopped after {settings.max_steps} runs (bisect.max_steps)", range(1, n + 1))


def _verify(s: _Search, parent: int, culprit: int, what: str) -> BisectResult:
    """``k`` more failing runs of the culprit, ``k`` passing runs of its parent; else undecided."""
    history, k = s.history, s.settings.verify_runs
    n = len(history) - 1
    # A flaky failure may pass a run of the culprit: up to 3k runs to see it k times.
    bad_runs: list[Probe] = []
    for _ in range(3 * k if s.settings.flaky else k):
        bad_runs.append(s.ask(culprit, Purpose.VERIFY))
        if sum(r.outcome == Outcome.BAD for r in bad_runs) >= k:
            break
    good_runs = [s.ask(parent, Purpose.VERIFY) for _ in range(k)]
    c, p = history[culprit], history[parent]
    seen = sum(r.outcome == Outcome.BAD for r in bad_runs)
    not_bad = [r for r in bad_runs if r.outcome != Outcome.BAD] if seen < k else []
    not_good = [r for r in good_runs if r.outcome != Outcome.GOOD]
    if not_bad or not_good:
        why = []
        if not_bad:
            why.append(f"{c.short} showed {what} again in {seen} of {len(bad_runs)} run(s), not {k} "
                       f"({not_bad[0].outcome.value}: {not_bad[0].reason or '-'})")
        if not_good:
            why.append(f"its parent {p.short} was not good in {len(not_good)} of {k} run(s) "
                       f"({not_good[0].outcome.value}: {not_good[0].reason or '-'})")
        hint = "" if s.settings.flaky else "; flaky? bisect again with the flaky setting"
        return BisectResult(False, None, None, "verification failed: " + "; ".join(why) + hint,
                            [p, c] if parent > 0 else [c], "none", s.steps, n)
    first_bad = next(st for st in s.steps if st.index == culprit and st.probe.outcome == Outcome.BAD)
    # Every run of the culprit failing and of its parent passing is as sure as a test can make it;
    # a flaky failure that passed some runs of the culprit leaves room for chance.
    confidence = "high" if len(bad_runs) == seen and not s.settings.flaky else "medium"
    why = (f"{c.short} shows {what} ({first_bad.probe.reason or 'bad'}), reproduced {k} more time(s)"
           f"{f' in {len(bad_runs)} run(s)' if len(bad_runs) > seen else ''}; "
           f"its parent {p.short} passed {k} time(s)")
    evidence = {**first_bad.probe.evidence, "reason": first_bad.probe.reason,
                "verification": [r.evidence for r in bad_runs if r.evidence]}
    return BisectResult(True, c, p, why, [c], confidence, s.steps, n, evidence)

