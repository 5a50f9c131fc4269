"""Every failed check of a verdict gets its signature and its triage word, and the policy's say.

Words (``policy_section``'s constants), first that applies:

- ``known``: a known-issue entry covers the run and one of its patterns matches the signature;
- ``flaky``: it did not reproduce on a re-run of the same build, or it comes and goes on the base
  (in some of the recent base builds of that (target, variant, kernel) but not all since it first
  appeared, or not in the latest one);
- ``pre-existing``: the base's latest outcome for that (target, variant, kernel) has it, and so has
  every base build since it first appeared ("since <commit or version>, first seen <date>, in N of
  the last M base builds");
- ``new``: anything else (no base outcome at all included).

``fixed`` is not a failure of this build: a signature of the base's latest outcome that a run of
this build with the same checks no longer shows (``Verdict.triage["fixed"]``).

Base outcomes from another machine (fingerprint) are not used, and a note says so. Pure: the
policy package calls ``classify`` at the end of ``evaluate``; nothing here imports the policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ..model import RunResult
from ..parsers.kernel_shapes import SIGNATURE_HEADS
from ..perf.fingerprint import of_run
from .known import KnownIssue, KnownIssues
from .outcomes import BaseOutcome, check_kernels, kernel_of_source, run_kernels
from .policy_section import FIXED, FLAKY, KNOWN, NEW, PRE_EXISTING, TriageRules
from .selftest_source import migrated_signature, unnamed_form
from .signature import signature

WINDOW = 10  # the last M base builds a pre-existing failure is counted over

Key = tuple[str, str, str]


@dataclass
class TriageInputs:
    """What triage compares a build with. ``base``: base outcomes, oldest first; ``rerun``: per
    (target, variant), the signatures that failed on a re-run of this build."""

    known: KnownIssues | None = None
    base: list[BaseOutcome] = field(default_factory=list)
    rerun: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    window: int = WINDOW
    today: date | None = None  # for a known issue's date (tests); None: today


def failed_signatures(runs: Sequence[RunResult], verdict: Any) -> dict[tuple[str, str], set[str]]:
    """Per (target, variant), the signatures of ``verdict``'s failed checks (a re-run's, for flaky)."""
    by = {(r.target, r.variant): r for r in runs}
    out: dict[tuple[str, str], set[str]] = {k: set() for k in by}
    for c in verdict.checks:
        if not c.passed:
            out.setdefault((c.target, c.variant), set()).add(signature(c, by.get((c.target, c.variant))))
    return out


def signature_kind(sig: str) -> str:
    """The check kind a signature is of: 'panic: ... | f' -> kernel, 'selftest: X' -> selftest."""
    head = sig.split(" | ", 1)[0].split(":", 1)[0]
    if head in SIGNATURE_HEADS.values():
        return "kernel"
    if head in ("build", "configure", "load", "fetch", "unload", "collect", "gate", "incomplete", "complete",
                "selftest_stage", "benchmark_stage"):
        return "complete"
    return head


def classify(verdict: Any, runs: Sequence[RunResult], rules: TriageRules,
             inputs: TriageInputs | None = None) -> None:
    """Set ``signature``, ``triage``, ``triage_note`` and ``blocking`` on every failed check of
    ``verdict`` (in place), its ``triage`` summary (fixed, known issues) and notes.
    ``KnownIssueError`` when a known-issue entry has expired for a version these runs tested."""
    inputs = inputs or TriageInputs()
    known = inputs.known or KnownIssues()
    versions = tuple(sorted({str(r.metadata["wolfssl_version"]) for r in runs
                             if r.metadata.get("wolfssl_version")}))
    known.check_expiry(versions, inputs.today)
    by_run = {(r.target, r.variant): r for r in runs}
    history = _usable_history(inputs.base, runs, verdict)
    matched: dict[str, int] = {}
    failed_here: dict[Key, set[str]] = {}
    for c in verdict.checks:
        if c.passed:
            continue
        run = by_run.get((c.target, c.variant))
        sig = signature(c, run)
        alias = unnamed_form(c, run)  # what a base outcome recorded before the test was named says
        kernels = check_kernels(c, run)
        for k in kernels:
            failed_here.setdefault((c.target, c.variant, k), set()).update({sig, alias} - {None})
        word, note, extra = _word(sig, c.target, c.variant, kernels, known, history, inputs, alias)
        if word == KNOWN:
            matched[extra["known_issue"]] = matched.get(extra["known_issue"], 0) + 1
        c.signature, c.triage, c.triage_note = sig, word, note
        c.blocking = rules.blocks(word)
        if extra:
            c.detail = {**(c.detail or {}), **extra}
    fixed = _fixed(history, failed_here, verdict, by_run)
    issues = _known_report(known, matched, inputs.base, runs)
    verdict.triage = {
        "fixed": fixed,
        "known_issues": issues,
        "base_outcomes": sum(len(v) for v in history.values()),
        "known_issues_file": known.source or None,
    }
    for f in fixed:
        _note(verdict, f"{f['label']}: fixed by this change: {f['signature']} "
                       f"(on the base since {f['since']})")
    for i in issues:
        if i["status"] == "unexpectedly-passed":
            _note(verdict, f"known issue {i['id']} unexpectedly passed: remove it ({i['url']})")
        elif i["status"] == "unused":
            _note(verdict, f"known issue {i['id']} matched no failure of this build or its base (unused)")


def _note(verdict: Any, text: str) -> None:
    if text not in verdict.notes:
        verdict.notes.append(text)


def _word(sig: str, target: str, variant: str, kernels: list[str], known: KnownIssues,
          history: dict[Key, list[BaseOutcome]], inputs: TriageInputs,
          alias: str | None = None) -> tuple[str, str | None, dict]:
    entry = known.match(sig, target, variant, kernels)
    if entry is not None:
        return KNOWN, f"known issue {entry.id}: {entry.reason} ({entry.url}; until {entry.until})", {
            "known_issue": entry.id, "known_url": entry.url}
    rerun = inputs.rerun.get((target, variant))
    if rerun is not None and sig not in rerun:
        return FLAKY, "did not reproduce on the re-run", {}
    for k in kernels:
        window = history.get((target, variant, k), [])[-inputs.window:]
        if not window:
            continue
        hits = [i for i, o in enumerate(window) if sig in o.signatures or (alias and alias in o.signatures)]
        if not hits:
            continue
        n, m = len(hits), len(window)
        first = window[hits[0]]
        steady = hits == list(range(hits[0], m))
        if steady:
            # the unbroken stretch up to the latest base build: when it began, and when first seen
            since = first.since or "an unnamed base build"
            return PRE_EXISTING, (f"since {since}, first seen {first.date or 'on an undated build'}, "
                                  f"in {n} of the last {m} base builds"), {}
        latest = "not in the latest" if hits[-1] != m - 1 else "in the latest"
        return FLAKY, f"comes and goes on the base: in {n} of the last {m} base builds ({latest})", {}
    return NEW, None, {}


def _usable_history(base: Iterable[BaseOutcome], runs: Sequence[RunResult], verdict: Any
                    ) -> dict[Key, list[BaseOutcome]]:
    """Base outcomes per (target, variant, kernel), oldest first, without another machine's."""
    fps = {(r.target, r.variant): of_run(r.metadata) for r in runs}
    out: dict[Key, list[BaseOutcome]] = {}
    foreign: dict[str, int] = {}
    for o in base:
        _migrate(o, verdict)
        mine = fps.get((o.target, o.variant))
        if mine and o.fingerprint and o.fingerprint != mine:
            foreign[o.label] = foreign.get(o.label, 0) + 1
            continue
        out.setdefault(o.key, []).append(o)
    for label, n in sorted(foreign.items()):
        _note(verdict, f"{label}: {n} base outcome(s) from another machine fingerprint are not used for "
                       "pre-existing failures")
    return out


