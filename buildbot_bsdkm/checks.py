"""The gate's output: one ``Check`` per gate applied to one run, and the ``Verdict`` over them.

Pure records beside ``model.py``: no YAML, no measurement, no import of the package. The policy
builds them, the triage and the pipeline read them, and the shells read them or their JSON
(``to_dict``/``from_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class CheckKind(StrEnum):
    """What a check gates; a ``str`` so the JSON (``to_dict``) carries the same words as before."""

    SELFTEST = "selftest"
    COMPLETE = "complete"
    BENCHMARK = "benchmark"  # a benchmark item that printed "Benchmark X failed: <code>"
    FLOOR = "floor"
    REGRESSION = "regression"
    SPEEDUP = "speedup"
    REQUIRED = "required"
    CROSSOVER = "crossover"
    OFFLOAD = "offload"  # the registered driver AF_ALG / the crypto framework used (policy/paths.py)
    KERNEL = "kernel"  # kernel-trouble records (kernel_health.py)
    INSTRUCTIONS = "instructions"  # counted instructions of a fixed workload, 1 vs 1 (instruction_gates.py)


# The older names, kept for the modules that import them.
KIND_SELFTEST = CheckKind.SELFTEST
KIND_COMPLETE = CheckKind.COMPLETE
KIND_BENCHMARK = CheckKind.BENCHMARK
KIND_FLOOR = CheckKind.FLOOR
KIND_REGRESSION = CheckKind.REGRESSION
KIND_SPEEDUP = CheckKind.SPEEDUP
KIND_REQUIRED = CheckKind.REQUIRED
KIND_CROSSOVER = CheckKind.CROSSOVER

# The overall verdict words (``Verdict.status``): the one rule every shell shows and exits by.
STATUS_PASS = "pass"
STATUS_FAIL = "fail"
STATUS_INCONCLUSIVE = "inconclusive"
STATUS_MARKS = {STATUS_PASS: "✅", STATUS_FAIL: "❌", STATUS_INCONCLUSIVE: "⚠️"}


def status_of_summary(line: str) -> str | None:
    """The overall verdict word a ``Verdict.summary()`` line opens with (``INCONCLUSIVE: ...`` →
    ``inconclusive``), or None for any other line: how a shell that has only the printed summary
    reads the core's word instead of deciding one."""
    head, sep, _ = line.partition(":")
    word = head.strip().lower()
    return word if sep and word in STATUS_MARKS else None

GEOMEAN_PREFIX = "geomean:"  # a regression gate over the geometric mean: "geomean:<pattern>"
COMPLETE_PREFIX = "complete:"  # a log's completeness: "complete:<log source>"


