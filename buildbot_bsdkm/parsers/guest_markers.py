"""The harness's markers on a guest's console: ``### bsdkm-ci: <body> [uptime=S] [nonce=HEX]``.

The program that drives a QEMU guest (the Linux initramfs ``/init``, FreeBSD's ``kldinit``, any
other) prints its steps as markers that start their line and end with the boot's nonce, a value
the module under test cannot know. ``MarkerReader`` takes a console one line at a time and keeps
what its markers say, as the guest's ``MarkerTable`` defines them: which steps report a result,
which markers carry a fact, which one is the last. Lines that are no marker are left to the OS's
own console reader (``freebsd_console``, ``linux_console``), which feeds every line here first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

MARKER_PREFIX = "### bsdkm-ci:"
MARKER_RE = re.compile(
    r"^### bsdkm-ci: (?P<body>.*?)(?: uptime=(?P<uptime>\d+(?:\.\d+)?))?(?: nonce=(?P<nonce>[0-9a-f]+))?\s*$"
)
# Anchored: a body of one long word is refused at its first character, not searched from each one.
_RESULT = re.compile(r"^(?P<step>\S+) rc=(?P<rc>-?\d+)(?: errno=(?P<errno>\d+))?$")
_TIMEOUT = re.compile(r"^(?P<step>\S+) timeout after \d+s$")
MAX_IMITATION_LINES = 20  # line numbers kept for the notes; the count goes on


@dataclass(frozen=True)
class MarkerTable:
    """What one guest's harness prints, and what each marker means.

    ``steps``: each prints ``<step> begin`` and then ``<step> rc=N [errno=N]`` (or ``<step> timeout
    after Ns``); a step's result is the first after its ``begin``, never a later one. ``facts``: name
    to a pattern the whole body matches; its first group (else the whole body) is the fact's value,
    and the first marker that matches gives it. ``last``: nothing after it is the harness's.
    ``after_load``: body prefixes that only follow a load that succeeded. ``armed_by``: before this
    marker the module has not run, so a marker-shaped line without the nonce is no imitation.
    """

    steps: tuple[str, ...] = ("load", "unload")
    facts: Mapping[str, str] = field(default_factory=dict)
    last: str | None = None
    after_load: tuple[str, ...] = ()
    armed_by: str = "load begin"

    def compiled_facts(self) -> dict[str, re.Pattern[str]]:
        return {name: re.compile(pattern) for name, pattern in self.facts.items()}


@dataclass
class Marker:
    body: str  # "load rc=0", "load begin", "unload timeout after 60s"
    uptime: float | None  # guest seconds since boot when printed, when the harness says
    line: int


@dataclass
class StepResult:
    rc: int
    errno: int | None = None


@dataclass
class Markers:
    """What one console's markers say."""

    taken: list[Marker] = field(default_factory=list)
    results: dict[str, StepResult] = field(default_factory=dict)
    timed_out: str | None = None  # the first step the guest's own watchdog ended
    facts: dict[str, str] = field(default_factory=dict)
    imitations: int = 0  # marker-shaped lines that are not the harness's
    imitation_lines: list[int] = field(default_factory=list)  # the first of them
    first_body: str | None = None  # the first marker-shaped line's body, whoever printed it

    @property
    def bodies(self) -> list[str]:
        return [m.body for m in self.taken]

    def seen(self, prefix: str) -> bool:
        return any(m.body.startswith(prefix) for m in self.taken)

    def result(self, step: str) -> StepResult | None:
        return self.results.get(step)


class MarkerReader:
    """Feeds a console's lines (``feed``) and keeps its markers by ``table`` in ``markers``.

    ``nonce``: the boot's; a marker without it is not taken (None: not known here, e.g. a kept
    console; the markers must still start their line).
    """

    def __init__(self, table: MarkerTable, nonce: str | None = None) -> None:
        self.table = table
        self.nonce = nonce
        self.markers = Markers()
        self.step: str | None = None  # between a step's begin marker and its result
        self._facts = table.compiled_facts()
        self._begins = {f"{step} begin": step for step in table.steps}
        self._done = False

    def feed(self, line: str, lineno: int = 0) -> Marker | bool:
        """One line without its line end: the marker taken, True for a marker-shaped line that is not
        the harness's, False for a line that is no marker."""
        m = MARKER_RE.match(line)
        if m is None:
            return False
        found = self.markers
        body = m.group("body").strip()
        if found.first_body is None:
            found.first_body = body
        if self.nonce is not None and m.group("nonce") != self.nonce:
            self.imitation(lineno)
            return True
        load = found.results.get("load")
        if self._done or (body.startswith(self.table.after_load) and self.table.after_load
                          and (load is None or load.rc != 0)):
            self._count(lineno)
            return True
        marker = Marker(body, float(m.group("uptime")) if m.group("uptime") else None, lineno)
        found.taken.append(marker)
        self._mean(body)
        return marker

    def imitation(self, lineno: int) -> None:
        """A line that imitates a marker: counted once the module may have printed it."""
        if self.markers.seen(self.table.armed_by):
            self._count(lineno)

    def _count(self, lineno: int) -> None:
        self.markers.imitations += 1
        if len(self.markers.imitation_lines) < MAX_IMITATION_LINES:
            self.markers.imitation_lines.append(lineno)

    def _mean(self, body: str) -> None:
        found = self.markers
        if body == self.table.last:
            self._done = True
        elif body in self._begins:
            self.step = self._begins[body]
        elif (m := _RESULT.fullmatch(body)) and m.group("step") in self.table.steps:
            if m.group("step") == self.step:  # the first result after its begin; no later one counts
                errno = int(m.group("errno")) if m.group("errno") else None
                found.results[self.step] = StepResult(int(m.group("rc")), errno)
            self.step = None
        elif (m := _TIMEOUT.fullmatch(body)) and m.group("step") in self.table.steps:
            found.timed_out = found.timed_out or m.group("step")
            self.step = None
        else:
            for name, rx in self._facts.items():
                if name not in found.facts and (f := rx.fullmatch(body)):
                    found.facts[name] = f.group(1) if rx.groups else f.group(0)


def read_markers(lines: Iterable[str], table: MarkerTable, nonce: str | None = None) -> Markers:
    """The markers of a console's lines (each with or without its line end), by ``table``: all a
    guest whose console says nothing else that matters needs."""
    reader = MarkerReader(table, nonce)
    for lineno, line in enumerate(lines, 1):
        reader.feed(line.replace("\r", "").rstrip("\n"), lineno)
    return reader.markers
