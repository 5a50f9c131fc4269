"""Instruction counts of the real kernel module, made inside the guest by QEMU's TCG plugin.

The plugin (``kmod/qemu/bsdkm_count.c``) counts the guest instructions executed inside the
module's code between a start and a stop signal of the guest's harness (``afalg_bench.c -w``),
per item and per function: its ``.text`` and every other executable section of the ``.ko``
(SHF_EXECINSTR), each a range the guest declares before it counts, so code placed outside
``.text`` is counted like the rest. This module is the pure side:

- ``CountPlan``: the fixed work asked for (bytes per item, operation sizes) and the items it makes,
  named ``kmod:<ALG>@<size>`` in the order the harness numbers them;
- ``parse_plugin_output``: the plugin's file (its items, per function, or why the run is void);
- ``parse_harness_lines``: the harness's ``afalg-count`` lines on the console (which items ran,
  how many operations, which were skipped and why);
- ``module_counts``: both together as ``InstructionCounts`` with ``scope="module"``, the same
  record the userspace counts use, so the gate compares them 1 vs 1 per item and per function;
- ``text_layout``: the module's executable sections, their sizes and function symbols, from
  ``readelf`` output (``.text`` is range 0, each other executable section a range of its own).

A void run (a signal without the boot's nonce, from kernel space or out of order) counts nothing:
every item is unmeasurable with the plugin's reason, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .instruction_counts import (
    MISSING,
    UNMEASURABLE,
    InstructionCounts,
    ItemCount,
    kept_functions,
)

TOOL = "qemu-tcg-plugin"
SCOPE_MODULE = "module"  # the real module, counted in the guest
SCOPE_PROXY = "proxy"  # a user-space build of a kernel variant's flags
SCOPE_USERSPACE = "userspace"
ITEM_PREFIX = "kmod:"
# The harness's algorithms, in its order (afalg_bench.c ALGS), with the names the reports use.
ALGS = (("gcm(aes)", "AES-128-GCM"), ("cbc(aes)", "AES-128-CBC"), ("sha256", "SHA-256"),
        ("hmac(sha256)", "HMAC-SHA256"))
# The FreeBSD guest's (kmod/freebsd/kldinit.c count_algs): what a crypto-register module serves
# through /dev/crypto, the same item names as the Linux module's.
FREEBSD_ALGS = (("aes-gcm", "AES-128-GCM"), ("aes-cbc", "AES-128-CBC"))
HARNESS_PREFIX = "afalg-count:"
FREEBSD_HARNESS_PREFIX = "crypto-count:"
DEFAULT_BYTES = 65536
DEFAULT_SIZES = (16, 1024, 16384)
MAX_SIZE = 65536  # the harness's buffer


SCOPE_WORDS = {
    SCOPE_MODULE: "the real module, counted in the guest (QEMU TCG plugin)",
    SCOPE_PROXY: "a user-space proxy of the kernel variant, not the module",
    SCOPE_USERSPACE: "user space",
}
SCOPE_TAGS = {SCOPE_MODULE: "module", SCOPE_PROXY: "proxy", SCOPE_USERSPACE: ""}


def scope_words(scope: str) -> str:
    return SCOPE_WORDS.get(scope, scope)


class KernelCountError(ValueError):
    """A plugin output or a plan that cannot be used; the message names the problem."""


@dataclass(frozen=True)
class PlannedItem:
    index: int  # the harness's item number (signal index)
    name: str  # kmod:AES-128-GCM@1024
    alg: str  # gcm(aes)
    size: int  # bytes per operation
    ops: int  # operations counted

    @property
    def amount(self) -> int:
        return self.ops * self.size


@dataclass(frozen=True)
class CountPlan:
    """The fixed work of one counted boot: ``bytes`` per item at each operation size."""

    bytes: int = DEFAULT_BYTES
    sizes: tuple[int, ...] = DEFAULT_SIZES
    algs: tuple[tuple[str, str], ...] = ALGS  # (the guest's name, the report's), in the guest's order

    def __post_init__(self) -> None:
        if self.bytes < 1:
            raise KernelCountError(f"bytes per item must be positive, not {self.bytes}")
        if not self.sizes or len(self.sizes) > 16:
            raise KernelCountError(f"1 to 16 operation sizes are needed, not {len(self.sizes)}")
        for s in self.sizes:
            if s < 16 or s > MAX_SIZE or s % 16:
                raise KernelCountError(f"an operation size must be a multiple of 16 from 16 to {MAX_SIZE}, "
                                       f"not {s}")

    def items(self) -> list[PlannedItem]:
        out = []
        for a, (alg, label) in enumerate(self.algs):
            for s, size in enumerate(self.sizes):
                out.append(PlannedItem(a * len(self.sizes) + s, f"{ITEM_PREFIX}{label}@{size}", alg, size,
                                       max(1, self.bytes // size)))
        return out


# --------------------------------------------------------------------------- the plugin's file

_BEGIN = re.compile(r"^bsdkm-count: begin version=(\d+) size=(\d+) syms=(\d+)\s*$")
_RANGE = re.compile(r"^bsdkm-count: range number=(\d+) size=(\d+) base=0x([0-9a-f]+) name=(\S+)\s*$")
_ITEM = re.compile(r"^bsdkm-count: item index=(\d+) instructions=(\d+) base=0x([0-9a-f]+)\s*$")
_FUNC = re.compile(r"^bsdkm-count: func index=(\d+) instructions=(\d+) name=(.+?)\s*$")
_VOID = re.compile(r"^bsdkm-count: void reason=(\S+)(?: at=0x([0-9a-f]+))?\s*$")
_END = re.compile(r"^bsdkm-count: end items=(\d+) void=([01])\s*$")
VOID_REASONS = {
    "wrong-nonce": "a counting signal did not carry this boot's nonce",
    "signal-from-kernel-space": "a counting signal was executed in kernel space (by the module, "
                                "not the harness)",
    "malformed-signal": "a counting signal was malformed",
    "start-while-counting": "a start signal came while an item was being counted",
    "stop-of-another-item": "a stop signal named another item than the one being counted",
    "stop-while-idle": "a stop signal came while nothing was being counted",
    "base-changed": "a start signal named another .text base than the first",
    "no-stop-before-exit": "the VM ended while an item was being counted",
    "unknown-range": "the guest declared a code range the host did not list",
    "range-while-counting": "a code range was declared while an item was being counted",
    "range-size-changed": "a code range was declared with another size than the host's",
    "range-not-declared": "an executable section of the module was never placed by the guest before "
                          "counting (its code would have gone uncounted)",
}


@dataclass
class PluginItem:
    instructions: int
    functions: dict[str, int] = field(default_factory=dict)


@dataclass
class PluginOutput:
    begun: bool = False
    ended: bool = False
    version: int | None = None
    items: dict[int, PluginItem] = field(default_factory=dict)
    void_reason: str | None = None  # the plugin's word (wrong-nonce, ...)
    void_at: int | None = None  # the guest address of the offending signal
    ranges: dict[int, tuple[str, int]] = field(default_factory=dict)  # number -> (name, size) placed

    @property
    def void(self) -> bool:
        return self.void_reason is not None

    def why_void(self) -> str | None:
        if self.void_reason is None:
            return None
        text = VOID_REASONS.get(self.void_reason, self.void_reason)
        return f"{text} (at {self.void_at:#x})" if self.void_at else text


def parse_plugin_output(text: str) -> PluginOutput:
    """The plugin's lines; anything else is an error (the file is the plugin's alone)."""
    out = PluginOutput()
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if m := _BEGIN.match(line):
            out.begun, out.version = True, int(m[1])
            if out.version != 1:
                raise KernelCountError(f"plugin output line {n}: unknown format version {out.version}")
        elif m := _RANGE.match(line):
            out.ranges.setdefault(int(m[1]), (m[4], int(m[2])))
        elif m := _ITEM.match(line):
            index = int(m[1])
            if index in out.items:  # only a replayed stop could say it twice: not a count to trust
                out.void_reason = out.void_reason or f"item-{index}-counted-twice"
                continue
            out.items[index] = PluginItem(int(m[2]))
        elif m := _FUNC.match(line):
            item = out.items.get(int(m[1]))
            if item is None:
                raise KernelCountError(f"plugin output line {n}: a function line before its item's line")
            item.functions[m[3]] = item.functions.get(m[3], 0) + int(m[2])
        elif m := _VOID.match(line):
            if out.void_reason is None:
                out.void_reason, out.void_at = m[1], int(m[2], 16) if m[2] else None
        elif m := _END.match(line):
            out.ended = True
        else:
            raise KernelCountError(f"plugin output line {n}: not a bsdkm-count line: {line[:80]!r}")
    return out


# --------------------------------------------------------------------------- the harness's lines

_H_ITEM = re.compile(r" item index=(\d+) alg=(\S+) driver=(\S+) bytes=(\d+) ops=(\d+) rc=(-?\d+)")
_H_SKIP = re.compile(r" skip index=(\d+) alg=(\S+) reason=(\S+) errno=(\d+)")
_H_ERROR = re.compile(r" error reason=(\S+)(.*)$")
_H_BEGIN = re.compile(r" begin version=1 bytes=(\d+) sizes=(\S+) base=0x([0-9a-f]+)")


@dataclass
class HarnessRun:
    begun: bool = False
    ran: dict[int, tuple[int, int, str]] = field(default_factory=dict)  # index -> (ops, rc, driver)
    skipped: dict[int, str] = field(default_factory=dict)  # index -> reason
    error: str | None = None


def parse_harness_lines(lines: Iterable[str], prefix: str = HARNESS_PREFIX) -> HarnessRun:
    """The harness's lines of the console (``afalg-count:``; the FreeBSD guest's ``crypto-count:``);
    kernel timestamps before the prefix and other lines are skipped."""
    out = HarnessRun()
    for line in lines:
        at = line.find(prefix)
        if at < 0:
            continue
        rest = line[at + len(prefix):]  # from the space the patterns start with
        if _H_BEGIN.match(rest):
            out.begun = True
        elif m := _H_ITEM.match(rest):
            out.ran.setdefault(int(m[1]), (int(m[5]), int(m[6]), m[3]))
        elif m := _H_SKIP.match(rest):
            out.skipped.setdefault(int(m[1]), f"{m[3]} failed (errno {m[4]})")
        elif m := _H_ERROR.match(rest):
            out.error = out.error or f"{m[1]}{m[2]}".strip()
    return out


# --------------------------------------------------------------------------- the record


def module_counts(plan: CountPlan, plugin: PluginOutput | None, harness: HarnessRun, *, seconds: float = 0.0,
                  program: str | None = None, notes: Iterable[str] = (),
                  unavailable: str | None = None) -> InstructionCounts:
    """The boot's counts, one item per planned item; nothing measured when the run is void.

    ``unavailable``: why there is no plugin output at all (the plugin did not build or load).
    The harness's operation count must be the plan's: the item's amount is the plan's, never a
    number the guest printed.
    """
    items: list[ItemCount] = []
    all_notes = list(notes)
    void = plugin.why_void() if plugin is not None else None
    if void:
        all_notes.append(f"module instruction counts void: {void}; nothing of this boot is counted")
    for p in plan.items():
        item = ItemCount(p.name, kind="sym", amount=p.amount)
        got = plugin.items.get(p.index) if plugin is not None else None
        ran = harness.ran.get(p.index)
        if unavailable:
            item.status, item.reason = UNMEASURABLE, unavailable
        elif plugin is None or not plugin.begun:
            item.status, item.reason = UNMEASURABLE, "the counting plugin wrote nothing"
        elif void:
            item.status, item.reason = UNMEASURABLE, f"void: {void}"
        elif p.index in harness.skipped:
            item.status, item.reason = MISSING, f"the harness skipped it: {harness.skipped[p.index]}"
        elif got is None or ran is None:
            item.status = MISSING
            item.reason = harness.error or ("not run (the harness did not reach it)" if ran is None
                                            else "no stop signal reached the plugin")
        elif ran[1] != 0 or ran[0] != p.ops:
            item.status = MISSING
            item.reason = f"the harness did {ran[0]} of {p.ops} operations (rc {ran[1]})"
        else:
            item.instructions = got.instructions
            item.functions = kept_functions(got.functions)
        items.append(item)
    return InstructionCounts(items=items, tool=TOOL, valgrind=None, seconds=seconds, program=program,
                             notes=all_notes, scope=SCOPE_MODULE)


# --------------------------------------------------------------------------- the module's layout

_SECTION = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s")
# readelf -SW: "[Nr] Name Type Address Off Size ES Flg Lk Inf Al"; the flags hold X for SHF_EXECINSTR.
_SECTION_FLAGS = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+"
                            r"[0-9a-f]+\s+([A-Za-z]*)\s+\d+\s+\d+\s+\d+\s*$")
_SYMBOL = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+(FUNC|NOTYPE)\s+\S+\s+\S+\s+(\d+)"
                     r"\s+(\S+)")
# What the guest is told a section is called: a name the harness can put on a command line and in a
# /sys path as it is (the .ko is the PR's: any other byte could be an injection).
_TELLABLE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]{0,62}|\.[A-Za-z0-9_][A-Za-z0-9_.]{0,61}")
MAX_RANGES = 63  # the plugin's ranges 1..63 beside .text


@dataclass
class CodeRange:
    """Code of the module counted beside ``.text``: an executable section (its size and functions),
    or, with ``size`` 0, a range the guest sizes itself (FreeBSD: the module's whole mapping)."""

    number: int
    name: str
    size: int
    symbols: list[tuple[int, int, str]] = field(default_factory=list)


@dataclass
class TextLayout:
    size: int
    symbols: list[tuple[int, int, str]]  # (offset, size, name), by offset
    ranges: list[CodeRange] = field(default_factory=list)  # every other executable section

    def symbols_file(self) -> str:
        """The plugin's ``syms=`` file: ``.text``'s functions, then each range and its functions."""
        lines = [f"{off:x} {size:x} {name}\n" for off, size, name in self.symbols]
        for r in self.ranges:
            lines.append(f"range {r.number} {r.size:x} {r.name}\n")
            lines += [f"{off:x} {size:x} {name}\n" for off, size, name in r.symbols]
        return "".join(lines)

    @property
    def section_names(self) -> list[str]:
        """The ranges' names in their numbers' order (what the guest declares, 1 upwards)."""
        return [r.name for r in self.ranges]

    def with_range(self, name: str, size: int = 0) -> TextLayout:
        """This layout and one more range (``size`` 0: the guest gives it)."""
        return TextLayout(self.size, self.symbols,
                          [*self.ranges, CodeRange(len(self.ranges) + 1, name, size)])


def executable_sections(sections: str) -> list[tuple[int, str, int]]:
    """(index, name, size) of every executable section (SHF_EXECINSTR) of ``readelf -SW`` output."""
    out = []
    for line in sections.splitlines():
        m = _SECTION_FLAGS.match(line)
        if m and m[1] != "0" and "X" in m[4] and int(m[3], 16):
            out.append((int(m[1]), m[2], int(m[3], 16)))
    return out


def _functions(symbols: str, index: int, size: int) -> list[tuple[int, int, str]]:
    """A section's function symbols, by offset; one without a size extends to the next one."""
    found: dict[int, tuple[int, str]] = {}
    for line in symbols.splitlines():
        m = _SYMBOL.match(line)
        if not m or int(m[4]) != index or m[5].startswith((".L", "__pfx_")):
            continue
        off, sz = int(m[1], 16), int(m[2], 0)
        if m[3] == "NOTYPE" and sz == 0 and off in found:
            continue
        if off not in found or (sz and not found[off][0]):
            found[off] = (sz, m[5])
    offs = sorted(found)
    out = []
    for i, off in enumerate(offs):
        sz, name = found[off]
        if not sz:
            sz = (offs[i + 1] if i + 1 < len(offs) else size) - off
        out.append((off, sz, name))
    return out


def text_layout(sections: str, symbols: str, *, other_sections: bool = True) -> TextLayout:
    """The executable code of a relocatable module from ``readelf -SW`` and ``readelf -sW`` output.

    In a ``.ko`` a symbol's value is its offset in its section. ``.text`` is range 0; with
    ``other_sections`` every other executable section is a range of its own (the guest declares
    where each was placed), except the init sections Linux frees once the module is loaded
    (``.init*``: their memory may hold another module's code by the time anything is counted).
    A section whose name the guest could not be told as it is makes the module uncountable.
    """
    index = size = None
    for line in sections.splitlines():
        m = _SECTION.match(line)
        if m and m[2] == ".text":
            index, size = int(m[1]), int(m[3], 16)
    if index is None or not size:
        raise KernelCountError("the module has no .text section (readelf -S)")
    layout = TextLayout(size, _functions(symbols, index, size))
    if not other_sections:
        return layout
    for sec_index, name, sec_size in executable_sections(sections):
        if sec_index == index or name.startswith(".init"):
            continue
        if not _TELLABLE.fullmatch(name):
            raise KernelCountError(f"executable section {name[:80]!r}: a name the guest cannot be told as it "
                                   "is, so its code could not be counted")
        if len(layout.ranges) >= MAX_RANGES:
            raise KernelCountError(f"more than {MAX_RANGES} executable sections besides .text")
        layout.ranges.append(CodeRange(len(layout.ranges) + 1, name, sec_size,
                                       _functions(symbols, sec_index, sec_size)))
    return layout


_GLOBAL_FUNC = re.compile(r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+|0x[0-9a-f]+)\s+FUNC\s+GLOBAL\s+\S+\s+(\d+)\s+(\S+)")


def text_anchor(sections: str, symbols: str, prefer: tuple[str, ...] = ()) -> tuple[str, int]:
    """A global function of ``.text`` and its offset there, from ``readelf -SW`` and ``-sW`` output:
    a guest that can look up a symbol's address (FreeBSD's ``kldsym``) but not a section's takes
    ``.text``'s base as that address less the offset. The first of ``prefer`` the module has, else
    the global function at the lowest offset."""
    index = None
    for line in sections.splitlines():
        m = _SECTION.match(line)
        if m and m[2] == ".text":
            index = int(m[1])
    if index is None:
        raise KernelCountError("the module has no .text section (readelf -S)")
    found: dict[str, int] = {}
    for line in symbols.splitlines():
        m = _GLOBAL_FUNC.match(line)
        if m and int(m[3]) == index and int(m[2], 0) > 0:
            found.setdefault(m[4], int(m[1], 16))
    for name in prefer:
        if name in found:
            return name, found[name]
    if not found:
        raise KernelCountError("the module has no global function in .text to find its base by")
    name = min(found, key=lambda n: (found[n], n))
    return name, found[name]


_SECTION_TYPE = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+(\S+)\s")
# The section types FreeBSD's object-file linker (link_elf_obj) places in a module's mapping, in
# section-header order; releases differ in which of them they place and how they align them.
_PLACED_TYPES = {"PROGBITS", "NOBITS", "X86_64_UNWIND", "INIT_ARRAY", "FINI_ARRAY"}


def text_load_offset(sections: str) -> int | None:
    """Where ``.text`` lands in a FreeBSD object module's mapping (the address ``kldstat`` gives),
    from ``readelf -SW`` output: 0 when ``.text`` is the first section the linker places, so no
    release's alignment or choice of sections can move it; None when another comes first."""
    for line in sections.splitlines():
        m = _SECTION_TYPE.match(line)
        if not m or m[1] == "0":
            continue
        if m[2] == ".text":
            return 0 if m[3] == "PROGBITS" else None
        if m[3] in _PLACED_TYPES:
            return None
    return None
