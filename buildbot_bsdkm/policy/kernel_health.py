"""Kernel health: the policy gate over kernel-trouble records (``LogResult.kernel``).

Policy (``kernel:`` in a policy file; every key optional)::

    kernel:
      oops: fail           # BUG, Oops, general protection fault, panic, FreeBSD panic / Fatal trap
      warning: fail        # WARNING: ... at ..., a bare KDB backtrace
      soft_lockup: auto    # auto: warn on emulated targets (QEMU TCG), fail on real hardware
      hard_lockup: auto    # also FreeBSD "spin lock ... held too long"
      rcu_stall: auto
      hung_task: auto
      sanitizer: fail      # KASAN, UBSAN, kmemleak
      locking: fail        # lockdep, witness lock order reversal, sleeping with a lock held
      fpu: fail            # FreeBSD FPU-context complaints
      unrelated: warn      # the most a record naming neither the module nor its loader can do
      emulated: [linux-kmod-qemu, freebsd-kmod-qemu]
      targets:             # per-target overrides of the keys above
        freebsd-kmod: {hung_task: warn}

Actions: ``fail`` (a failed check), ``warn`` (a passing check marked as a warning, with its
numbers), ``ignore`` (no check; still shown in the report), ``auto`` (warn where emulated, fail
elsewhere). Every judged record also says whose fault it is: ``real`` (the module's code: it names
the module and is not a timing symptom of emulation) or ``environment``.

Pure: reads the model, returns plain check fields; ``policy/run_gates.py`` turns them into ``Check``\\ s.
The ``kernel`` JUnit suite is ``report/junit.py``'s (``_kernel_cases``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from yaml.nodes import MappingNode

from ..model import KernelEvent, LogResult, RunResult
from ..parsers.kernel_shapes import LABELS
from ..support.yaml_reader import At
from ..targets import emulated_names

# checks.py's CheckKind.KERNEL; a plain string here because the policy package imports this
# module (the kernel: rules), so this one cannot import the policy package back.
CHECK_KIND = "kernel"
ACTIONS = ("fail", "warn", "ignore", "auto")
_CAPS = ("fail", "warn", "ignore")  # what unrelated: may cap a record at
SEVERITY_ORDER = {"ignore": 0, "warn": 1, "fail": 2}

# Record kind -> policy key.
GROUPS: dict[str, str] = {
    "bug": "oops", "oops": "oops", "gpf": "oops", "panic": "oops", "fatal_trap": "oops",
    "warning": "warning", "backtrace": "warning",
    "soft_lockup": "soft_lockup",
    "hard_lockup": "hard_lockup", "spin_lock_held": "hard_lockup",
    "rcu_stall": "rcu_stall",
    "hung_task": "hung_task",
    "kasan": "sanitizer", "ubsan": "sanitizer", "kmemleak": "sanitizer",
    "lockdep": "locking", "lock_order_reversal": "locking", "sleeping_thread_lock": "locking",
    "sleep_with_lock": "locking",
    "fpu": "fpu",
}
POLICY_KEYS = ("oops", "warning", "soft_lockup", "hard_lockup", "rcu_stall", "hung_task", "sanitizer",
               "locking", "fpu")
# Symptoms of time: under an emulator ~100x slower a 0.2 s loop takes 20 s and trips them.
TIMING_KEYS = frozenset({"soft_lockup", "hard_lockup", "rcu_stall", "hung_task"})
DEFAULT_ACTIONS: dict[str, str] = {
    "oops": "fail", "warning": "fail", "soft_lockup": "auto", "hard_lockup": "auto", "rcu_stall": "auto",
    "hung_task": "auto", "sanitizer": "fail", "locking": "fail", "fpu": "fail",
}
# The record's words that name the bug (not its numbers): the failure signature's title.
_TITLE_KEYS = ("reason", "bug", "oops", "lockdep", "trap_message", "check", "lock", "wmesg", "file", "why")
MAX_CHECKS_PER_RUN = 40  # rows per run; every record is judged, those past the cap fold into one row


@dataclass(frozen=True)
class KernelRules:
    actions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ACTIONS))
    unrelated: str = "warn"
    # The targets whose row says they run under QEMU TCG (targets.py), unless a policy names others.
    emulated: tuple[str, ...] = field(default_factory=emulated_names)
    targets: dict[str, dict[str, str]] = field(default_factory=dict)

    def action(self, target: str, key: str) -> str:
        return self.targets.get(target, {}).get(key, self.actions.get(key, "fail"))

    def unrelated_for(self, target: str) -> str:
        return self.targets.get(target, {}).get("unrelated", self.unrelated)


@dataclass(frozen=True)
class Judgement:
    severity: str  # fail | warn | ignore
    classification: str  # real | environment
    why: str


def judge(ev: KernelEvent, target: str, rules: KernelRules) -> Judgement:
    key = GROUPS.get(ev.kind, "warning")
    emulated = target in rules.emulated
    action = rules.action(target, key)
    if action == "auto":
        action = "warn" if emulated else "fail"
    timing_under_emulation = key in TIMING_KEYS and emulated
    if not ev.names_module:
        cap = rules.unrelated_for(target)
        if SEVERITY_ORDER[action] > SEVERITY_ORDER[cap]:
            action = cap
        return Judgement(action, "environment", "names neither the module nor its loader")
    if timing_under_emulation:
        return Judgement(action, "environment", f"{target} is emulated (QEMU TCG, ~100x slower)")
    return Judgement(action, "real", "in the module" if ev.module_frames or _rip_in_module(ev)
                     else f"in the module's loader ({ev.process})")


def _rip_in_module(ev: KernelEvent) -> bool:
    return bool(ev.function and ev.function.endswith("]"))


def describe(ev: KernelEvent) -> str:
    """One line with the numbers: 'soft lockup: CPU#0 stuck 22 s [bsdkm-modload:110] at f [mod]'."""
    parts = [LABELS.get(ev.kind, ev.kind)]
    where = []
    if ev.cpu is not None:
        where.append(f"CPU#{ev.cpu}")
    if ev.duration_s is not None:
        where.append(f"{'blocked' if ev.kind == 'hung_task' else 'stuck'} {ev.duration_s:g} s")
    if ev.process:
        where.append(f"[{ev.process}{':' + str(ev.pid) if ev.pid is not None else ''}]")
    if ev.function:
        where.append(f"at {ev.function}")
    text = parts[0] + (": " + " ".join(where) if where else "")
    reason = ev.detail.get("reason") or ev.detail.get("bug") or ev.detail.get("lockdep")
    if reason and ev.kind not in ("soft_lockup", "rcu_stall", "hung_task"):
        text += f" ({reason})"
    return text


def line_range(ev: KernelEvent) -> str:
    """'line 12' or 'lines 12-40' of a record ('' when its line is unknown)."""
    if ev.line is None:
        return ""
    return f"line {ev.line}" if ev.end_line in (None, ev.line) else f"lines {ev.line}-{ev.end_line}"


def records(run: RunResult) -> Iterator[tuple[LogResult, KernelEvent]]:
    for log in run.logs:
        for ev in log.kernel:
            yield log, ev


def checks(run: RunResult, rules: KernelRules) -> list[dict[str, Any]]:
    """Check fields (name, kind, passed, message, value, unit, detail) for every judged record."""
    out: list[dict[str, Any]] = []
    skipped: list[tuple[LogResult, KernelEvent]] = []
    failing: list[tuple[LogResult, KernelEvent]] = []  # among the skipped
    for log, ev in records(run):
        j = judge(ev, run.target, rules)
        if j.severity == "ignore":
            continue
        if len(out) >= MAX_CHECKS_PER_RUN:
            # Folded, never unjudged: a lockup storm must not hide the KASAN report after it.
            skipped.append((log, ev))
            if j.severity == "fail":
                failing.append((log, ev))
            continue
        verdict = "fails" if j.severity == "fail" else "warning"
        msg = (f"{verdict}: {describe(ev)} — {j.classification} ({j.why}); "
               f"{log.source} {line_range(ev)}")
        out.append({
            "name": f"kernel:{ev.kind}@{ev.line}",
            "kind": CHECK_KIND,
            "passed": j.severity != "fail",
            "message": msg,
            "value": ev.duration_s,
            "unit": "s" if ev.duration_s is not None else None,
            "detail": {
                "severity": j.severity, "classification": j.classification, "record_kind": ev.kind,
                "group": GROUPS.get(ev.kind, "warning"), "function": ev.function,
                "module_frames": ev.module_frames[:5], "process": ev.process, "cpu": ev.cpu,
                "source": log.source, "lines": [ev.line, ev.end_line],
                # what triage's signature reads when only the check, not its run, is at hand
                "title": {k: ev.detail[k] for k in _TITLE_KEYS if k in ev.detail},
                "frames": ev.frames[:8],
            },
        })
    if skipped:
        message = f"{len(skipped)} more kernel records (see the report)"
        if failing:
            log, ev = failing[0]
            message = (f"fails: {len(skipped)} more kernel records, {len(failing)} failing, the first: "
                       f"{describe(ev)}; {log.source} {line_range(ev)}")
        out.append({"name": "kernel:more", "kind": CHECK_KIND, "passed": not failing, "message": message,
                    "detail": {"severity": "fail" if failing else "warn", "records": len(skipped),
                               "failing": len(failing),
                               "failing_kinds": sorted({ev.kind for _log, ev in failing})}})
    return out


def is_warning(check: Any) -> bool:
    """A passing kernel check that is a warning (shown as such in reports and annotations)."""
    return getattr(check, "kind", None) == CHECK_KIND and (getattr(check, "detail", None) or {}).get(
        "severity") == "warn"


def counts(runs: list[RunResult], rules: KernelRules | None = None) -> dict[str, int]:
    """Records by severity over all runs (summary lines): {'fail': n, 'warn': n, 'ignore': n}."""
    rules = rules or KernelRules()
    out = {"fail": 0, "warn": 0, "ignore": 0}
    for run in runs:
        for _log, ev in records(run):
            out[judge(ev, run.target, rules).severity] += 1
    return out


# ----------------------------------------------------------------------------- policy file


def read_rules(at: At) -> KernelRules:
    """``kernel:`` of a policy file (``policy/rules.py`` hands its node; errors name the line)."""
    fields = at.mapping((*POLICY_KEYS, "unrelated", "emulated", "targets"))
    actions = dict(DEFAULT_ACTIONS)
    for name in POLICY_KEYS:
        if name in fields:
            actions[name] = fields[name].choice(ACTIONS)
    unrelated = fields["unrelated"].choice(_CAPS) if "unrelated" in fields else "warn"
    emulated = fields["emulated"].names() if "emulated" in fields else emulated_names()
    targets: dict[str, dict[str, str]] = {}
    if "targets" in fields:
        if not isinstance(fields["targets"].node, MappingNode):
            raise fields["targets"].error("must be a mapping of target name to actions")
        for target, sub in fields["targets"].mapping().items():
            targets[target] = {name: v.choice(ACTIONS if name != "unrelated" else _CAPS)
                               for name, v in sub.mapping((*POLICY_KEYS, "unrelated")).items()}
    return KernelRules(actions=actions, unrelated=unrelated, emulated=tuple(emulated), targets=targets)


# ----------------------------------------------------------------------------- shells' one-liners


def title(check: Any) -> str:
    """An annotation title for a kernel check: 'Kernel soft lockup 101 s at f [mod] [target/variant]'."""
    d = check.detail or {}
    label = LABELS.get(d.get("record_kind", ""), d.get("record_kind") or "trouble")
    numbers = f" {check.value:g} s" if isinstance(check.value, int | float) else ""
    at = f" at {d['function']}" if d.get("function") else ""
    return f"Kernel {label}{numbers}{at} [{check.target}/{check.variant}]"


def summary_line(run: RunResult) -> str | None:
    """Buildbot's step summary piece: 'kernel: 3 soft lockup (max 101 s), 2 RCU stall'; None if clean."""
    found: dict[str, list[KernelEvent]] = {}
    for _log, ev in records(run):
        found.setdefault(ev.kind, []).append(ev)
    if not found:
        return None
    parts = []
    for kind, evs in found.items():
        durations = [e.duration_s for e in evs if e.duration_s is not None]
        longest = f" (max {max(durations):g} s)" if durations else ""
        parts.append(f"{len(evs)} {LABELS.get(kind, kind)}{longest}")
    verdicts = {judge(ev, run.target, KernelRules()).severity for evs in found.values() for ev in evs}
    word = "FAILED" if "fail" in verdicts else "warning"
    return f"kernel {word}: " + ", ".join(parts)


def log_fails(log: LogResult, target: str = "") -> bool:
    """Whether ``log``'s kernel records fail under the default rules (``bsdkm-ci parse``'s exit
    status: no target or policy there, so lockups count as on real hardware)."""
    rules = KernelRules()
    return any(judge(ev, target, rules).severity == "fail" for ev in log.kernel)