def _migrate(o: BaseOutcome, verdict: Any) -> None:
    """Signatures recorded before self-test failures were named, in today's form (with a note)."""
    for i, sig in enumerate(o.signatures):
        new = migrated_signature(sig)
        if new is not None:
            o.signatures[i] = new
            _note(verdict, f"{o.label}: base outcome signature '{sig}' was recorded before self-test "
                           f"failures were named: read as '{new}'")


def _ran_same(kind: str, run: RunResult, kernel: str, verdict: Any) -> bool:
    """Whether this build's run could have shown a failure of ``kind`` on ``kernel`` again."""
    logs = [log for log in run.logs if not kernel or kernel_of_source(log.source) in (kernel, "")]
    if kind == "kernel":  # the boot got as far as the module's self-test (where a panic would be)
        return any(log.complete or log.tests or log.selftest_summary is not None for log in logs)
    if kind == "complete":
        return bool(logs) and run.failure is None
    return any(c.kind == kind and c.target == run.target and c.variant == run.variant for c in verdict.checks)


def _fixed(history: dict[Key, list[BaseOutcome]], failed_here: dict[Key, set[str]], verdict: Any,
           by_run: dict[tuple[str, str], RunResult]) -> list[dict[str, Any]]:
    out = []
    for (target, variant, kernel), outcomes in sorted(history.items()):
        run = by_run.get((target, variant))
        if run is None or (kernel and kernel not in run_kernels(run)):
            continue
        latest = outcomes[-1]
        for sig in latest.signatures:
            if sig in failed_here.get((target, variant, kernel), set()):
                continue
            if not _ran_same(signature_kind(sig), run, kernel, verdict):
                continue
            out.append({"signature": sig, "target": target, "variant": variant, "kernel": kernel,
                        "label": latest.label, "triage": FIXED, "since": latest.since or "the base"})
    return out


def _known_report(known: KnownIssues, matched: dict[str, int], base: Sequence[BaseOutcome],
                  runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    out = []
    for e in known.entries:
        n = matched.get(e.id, 0)
        if n:
            status = "matched"
        elif _seen_on_base(e, base) and _scope_ran(e, runs):
            status = "unexpectedly-passed"
        else:
            status = "unused"
        out.append({**e.to_dict(), "status": status, "failures": n})
    return out


def _seen_on_base(e: KnownIssue, base: Sequence[BaseOutcome]) -> bool:
    return any(e.covers(o.target, o.variant, o.kernel) and any(e.matches(s) for s in o.signatures)
               for o in base)


def _scope_ran(e: KnownIssue, runs: Sequence[RunResult]) -> bool:
    return any(e.covers(r.target, r.variant, k) and r.failure is None for r in runs for k in run_kernels(r))
