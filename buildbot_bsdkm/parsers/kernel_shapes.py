"""The kinds of kernel trouble: each header line's shape, and what the kind is called.

``SHAPES`` are the headers ``kernel_trouble.KernelTroubleScanner`` starts (or continues) a record at,
with the kernel source each was checked against (docs/kernel-messages.md); ``KINDS`` the one table
of what a record's ``kind`` is called, where users read it: reports, check messages, annotations,
summary lines, and the failure signatures triage records.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KindWords:
    """What a record of one kind is called."""

    label: str  # reports, check messages, annotations, summary lines: "kernel panic"
    # A failure signature's head, where it is not the label. Signatures are recorded in base outcomes
    # and matched by known-issue patterns (``panic: malloc*``), so a signature's words never change.
    signature: str = ""

    @property
    def head(self) -> str:
        return self.signature or self.label


KINDS: dict[str, KindWords] = {
    "panic": KindWords("kernel panic", signature="panic"),
    "bug": KindWords("kernel BUG"),
    "oops": KindWords("Oops"),
    "gpf": KindWords("general protection fault"),
    "warning": KindWords("kernel WARNING", signature="WARNING"),
    "fatal_trap": KindWords("fatal trap"),
    "backtrace": KindWords("KDB backtrace"),
    "soft_lockup": KindWords("soft lockup"),
    "hard_lockup": KindWords("hard lockup"),
    "spin_lock_held": KindWords("spin lock held too long"),
    "rcu_stall": KindWords("RCU stall"),
    "hung_task": KindWords("hung task"),
    "kasan": KindWords("KASAN"),
    "ubsan": KindWords("UBSAN"),
    "kmemleak": KindWords("kmemleak"),
    "lockdep": KindWords("lockdep"),
    "lock_order_reversal": KindWords("lock order reversal"),
    "sleeping_thread_lock": KindWords("sleeping thread owns a non-sleepable lock"),
    "sleep_with_lock": KindWords("sleeping with a lock held"),
    "fpu": KindWords("FPU context"),
}
LABELS: dict[str, str] = {kind: words.label for kind, words in KINDS.items()}
SIGNATURE_HEADS: dict[str, str] = {kind: words.head for kind, words in KINDS.items()}


def label(kind: str) -> str:
    """What reports call a record of ``kind`` (the kind itself for one the table does not know)."""
    return LABELS.get(kind, kind)


_SUBSYS = re.compile(r"^(?:watchdog|rcu|NMI watchdog|kmemleak|kasan|ubsan): ")
# Tried only where a name's run of characters starts (leading digits are no part of a symbol):
# a start inside the run would scan it again, quadratic in a long line.
_FUNC_AT = re.compile(r"(?<![\w.$])\d*(?P<func>[A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+"
                      r"(?: \[(?P<mod>\w+)\])?")


Header = Callable[[re.Match[str]], dict[str, Any]]


@dataclass(frozen=True)
class Shape:
    kind: str
    os: str
    pattern: re.Pattern[str]
    fields: Header = lambda m: {}  # noqa: E731 - a default for shapes without fields
    merges: tuple[str, ...] = ()  # kinds of the open record this header continues rather than ends


def _shape(kind: str, os: str, rx: str, fields: Header | None = None, merges: tuple[str, ...] = ()) -> Shape:
    return Shape(kind, os, re.compile(rx), fields or (lambda m: {}), merges)


def _soft(m: re.Match[str]) -> dict[str, Any]:
    return {"cpu": int(m["cpu"]), "duration_s": float(m["secs"]), "process": m["comm"], "pid": int(m["pid"])}


def _hung(m: re.Match[str]) -> dict[str, Any]:
    return {"process": m["comm"], "pid": int(m["pid"]), "duration_s": float(m["secs"])}


def _func(m: re.Match[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    at = _FUNC_AT.search(m["at"] or "") if "at" in m.re.groupindex else None
    if at:
        out["function"] = at["func"] + (f" [{at['mod']}]" if at["mod"] else "")
    if "cpu" in m.re.groupindex and m["cpu"]:
        out["cpu"] = int(m["cpu"])
    if "pid" in m.re.groupindex and m["pid"]:
        out["pid"] = int(m["pid"])
    return out


def _lockup(m: re.Match[str]) -> dict[str, Any]:
    return {"cpu": int(m["cpu"])}


def _bsd_trap(m: re.Match[str]) -> dict[str, Any]:
    return {"detail": {"trap": int(m["trap"]), "trap_message": m["what"], "mode": m["mode"]}}


def _bsd_sleeping(m: re.Match[str]) -> dict[str, Any]:
    return {"pid": int(m["pid"]), "detail": {"tid": int(m["tid"])}}


def _bsd_spin(m: re.Match[str]) -> dict[str, Any]:
    return {"detail": {"lock": m["name"], "owner_tid": int(m["tid"])}}


def _bsd_sleep_on(m: re.Match[str]) -> dict[str, Any]:
    return {"detail": {"wmesg": m["wmesg"]}}


_PANIC_BODY = ("fatal_trap", "sleeping_thread_lock", "spin_lock_held", "backtrace", "lock_order_reversal")

# Order matters: the first shape whose pattern matches wins (specific BUG: shapes before the
# generic one). Patterns run on the line without its printk stamp and subsystem prefix.
SHAPES: tuple[Shape, ...] = (
    # --- Linux: kernel/watchdog.c, kernel/watchdog_perf.c (hard lockups)
    _shape("soft_lockup", "linux",
           r"^BUG: soft lockup - CPU#(?P<cpu>\d+) stuck for (?P<secs>\d+)s! \[(?P<comm>.+):(?P<pid>"
           r"\d+)\]", _soft),
    _shape("hard_lockup", "linux", r"^(?:CPU\d+: )?Watchdog detected hard LOCKUP on cpu (?P<cpu>\d+"
                                   r")", _lockup),
    # --- kernel/rcu/tree_stall.h
    _shape("rcu_stall", "linux", r"^INFO: (?P<flavour>\S+) self-detected stall on CPU",
           lambda m: {"detail": {"flavour": m["flavour"], "self_detected": True}}),
    _shape("rcu_stall", "linux", r"^INFO: (?P<flavour>\S+) detected stalls? on CPUs/tasks:",
           lambda m: {"detail": {"flavour": m["flavour"], "self_detected": False}}),
    # --- kernel/hung_task.c
    _shape("hung_task", "linux", r"^INFO: task (?P<comm>.+):(?P<pid>\d+) blocked for more than (?P<s"
                                 r"ecs>\d+) seconds",
           _hung),
    # --- mm/kasan/report.c, lib/ubsan.c, mm/kmemleak.c
    _shape("kasan", "linux", r"^BUG: KASAN: (?P<what>\S+) in (?P<at>\S+(?: \[\w+\])?)",
           lambda m: {**_func(m), "detail": {"bug": m["what"]}}),
    _shape("ubsan", "linux", r"^UBSAN: (?P<what>.+?) in (?P<file>\S+):(?P<lno>\d+):\d+",
           lambda m: {"detail": {"check": m["what"], "file": m["file"], "file_line": int(m["lno"])}}),
    _shape("kmemleak", "linux", r"^(?P<n>\d+) new suspected memory leaks",
           lambda m: {"detail": {"leaks": int(m["n"])}}),
    # --- kernel/locking/lockdep.c, kernel/sched/core.c (might_sleep, scheduling while atomic)
    _shape("lockdep", "linux",
           r"^WARNING: (?P<what>possible circular locking dependency|possible recursive locking|inco"
           r"nsistent lock state"
           r"|possible irq lock inversion dependency|suspicious RCU usage|bad unlock balance|held lock freed"
           r"|lock held when returning to user space)",
           lambda m: {"detail": {"lockdep": m["what"]}}),
    _shape("lockdep", "linux", r"^BUG: sleeping function called from invalid context at (?P<file>\S+)",
           lambda m: {"detail": {"lockdep": "sleeping function called from invalid context",
                                 "file": m["file"]}}),
    _shape("lockdep", "linux", r"^BUG: scheduling while atomic: (?P<comm>.+)/(?P<pid>\d+)/",
           lambda m: {"process": m["comm"], "pid": int(m["pid"]),
                      "detail": {"lockdep": "scheduling while atomic"}}),
    # --- kernel/panic.c (__warn), lib/bug.c, arch/x86/mm/fault.c, arch/x86/kernel/dumpstack.c + traps.c
    _shape("warning", "linux", r"^WARNING: CPU: (?P<cpu>\d+) PID: (?P<pid>\d+) at (?P<at>.+)$", _func),
    _shape("gpf", "linux", r"^(?:Oops: )?general protection fault(?P<why>[^:]*)?: (?P<code>[0-9a-f]{"
                           r"4}) \[#(?P<n>\d+)\]",
           lambda m: {"detail": {"code": m["code"], "die_counter": int(m["n"]),
                                 "why": (m["why"] or "").strip(", ")}},
           merges=("bug",)),
    _shape("bug", "linux", r"^kernel BUG at (?P<file>\S+):(?P<lno>\d+)!",
           lambda m: {"detail": {"file": m["file"], "file_line": int(m["lno"])}}),
    _shape("bug", "linux", r"^BUG: (?P<what>.+)$", lambda m: {"detail": {"bug": m["what"]}}),
    _shape("oops", "linux", r"^Oops: (?P<what>.*)$", lambda m: {"detail": {"oops": m["what"]}},
           merges=("bug",)),
    _shape("panic", "linux", r"^Kernel panic - not syncing: (?P<why>.*)$", lambda m: {"detail": {"re"
                             r"ason": m["why"]}}),
    # --- FreeBSD: kern/kern_shutdown.c (vpanic), amd64/amd64/trap.c (trap_fatal)
    _shape("fatal_trap", "freebsd", r"^Fatal trap (?P<trap>\d+): (?P<what>.+) while in (?P<mode>\w+)"
                                    r" mode", _bsd_trap),
    _shape("fpu", "freebsd", r"^panic: (?P<why>.*(?:fpu_kern_\w+|fpudna|fpu_\w+:).*)$",
           lambda m: {"detail": {"reason": m["why"], "panic": True}}, merges=_PANIC_BODY),
    _shape("sleep_with_lock", "freebsd", r"^panic: (?P<why>.*sleeping with \"(?P<lock>[^\"]+)\" locked.*)$",
           lambda m: {"detail": {"reason": m["why"], "lock": m["lock"], "panic": True}}, merges=_PANIC_BODY),
    _shape("panic", "freebsd", r"^panic: (?P<why>.*)$", lambda m: {"detail": {"reason": m["why"]}},
           merges=_PANIC_BODY),
    # --- kern/subr_witness.c, kern/subr_turnstile.c, kern/kern_mutex.c, amd64/amd64/fpu.c
    _shape("lock_order_reversal", "freebsd", r"^(?:witness: )?lock order reversal:(?P<what>.*)$",
           lambda m: {"detail": {"variant": m["what"].strip(" ()")} if m["what"].strip() else {}}),
    _shape("sleeping_thread_lock", "freebsd",
           r"^Sleeping thread \(tid (?P<tid>\d+), pid (?P<pid>\d+)\) owns a non-sleepable lock",
           _bsd_sleeping),
    _shape("spin_lock_held", "freebsd",
           r"^spin lock (?P<addr>0x[0-9a-f]+) \((?P<name>.+)\) held by (?P<owner>0x[0-9a-f]+) \(tid "
           r"(?P<tid>\d+)\) "
           r"too long", _bsd_spin),
    _shape("sleep_with_lock", "freebsd",
           r"^(?:witness: )?(?:\S+:\d+: )?Sleeping on \"(?P<wmesg>[^\"]*)\" with the following non-s"
           r"leepable locks held",
           _bsd_sleep_on),
    _shape("sleep_with_lock", "freebsd", r"^(?P<why>.*sleeping with \"(?P<lock>[^\"]+)\" locked.*)$",
           lambda m: {"detail": {"lock": m["lock"]}}),
    _shape("fpu", "freebsd", r"^(?!\S+\(\) at )(?P<why>(?:fpu_kern_\w+|fpudna|fpu_\w+)[:(].*)$",
           lambda m: {"detail": {"reason": m["why"]}}),
    _shape("backtrace", "freebsd", r"^KDB: stack backtrace:", merges=_PANIC_BODY),
)
# (hint, shape): a substring every line of the shape holds, tested before its regex.
HINTED_SHAPES = tuple(
    (next(w for w in ("BUG", "general protection", "Oops", "WARNING", "LOCKUP", "stall", "blocked for more",
                        "UBSAN", "leaks", "Kernel panic", "panic: ", "Fatal trap", "lock order reversal",
                        "Sleeping thread", "too long", "Sleeping on", "sleeping with", "fpu", "KDB: stack")
            if w in s.pattern.pattern), s)
    for s in SHAPES
)


def strip_subsys(text: str) -> str:
    """``text`` without a subsystem's prefix (``watchdog: ``, ``rcu: ``)."""
    m = _SUBSYS.match(text)
    return text[m.end():] if m else text


def header(text: str) -> tuple[Shape | None, re.Match[str] | None]:
    """The first shape whose header ``text`` (without its printk stamp) is, with its match."""
    line = strip_subsys(text.strip())
    for hint, shape in HINTED_SHAPES:
        if hint in line:
            m = shape.pattern.match(line)
            if m is not None:
                return shape, m
    return None, None