@dataclass
class Check:
    """One gate applied to one run (``variant`` on ``target``)."""

    variant: str
    target: str
    name: str
    kind: CheckKind
    passed: bool
    message: str
    value: float | None = None
    unit: str | None = None
    baseline: float | None = None
    delta_pct: float | None = None
    threshold: float | None = None
    error: bool = False  # the input was unusable (incomplete log, lost stage), not a measured failure
    metric: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    item: int | None = None  # index into the run's ``benchmarks`` when the check is about one item
    # Triage of a failed check (buildbot_bsdkm/triage): its stable signature, its word (new,
    # pre-existing, known, flaky, fixed), the why ("since 5.9.2, first seen ..."), and whether the
    # triage policy lets it fail the verdict.
    signature: str | None = None
    triage: str | None = None
    triage_note: str | None = None
    blocking: bool = True

    def __post_init__(self) -> None:
        self.kind = CheckKind(self.kind)  # ValueError for a kind no gate makes

    @property
    def run_label(self) -> str:
        return f"{self.target}/{self.variant}"

    @property
    def is_geomean(self) -> bool:
        """A regression gate over the geometric mean of many items, not one item."""
        return self.kind == CheckKind.REGRESSION and self.name.startswith(GEOMEAN_PREFIX)

    @property
    def log_source(self) -> str | None:
        """The log a completeness check is about (None for any other check)."""
        if self.kind == CheckKind.COMPLETE and self.name.startswith(COMPLETE_PREFIX):
            return self.name.removeprefix(COMPLETE_PREFIX)
        return None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["kind"] = self.kind.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        """``to_dict`` back; ValueError naming the problem when ``d`` is not a check."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a check is a mapping, not {type(d).__name__}")
        try:
            return cls(**d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"malformed check: {e}") from None


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    policy_source: str = "<default>"
    perf: list[dict[str, Any]] = field(default_factory=list)  # learned-limit gate, one entry per run
    triage: dict[str, Any] = field(default_factory=dict)  # triage/classify_checks.py: fixed, known issues
    # The policy's ``perf.inconclusive: fail``: unjudged gated items make the verdict unacceptable.
    inconclusive_fails: bool = False
    # Rows whose implied clock (rate x cycles) disagrees with the rest of their log (perf/clock.py),
    # found with or without a baseline: {target, variant, source, name, line, clock_hz, log_hz}.
    mis_timed: list[dict[str, Any]] = field(default_factory=list)
    # Runs this machine could not do, each {target, variant, reason}, and parts of runs that did run
    # (with "part": "debug kernel"): in the headline, never a check.
    not_run: list[dict[str, str]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No failure that blocks: a failure the triage policy only warns about does not fail."""
        return not self.blocking_failures

    @property
    def blocking_failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed and c.blocking]

    @property
    def non_blocking_failures(self) -> list[Check]:
        """Failed checks that triage let pass (known, pre-existing, flaky by policy)."""
        return [c for c in self.checks if not c.passed and not c.blocking]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.error and not c.passed]

    @property
    def regressions(self) -> list[Check]:
        return [c for c in self.failures if c.kind == CheckKind.REGRESSION]

    def of_kind(self, kind: CheckKind | str) -> list[Check]:
        return [c for c in self.checks if c.kind == kind]

    @property
    def inconclusive(self) -> list[Check]:
        """Gated items the gate could not judge (too few repeats, no spread, missing on a side, an
        instruction count flagged as not cleared): neither passed nor failed, whatever their check's
        ``passed`` says."""
        gated = (CheckKind.REGRESSION, CheckKind.INSTRUCTIONS)
        return [c for c in self.checks if c.passed and c.kind in gated
                and isinstance(c.detail, Mapping) and c.detail.get("verdict") == STATUS_INCONCLUSIVE]

    @property
    def status(self) -> str:
        """The overall verdict word: ``fail`` (a blocking failure, ``passed`` is False), else
        ``inconclusive`` (a gated item went unjudged), else ``pass``. Every shell shows this one."""
        if not self.passed:
            return STATUS_FAIL
        return STATUS_INCONCLUSIVE if self.inconclusive else STATUS_PASS

    @property
    def accepted(self) -> bool:
        """What the exit status and a commit status follow: no blocking failure, and no unjudged
        item when the policy says ``perf.inconclusive: fail``."""
        return self.passed and not (self.inconclusive_fails and self.inconclusive)

    @property
    def mark(self) -> str:
        return STATUS_MARKS[self.status]

    def headline(self) -> str:
        """The mark and the summary: what a console, report or comment opens with."""
        return f"{self.mark} {self.summary()}"

    def mis_timed_row(self, target: str, variant: str, name: str) -> dict[str, Any] | None:
        """The ``mis_timed`` entry of that run's row, or None."""
        return next((m for m in self.mis_timed
                     if (m.get("target"), m.get("variant"), m.get("name")) == (target, variant, name)), None)

    def _inconclusive_summary(self) -> str:
        unjudged = len(self.inconclusive)
        judged = len(self.checks) - unjudged
        waived = self.non_blocking_failures
        text = (f"INCONCLUSIVE: {unjudged} gated item(s) not judged, {judged - len(waived)} of "
                f"{len(self.checks)} checks passed")
        if waived:
            text += f", {len(waived)} failed but do not block"
        return text + ("; the policy fails unjudged items" if self.inconclusive_fails else "")

    def summary(self) -> str:
        return self._checks_summary() + self._not_run_summary()

    def _not_run_summary(self) -> str:
        """``; 2 runs not run: no FreeBSD release set reachable (freebsd.mirror)``, one part a reason;
        a part of a run that ran: ``; debug kernel not run (freebsd-kmod-qemu/p): cannot fetch ...``."""
        whole = [e for e in self.not_run if not e.get("part")]
        text = ""
        if whole:
            reasons: dict[str, int] = {}
            for entry in whole:
                reasons[entry["reason"]] = reasons.get(entry["reason"], 0) + 1
            count = len(whole)
            parts = ("; ".join(reasons) if len(reasons) == 1
                     else "; ".join(f"{n}: {r}" for r, n in reasons.items()))
            text = f"; {count} run{'s' if count != 1 else ''} not run: {parts}"
        runs: dict[tuple[str, str], list[str]] = {}
        for entry in self.not_run:
            if entry.get("part"):
                label = f"{entry['target']}/{entry['variant']}"
                runs.setdefault((entry["part"], entry["reason"]), []).append(label)
        for (part, reason), labels in runs.items():
            where = labels[0] if len(labels) == 1 else f"{len(labels)} runs"
            text += f"; {part} not run ({where}): {reason}"
        return text

    def _checks_summary(self) -> str:
        if self.passed and self.inconclusive:  # never a PASS over items that went unjudged
            return self._inconclusive_summary()
        waived = self.non_blocking_failures
        if self.passed:
            if waived:
                words = sorted({c.triage or "waived" for c in waived})
                return (f"PASS: {len(self.checks) - len(waived)} of {len(self.checks)} checks passed, "
                        f"{len(waived)} failed but do not block ({', '.join(words)})")
            n = len(self.checks)
            return f"PASS: {n} check{'' if n == 1 else 's'} passed"
        blocking = self.blocking_failures
        kinds = sorted({c.kind for c in blocking})
        text = f"FAIL: {len(blocking)} of {len(self.checks)} checks failed ({', '.join(kinds)})"
        return text + (f"; {len(waived)} more do not block" if waived else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "verdict": self.status,
            "inconclusive": len(self.inconclusive),
            "inconclusive_fails": self.inconclusive_fails,
            "mis_timed": [dict(m) for m in self.mis_timed],
            "summary": self.summary(),
            "policy": self.policy_source,
            "notes": list(self.notes),
            "checks": [c.to_dict() for c in self.checks],
            "perf": list(self.perf),
            "triage": dict(self.triage),
            "not_run": [dict(n) for n in self.not_run],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """``to_dict`` back (``passed`` and ``summary`` are derived again); ValueError when malformed."""
        if not isinstance(d, Mapping) or not isinstance(d.get("checks"), list):
            raise ValueError("not a verdict document (no 'checks' list)")
        perf = d.get("perf") or []
        if not isinstance(perf, list):
            raise ValueError("verdict 'perf' is not a list")
        return cls(
            checks=[Check.from_dict(c) for c in d["checks"]],
            notes=[str(n) for n in d.get("notes") or []],
            policy_source=str(d.get("policy", "<default>")),
            perf=[dict(p) for p in perf if isinstance(p, Mapping)],
            triage=dict(d["triage"]) if isinstance(d.get("triage"), Mapping) else {},
            inconclusive_fails=d.get("inconclusive_fails") is True,
            mis_timed=[dict(m) for m in d.get("mis_timed") or [] if isinstance(m, Mapping)],
            not_run=[{k: str(v) for k, v in n.items()} for n in d.get("not_run") or []
                     if isinstance(n, Mapping) and isinstance(n.get("reason"), str)],
        )
