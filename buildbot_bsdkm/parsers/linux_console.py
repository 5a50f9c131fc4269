"""What a Linux guest's console says about the module's life: the harness's markers, the loader's
answers (``bsdkm-modload: load X: ok | failed errno=N (text)``), the module list and a panic.

The harness's own lines start a console line; the module's printk output never does (the kernel
puts ``[    1.234567] `` before each of its lines, in the dmesg dumps too), so a marker-shaped text
anywhere else on a line is the module's imitation. The markers are read by the guest's
``MarkerTable`` (``guest_markers``); the facts this reader takes from it are ``module`` (the
module's name) and ``tainted``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .guest_markers import MARKER_PREFIX, Marker, MarkerReader, MarkerTable

LOADER_RE = re.compile(
    r"^bsdkm-modload: (?P<verb>load|unload) (?P<what>\S+): "
    r"(?:ok|failed errno=(?P<errno>\d+)(?: \((?P<text>[^)]*)\))?)\s*$"
)
PANIC_RE = re.compile(r"Kernel panic - not syncing: .*")
ESCAPES_RE = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-z]|[A-Za-z])")  # SeaBIOS/kernel terminal resets
TERMINAL_RESET = "\x1bc"


@dataclass
class ConsoleReport:
    """What the markers and loader lines on a Linux console say."""

    markers: list[Marker] = field(default_factory=list)
    load_rc: int | None = None
    unload_rc: int | None = None
    load_errno: int | None = None
    load_error_text: str | None = None
    unload_errno: int | None = None
    guest_timeout_stage: str | None = None  # "load" / "unload" from the guest watchdog
    module_listed: bool = False  # the module was in /proc/modules after the load
    panic: str | None = None  # first "Kernel panic - not syncing: ..." line
    tainted: int | None = None
    imitations: list[int] = field(default_factory=list)  # lines that look like a marker but are not /init's

    def seen(self, body: str) -> bool:
        return any(m.body == body for m in self.markers)

    def uptime_of(self, prefix: str) -> float | None:
        return next((m.uptime for m in self.markers if m.body.startswith(prefix)), None)

    @property
    def last_marker(self) -> str | None:
        return self.markers[-1].body if self.markers else None

    def stage_in_progress(self) -> str:
        """Where the guest was when it stopped talking: boot, load, unload, collect, poweroff."""
        if self.seen("poweroff"):
            return "poweroff"
        if self.seen("unload begin") and self.unload_rc is None:
            return "unload"
        if self.seen("load begin") and self.load_rc is None:
            return "load"
        if not any(m.body.startswith("init begin") for m in self.markers):
            return "boot"
        return "collect"


class _ConsoleReader:
    """Feeds console lines one at a time so a large log is never held in memory."""

    def __init__(self, table: MarkerTable, nonce: str | None = None) -> None:
        self.report = ConsoleReport()
        self.markers = MarkerReader(table, nonce)
        self._in_modules = False
        self._listed = False
        self._loader_seen: set[str] = set()

    def feed(self, lineno: int, raw: str) -> None:
        # The kernel resets the terminal (ESC c) right before /init's first marker, on the firmware's
        # unfinished last line ("Booting from ROM.."): what follows a reset starts the screen afresh.
        line = ESCAPES_RE.sub("", raw.rpartition(TERMINAL_RESET)[2]).replace("\r", "").rstrip("\n")
        r = self.report
        if r.panic is None and (m := PANIC_RE.search(line)):
            r.panic = m.group(0).strip()
        marker = self.markers.feed(line, lineno)
        if isinstance(marker, Marker):
            self._listing(marker.body)
        elif marker:
            return
        elif MARKER_PREFIX in line:
            # The module runs only from "load begin" on: a broken marker before it is the console's
            # doing (a kernel line printed into the middle of one), not an imitation.
            self.markers.imitation(lineno)
        elif m := LOADER_RE.match(line):
            self._loader(m)
        elif self._in_modules and (name := self.markers.markers.facts.get("module")) and \
                line.startswith(f"{name} "):
            r.module_listed = True

    def _listing(self, body: str) -> None:
        # The module list is read once, from the first listing.
        first_listing = body == "modules begin" and not self._listed
        self._listed = self._listed or first_listing
        self._in_modules = first_listing or (self._in_modules and body != "modules end")

    def _loader(self, m: re.Match[str]) -> None:
        verb = m.group("verb")
        if verb != self.markers.step or verb in self._loader_seen:
            return  # outside its step, or a second one: not the loader's answer
        self._loader_seen.add(verb)
        errno = int(m.group("errno")) if m.group("errno") else None
        if verb == "load":
            self.report.load_errno = errno
            self.report.load_error_text = m.group("text")
        else:
            self.report.unload_errno = errno

    def finish(self) -> ConsoleReport:
        r, found = self.report, self.markers.markers
        r.markers = list(found.taken)
        load, unload = found.result("load"), found.result("unload")
        r.load_rc = load.rc if load is not None else None
        r.unload_rc = unload.rc if unload is not None else None
        r.guest_timeout_stage = found.timed_out
        tainted = found.facts.get("tainted")
        r.tainted = int(tainted) if tainted is not None else None
        r.imitations = list(found.imitation_lines)
        return r


def read_console_lines(lines: Iterable[str], table: MarkerTable, nonce: str | None = None) -> ConsoleReport:
    """The report of a console's lines (each with or without its line end), read one at a time."""
    reader = _ConsoleReader(table, nonce)
    for lineno, line in enumerate(lines, 1):
        reader.feed(lineno, line)
    return reader.finish()

