"""What a FreeBSD boot's console says: ``kldinit``'s marker table, the module's frames in a panic's
backtrace, and the boot's ``ModuleLoadOutcome``. The console is read by ``parsers.freebsd_console``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from ....parsers.freebsd_console import ConsoleFacts
from ....parsers.freebsd_console import read_console as read_freebsd_console
from ....parsers.guest_markers import MarkerTable
from ....parsers.kernel_trouble import freebsd_machinery
from ...runtime.console_lines import console_lines
from ...runtime.loading import ModuleLoadOutcome
from ...runtime.proc import CONSOLE_FLOOD, Watched
from ...runtime.stage_error import StageError
from .boot import Boot
from .worker import find_toolchain

MIB = 1 << 20

# kldinit's markers start their line and end with this boot's nonce, which kldinit takes out of the
# kernel environment before the module loads: a module printing a marker (a FreeBSD kernel's
# printf has no prefix) cannot match it. Steps in a fixed order: nothing after ``poweroff``, and no
# unload or kldstat after a load that failed.
MARKERS = MarkerTable(
    facts={"kldstat": r"kldstat .*", "listed": r"(still|not) listed after unload"},
    last="poweroff",
    after_load=("unload ", "kldstat ", "still listed", "not listed"),
)


def read_console(text: str | Iterable[str], nonce: str | None = None) -> ConsoleFacts:
    """What a console says by kldinit's markers (``parsers.freebsd_console``)."""
    return read_freebsd_console(text, MARKERS, nonce)


def module_symbols(ko: Path) -> set[str]:
    """Functions the module defines (``llvm-nm --defined-only``): tells its frames from the kernel's."""
    try:
        tools = find_toolchain("load")
        out = subprocess.run([str(tools.bin_dir / "llvm-nm"), "--defined-only", str(ko)],
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (StageError, OSError, subprocess.TimeoutExpired):
        return set()
    return {parts[-1] for parts in (ln.split() for ln in out.splitlines()) if len(parts) >= 2}


def module_frames(backtrace: Sequence[str], symbols: set[str]) -> list[str]:
    """The module's frames, innermost first: by the module's own symbols when known, else the
    frames below the panic machinery (the kernel's startup frames stay at the end)."""
    if symbols:
        return [f for f in backtrace if f.split("+", 1)[0] in symbols]
    frames = list(backtrace)
    while frames and freebsd_machinery(frames[0].split("+", 1)[0]):
        frames.pop(0)
    return frames


def outcome_from_boot(boot: Boot, console: Path, run: Watched, symbols: set[str],
                      extra_logs: dict[str, Path], nonce: str | None = None) -> ModuleLoadOutcome:
    """One boot's outcome: load/unload status from the markers (kldload) or the kernel lines (preload)."""
    facts = read_console(console_lines(console), nonce if boot.mode == "kldload" else None)
    notes: list[str] = []
    if boot.mode == "kldload":
        load_rc, unload_rc = facts.load_rc, facts.unload_rc
        if nonce and (facts.first_marker or "").startswith("no nonce"):
            # kldinit says so before the module is loaded, so the module cannot have printed it.
            notes.append(f"the boot had no nonce ({facts.first_marker}): kldinit's markers cannot be "
                         "told from the module's")
        if facts.load_errno is not None:
            notes.append(f"kldload failed: errno {facts.load_errno}")
        if facts.unload_errno is not None:
            notes.append(f"kldunload failed: errno {facts.unload_errno}")
        if facts.still_listed:
            notes.append("unload: still-listed")
    else:
        load_rc = 0 if facts.loaded_line else None
        unload_rc = None  # a preloaded module stays loaded: nothing unloads it
        if run.stopped == "benchmark-at-preload":
            # Its init got past the self-test; the benchmark would wait forever for the clock.
            load_rc = 0 if facts.selftest_passed and not facts.panic else load_rc
            notes.append("benchmark not run: preloaded, the module's clock (getnanouptime) has not started")
    if facts.mod_load_errno is not None and boot.mode == "preload":
        # The kernel's own word that the preloaded module's init failed, whatever the module printed.
        load_rc = 1 if load_rc in (None, 0) else load_rc
        notes.append(f"the module's MOD_LOAD failed: errno {facts.mod_load_errno}")
    if facts.link_errors:
        load_rc = 1 if load_rc in (None, 0) else load_rc
        notes.append(f"module did not link: {facts.link_errors[0]}")
    flood = run.log_bytes if run.stopped == CONSOLE_FLOOD else None
    if flood is not None:
        notes.append(f"console flood: {flood / MIB:.1f} MiB; the guest was stopped at the console cap")
    if facts.imitations:
        notes.append(f"{facts.imitations} console line(s) imitate the harness's markers and were ignored")
    if facts.panic:
        frames = module_frames(facts.backtrace, symbols) or facts.backtrace
        where = f" in {frames[0].split('+', 1)[0]}" if frames else ""
        notes.append(f"{boot.kind} kernel panic{where}: {facts.panic}")
        load_rc = None if facts.load_rc is None or boot.mode == "preload" else load_rc
    if facts.mountroot and boot.mode == "kldload":
        notes.append("the kernel could not mount the FAT root (mountroot> prompt): init never ran")
    timed_out = run.timed_out
    stage = None
    if timed_out:
        stage = "unload" if facts.seen("unload begin") and facts.unload_rc is None else "load"
        notes.append(f"VM killed at the time limit after {run.seconds:.0f} s; last marker: "
                     f"{facts.markers[-1] if facts.markers else None!r}")
    elif not facts.panic and load_rc is None and not facts.link_errors and flood is None:
        notes.append(f"{boot.kind} kernel: the module's load never finished on the console "
                     f"(QEMU ended: {run.stopped or f'exit {run.exit_code}'})")
    return ModuleLoadOutcome(
        kernel_log=console,
        load_rc=load_rc,
        unload_rc=unload_rc,
        timed_out=timed_out,
        timed_out_stage=stage,
        duration_s=round(run.seconds, 2),
        loaded_seen=bool(facts.kldstat) or facts.preloaded,
        stages={"vm": round(run.seconds, 2)},
        notes=notes,
        extra_logs=dict(extra_logs),
        load_errno=facts.load_errno,
        unload_errno=facts.unload_errno,
        console_flood_bytes=flood,
    )
