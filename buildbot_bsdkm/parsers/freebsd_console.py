"""What a FreeBSD guest's console says about the module's life: the harness's markers and the kernel's
own lines (a panic and its backtrace, a module that did not link, a preload, a failed MOD_LOAD).

The markers are read by the guest's ``MarkerTable`` (``guest_markers``); the facts this reader
takes from it are ``kldstat`` (the body of the first ``kldstat ...`` marker) and ``listed``
(``still`` or ``not``, from ``... listed after unload``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .guest_markers import MarkerReader, MarkerTable
from .kernel_trouble import FreeBSDBacktrace

# The loader's line for the module it preloads (the kernel says "Preloaded elf obj module" only when verbose).
PRELOAD_RE = re.compile(r"^/boot/modules/libwolfssl\.ko size 0x[0-9a-f]+ at 0x[0-9a-f]+")
PRELOADED = 'Preloaded elf obj module "'
# sys/kern/kern_module.c, when a module's MOD_LOAD handler fails.
MOD_LOAD_ERROR_RE = re.compile(r"^module_register_init: MOD_LOAD \([^,]+, .*\) error (?P<errno>\d+)")
LINK_ERROR_RE = re.compile(
    r"^(?:link_elf_obj: symbol \S+ undefined|KLD file \S+ - could not finalize loading)")
LOADED_RE = re.compile(r"^(?:libwolf\d+: )?info: (?:libwolfssl\S* loaded|driver loaded: )")


@dataclass
class ConsoleFacts:
    """What one FreeBSD console says about the module's life, from the markers and kernel lines."""

    markers: list[str] = field(default_factory=list)
    load_rc: int | None = None
    load_errno: int | None = None
    unload_rc: int | None = None
    unload_errno: int | None = None
    kldstat: str | None = None
    still_listed: bool | None = None
    panic: str | None = None
    backtrace: list[str] = field(default_factory=list)  # "func+0xoff", innermost first
    link_errors: list[str] = field(default_factory=list)
    preloaded: bool = False
    loaded_line: bool = False  # "info: libwolfssl loaded"
    selftest_passed: bool = False
    mountroot: bool = False
    mod_load_errno: int | None = None  # the kernel's "module_register_init: MOD_LOAD (...) error N"
    imitations: int = 0  # marker-shaped lines without this boot's nonce: not the harness's
    first_marker: str | None = None  # the first marker-shaped line's body, whoever printed it

    def seen(self, prefix: str) -> bool:
        return any(m.startswith(prefix) for m in self.markers)


def read_console(text: str | Iterable[str], table: MarkerTable, nonce: str | None = None) -> ConsoleFacts:
    """What a console says; ``text`` is the whole text or its lines (streamed, memory stays flat).

    ``nonce``: this boot's; a marker without it is not taken (None: not known here, e.g. a kept
    console; markers must still start their line). Each step's first result counts.
    """
    facts = ConsoleFacts()
    reader = MarkerReader(table, nonce)
    trace = FreeBSDBacktrace()  # the core parser's reader: DDB's frames and stack(9)'s alike
    for raw in text.splitlines() if isinstance(text, str) else text:
        line = raw.replace("\r", "").rstrip()
        if reader.feed(line) is not False:
            continue
        if line.startswith("panic: ") and facts.panic is None:
            facts.panic = line
        elif trace.feed(line):
            continue
        if LINK_ERROR_RE.match(line):
            facts.link_errors.append(line)
        elif PRELOAD_RE.match(line) or (line.startswith(PRELOADED) and "libwolfssl" in line):
            facts.preloaded = True
        elif LOADED_RE.match(line):
            facts.loaded_line = True
        elif "mountroot>" in line:
            facts.mountroot = True
        elif line.startswith("info: wolfCrypt self-test passed"):
            facts.selftest_passed = True
        elif (m := MOD_LOAD_ERROR_RE.match(line)) and facts.mod_load_errno is None:
            facts.mod_load_errno = int(m.group("errno"))
    found = reader.markers
    facts.markers = found.bodies
    load, unload = found.result("load"), found.result("unload")
    if load is not None:
        facts.load_rc, facts.load_errno = load.rc, load.errno
    if unload is not None:
        facts.unload_rc, facts.unload_errno = unload.rc, unload.errno
    facts.kldstat = found.facts.get("kldstat")
    listed = found.facts.get("listed")
    facts.still_listed = None if listed is None else listed == "still"
    facts.imitations = found.imitations
    facts.first_marker = found.first_body
    facts.backtrace = trace.frames
    return facts
