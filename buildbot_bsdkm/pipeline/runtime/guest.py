"""One QEMU guest, whatever its OS: how it is started, watched, stopped and counted.

A QEMU target says what its guest is: the QEMU words that boot it (``machine``: firmware and disks,
or a kernel and its initrd), what the program that drives the guest prints (its marker table,
``parsers.guest_markers``) and how that program does counted work (``CountSpec``). The rest is the
same for every guest and lives here:

- ``launch``: QEMU under TCG with the serial console in a file, a time limit, the console cap (a
  guest printing past it is stopped, ``proc.CONSOLE_FLOOD``) and the target's ``StopRule``; each boot
  gets a nonce of its own (``new_nonce``), which the guest's program prints after each marker;
- ``request_count``: the counting plugin (``qemu_plugin``) for one boot, when the policy asks for
  module counts: the plan of fixed work and the module's code ranges, written beside the boot;
  ``read_counts`` turns what the plugin and the guest's count lines say into the run's
  ``InstructionCounts``, and ``merge_counts`` makes them the run's (or lets the proxy's stand).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config.bsdkm_yml import DEFAULT_CONSOLE_CAP_MIB, Config
from ...perf.instruction_counts import METADATA_KEY, InstructionCounts, counts_of
from ...perf.kernel_counts import (
    ALGS,
    HARNESS_PREFIX,
    SCOPE_PROXY,
    CountPlan,
    KernelCountError,
    TextLayout,
    module_counts,
    parse_harness_lines,
    parse_plugin_output,
)
from ...policy import load_policy
from .console_lines import console_lines
from .proc import Watched, run_watched
from .qemu_plugin import (
    COUNT_FILE,
    COUNT_PLAN,
    COUNT_SYMBOLS,
    COUNT_UNAVAILABLE,
    PROXY_STATE_KEY,
    QEMU,
    PluginUnavailable,
    plugin_for,
    plugin_source,
)
from .source import cache_root
from .stage_error import infra_error

MIB = 1 << 20
DEFAULT_CONSOLE_CAP_BYTES = int(DEFAULT_CONSOLE_CAP_MIB * MIB)


@dataclass(frozen=True)
class VmOptions:
    """The virtual machine a guest gets (``targets.<name>.cpu``, ``memory_mb``; ``console_cap_mib``)."""

    # "max" exposes AES-NI, PCLMULQDQ, AVX and ADX to the guest under TCG ("max,-adx,-bmi2" does
    # without the instructions of the intermittent ECC self-test failure).
    cpu: str = "max"
    memory_mb: int = 1024
    console_cap_bytes: int | None = DEFAULT_CONSOLE_CAP_BYTES  # the guest is stopped past it


def new_nonce() -> str:
    """A boot's nonce: the guest's program prints it after each marker; the module cannot know it."""
    return secrets.token_hex(16)


def qemu_command(machine: Sequence[str], options: VmOptions, plugin: str | None = None) -> list[str]:
    """QEMU (TCG, one CPU, no network, the serial console on standard output) booting ``machine``;
    ``plugin``: QEMU's ``-plugin`` argument (the instruction counter with its options)."""
    cmd = [QEMU, "-accel", "tcg", "-m", str(options.memory_mb), "-smp", "1", "-cpu", options.cpu,
           "-nographic", "-no-reboot", "-monitor", "none", "-serial", "stdio", *machine]
    if plugin:
        cmd += ["-plugin", plugin]
    return [*cmd, "-net", "none"]


def launch(machine: Sequence[str], console: Path, *, options: VmOptions, timeout_s: float,
           stop: Callable[[str], str | None] | None = None, plugin: str | None = None,
           qemu_log: Path | None = None) -> Watched:
    """One boot: QEMU's console goes to ``console`` while ``stop`` watches it; the guest is stopped at
    ``timeout_s``, past the console cap, or when ``stop`` says the console has said all it will.

    ``qemu_log``: where QEMU's own messages go (None: into the console).
    """
    try:
        return run_watched(qemu_command(machine, options, plugin), log=console, timeout_s=timeout_s,
                           stop=stop, max_bytes=options.console_cap_bytes, stderr=qemu_log)
    except OSError as e:
        raise infra_error("load", "worker-setup", f"{QEMU} could not be started: {e}") from None


@dataclass(frozen=True)
class PanicWait:
    """A panic's console is not over at the panic line: its backtrace follows, then ``end``; past
    ``grace_s`` without it, the guest is stopped anyway."""

    needle: str
    end: re.Pattern[str]
    grace_s: float


class StopRule:
    """When a console has said all it will: the first of ``stops`` (text, reason) seen, or a panic
    and its end (``panic``). Fed the console as it comes (``proc.run_watched``), each piece once, so
    memory stays flat; a text may straddle two pieces."""

    CARRY = 64

    def __init__(self, stops: Sequence[tuple[str, str]], clock: Callable[[], float],
                 panic: PanicWait | None = None) -> None:
        self.stops = tuple(stops)
        self.clock = clock
        self.panic = panic
        self.panic_at: float | None = None
        self.carry = ""  # the end of the pieces so far

    def _has(self, needle: str, piece: str) -> bool:
        return needle in self.carry[len(self.carry) - len(needle) + 1:] + piece

    def __call__(self, piece: str) -> str | None:
        try:
            return self._verdict(piece)
        finally:
            self.carry = (self.carry + piece)[-self.CARRY:]

    def _verdict(self, piece: str) -> str | None:
        panic = self.panic
        if panic is not None and self.panic_at is None and self._has(panic.needle, piece):
            self.panic_at = self.clock()
        if panic is not None and self.panic_at is not None:
            if panic.end.search(self.carry[-16:] + piece):
                return "panic"
            return "panic" if self.clock() - self.panic_at > panic.grace_s else None
        return next((reason for needle, reason in self.stops if self._has(needle, piece)), None)


