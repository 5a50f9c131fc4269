"""A toy log format, all in this module: a kernel's console where a toy module prints a ring benchmark.

    toy: begin
    toy: ring bytes=64 ops=1000 ns=2000000
    toy: end

``test_toy_log_format.py`` adds it with one ``register`` line.
"""

from __future__ import annotations

from typing import Any

from buildbot_bsdkm.model import BenchKind, Benchmark, LogFormat, Problem
from buildbot_bsdkm.parsers.formats import Ending
from buildbot_bsdkm.parsers.records import Record

TOY = LogFormat.define("toy-ring-log", kernel=True)


def shows(line: str) -> bool:
    return "toy: begin" in line  # after a printk stamp, as a kernel prints it


class ToyRingParser:
    """``LineParser`` for the toy: a benchmark item a ring line, complete at ``toy: end``."""

    def __init__(self) -> None:
        self.recognised = 0
        self.metadata: dict[str, Any] = {}
        self.ended = False

    def feed(self, line: str, n: int, out: list[Record]) -> None:
        if not line.startswith("toy: "):
            return
        self.recognised += 1
        word, _, rest = line[5:].partition(" ")
        if word == "end":
            self.ended = True
        elif word == "ring":
            f = dict(part.split("=", 1) for part in rest.split() if "=" in part)
            size, ops, ns = int(f["bytes"]), int(f["ops"]), int(f["ns"])
            rate = size * ops / (ns / 1e9)
            out.append(Benchmark(f"toy:ring@{size}", round(rate / 1e6, 3), "MB/s", BenchKind.OPENSSL,
                                 per_second=rate, block_size=size, line=n))
        elif word != "begin":
            out.append(Problem(f"line {n}: not a toy line: {line}", n, "warning"))

    def finish(self, out: list[Record], lines: int) -> Ending:
        return Ending(None if self.ended else "no 'toy: end' line (cut off?)", benchmark_complete=self.ended)