# --------------------------------------------------------------------------- counting in the guest


@dataclass(frozen=True)
class CountSpec:
    """How a guest's program does counted work: its items' algorithms (its names, the reports', in
    its order), what starts its count lines on the console, its own name (named beside the plugin's
    in the counts), and the guest addresses the plugin instruments (None: the plugin's default, the
    x86-64 kernel's module area)."""

    algs: tuple[tuple[str, str], ...] = ALGS
    prefix: str = HARNESS_PREFIX
    program: str | None = None
    area: str | None = None

    def program_name(self) -> str:
        plugin = plugin_source().name
        return f"{self.program} + {plugin}" if self.program else plugin


@dataclass(frozen=True)
class CountRequest:
    """The plugin for one boot: where it is, the size of the module's ``.text`` (range 0), its
    functions and other ranges (``symbols``), the work, and the ranges the guest declares (in
    their numbers' order)."""

    plugin: Path
    symbols: Path
    text_size: int
    plan: CountPlan
    area: str | None = None
    ranges: tuple[str, ...] = ()

    def plugin_arg(self, out: Path, nonce: str) -> str:
        """QEMU's ``-plugin`` argument: the plugin writes to ``out`` and takes only ``nonce``'s signals."""
        arg = f"{self.plugin},out={out},nonce={nonce},size={self.text_size},syms={self.symbols}"
        return f"{arg},area={self.area}" if self.area else arg


def request_count(config: Config, work: Path, spec: CountSpec, layout: Callable[[], TextLayout], *,
                  wanted: bool = True) -> CountRequest | None:
    """The count of the boot in ``work`` when the policy asks for module counts and the target
    ``wanted`` it for this boot (its guest does counted work); None otherwise, or when the plugin
    cannot count here: then the reason is left in ``COUNT_UNAVAILABLE`` and the boot runs without
    it. ``layout``: the module's code (raises ``PluginUnavailable`` when it cannot be counted)."""
    work.mkdir(parents=True, exist_ok=True)
    for stale in (COUNT_FILE, COUNT_PLAN, COUNT_UNAVAILABLE, COUNT_SYMBOLS):
        (work / stale).unlink(missing_ok=True)
    settings = load_policy(config.policy).instructions
    if not settings.kernel_count or not wanted:
        return None
    plan = CountPlan(settings.kernel_bytes, settings.kernel_sizes, spec.algs)
    (work / COUNT_PLAN).write_text(json.dumps({"bytes": plan.bytes, "sizes": list(plan.sizes)}))
    try:
        plugin = plugin_for(cache_root(config))
        code = layout()
        if "," in str(plugin.path) + str(work):
            raise PluginUnavailable(f"a path holds a comma, which QEMU's -plugin option cannot carry: {work}")
    except PluginUnavailable as e:
        (work / COUNT_UNAVAILABLE).write_text(str(e))
        return None
    (work / COUNT_SYMBOLS).write_text(code.symbols_file())
    return CountRequest(plugin.path, work / COUNT_SYMBOLS, code.size, plan, spec.area,
                        tuple(code.section_names))


def read_counts(work: Path, console: Path, spec: CountSpec) -> InstructionCounts | None:
    """What the boot in ``work`` counted in the module; None when no count was asked."""
    plan_file = work / COUNT_PLAN
    if not plan_file.is_file():
        return None
    raw = json.loads(plan_file.read_text())
    plan = CountPlan(int(raw["bytes"]), tuple(int(x) for x in raw["sizes"]), spec.algs)
    program = spec.program_name()
    if (work / COUNT_UNAVAILABLE).is_file():
        why = (work / COUNT_UNAVAILABLE).read_text().strip()
        return module_counts(plan, None, parse_harness_lines((), spec.prefix), program=program,
                             unavailable=f"the counting plugin is unavailable: {why}")
    harness = parse_harness_lines(console_lines(console) if console.is_file() else (), spec.prefix)
    out = work / COUNT_FILE
    try:
        plugin = parse_plugin_output(out.read_text(errors="replace")) if out.is_file() else None
    except KernelCountError as e:
        return module_counts(plan, None, harness, program=program,
                             unavailable=f"the counting plugin's output is unreadable: {e}")
    return module_counts(plan, plugin, harness, program=program)


_NOT_COUNTED = "the module itself was not counted"


def merge_counts(state: dict[str, Any], counts: InstructionCounts) -> None:
    """The module's counts become the run's; when none could be made (the plugin unavailable, the
    run void) and the build has proxy counts, the proxy's stand, with a note saying why."""
    current = counts_of(state)
    # The proxy as the build made it (collect runs more than once: not the one this added a note to).
    fresh = current is not None and not any(_NOT_COUNTED in n for n in current.notes)
    if current is not None and current.scope == SCOPE_PROXY and fresh:
        state[PROXY_STATE_KEY] = current.to_dict()
    proxy = counts_of(state, PROXY_STATE_KEY)
    if not counts.measured and proxy is not None:
        reasons = sorted({i.reason or i.status for i in counts.items})
        proxy.notes.append(f"{_NOT_COUNTED} ({'; '.join(reasons)}): the user-space proxy's counts stand in")
        state[METADATA_KEY] = proxy.to_dict()
        return
    state[METADATA_KEY] = counts.to_dict()
