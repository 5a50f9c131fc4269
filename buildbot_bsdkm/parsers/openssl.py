"""`openssl speed` output: text table, `-mr` lines, `-multi` summed table, stderr progress.

The results table is printed only at the very end, so it is the completion marker.
Progress lines ("Doing ... : C ALG's in Ts", "+R:") also give counts; they are kept
(bounded) and turned into results only when no table ever appears, and then the
log is reported incomplete.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..model import BenchKind, Benchmark, Problem
from .records import Record
from .registry import Ending, ReadsEachLine

DEFAULT_SIZES = (16, 64, 256, 1024, 8192, 16384)
_MAX_PROGRESS = 10000

_TYPE_HEADER = re.compile(r"^type\s+((?:\d+ bytes\s*)+)$")
_VALUE = r"\d+(?:\.\d+)?k?"
_ROW = re.compile(rf"^(?P<name>\S.*?)\s+(?P<values>{_VALUE}(?:\s+{_VALUE})*)\s*$")
_PKEY_ROW = re.compile(
    r"^(?P<alg>rsa|dsa)\s+(?P<bits>\d+) bits\s+(?P<t1>[\d.]+)s\s+(?P<t2>[\d.]+)s"
    r"\s+(?P<r1>[\d.]+)\s+(?P<r2>[\d.]+)\s*$"
)
_DOING = re.compile(
    r"^Doing (?P<alg>.+?) for (?P<secs>[\d.]+)s on (?P<size>\d+) size blocks: "
    r"(?:(?P<count>\d+) .+?'s in (?P<t>[\d.]+)s)?\s*$"
)
_DOING_PKEY = re.compile(
    r"^Doing (?P<bits>\d+) bits (?P<op>private|public|sign|verify) (?P<alg>\w+)'s for [\d.]+s: "
    r"(?:(?P<count>\d+) .+? in (?P<t>[\d.]+)s)?\s*$"
)
_MR_F = re.compile(r"^\+F:\d+:(?P<name>[^:]+):(?P<values>[\d.:]+)\s*$")
_MR_F2 = re.compile(r"^\+F2:\d+:(?P<bits>\d+):(?P<sign>[\d.]+):(?P<verify>[\d.]+)\s*$")
_MR_DT = re.compile(r"^\+DT:(?P<alg>[^:]+):(?P<secs>[\d.]+):(?P<size>\d+)\s*$")
_MR_R = re.compile(r"^\+R:(?P<count>\d+):(?P<alg>[^:]+):(?P<t>[\d.]+)\s*$")
_SKIP_PREFIXES = (
    "version:",
    "built on:",
    "options:",
    "compiler:",
    "CPUINFO:",
    "Forked child",
    "Got: +F",
    "You have chosen",
    "The 'numbers'",
    "+DTP:",
    "+R1:",
    "+R2:",
    "+H:",
)
_PKEY_OPS = {"rsa": ("sign", "verify"), "dsa": ("sign", "verify")}


def symmetric_item(
    alg: str, size: int, bytes_per_second: float, unit: str, value: float, lineno: int
) -> Benchmark:
    return Benchmark(
        name=f"openssl:{alg}@{size}",
        value=value,
        unit=unit,
        kind=BenchKind.OPENSSL,
        per_second=bytes_per_second,
        block_size=size,
        algorithm=alg,
        line=lineno,
    )


def pkey_item(alg: str, bits: str, op: str, rate: float, lineno: int) -> Benchmark:
    return Benchmark(
        name=f"openssl:{alg.upper()} {bits} {op}",
        value=rate,
        unit="ops/s",
        kind=BenchKind.ASYMMETRIC,
        per_second=rate,
        algorithm=alg.upper(),
        strength=bits,
        operation=op,
        line=lineno,
    )


@dataclass
class OpenSSLParser(ReadsEachLine):
    """``registry.LineParser`` for ``openssl speed`` output."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    results_seen: bool = False
    progress: list[Benchmark] = field(default_factory=list)
    open_progress: tuple[int, str] | None = None  # (line, text) of a progress line without its result
    metadata: dict[str, Any] = field(default_factory=dict)
    last_size: int | None = None  # block size announced by the last "+DT:" line
    recognised: int = 0

    def read(self, line: str, lineno: int) -> tuple[list[Benchmark | Problem], bool]:
        """Records from one line and whether the line meant anything."""
        if line.startswith("Got: "):  # -multi: a child's result, summed later by the parent
            line = line[5:].rsplit(" from ", 1)[0]
            if line.startswith("+H:"):
                self._set_sizes(line[3:].split(":"))
            return [], True
        if line.startswith("+"):
            return self._machine_readable(line, lineno)
        if line.startswith("Doing "):
            return self._progress(line, lineno), True
        if line.startswith(_SKIP_PREFIXES):
            self._header_metadata(line)
            return [], True
        m = _TYPE_HEADER.match(line)
        if m:
            self._set_sizes(re.findall(r"\d+", m[1]))
            return [], True
        m = _PKEY_ROW.match(line)
        if m:
            self.results_seen = True
            ops = _PKEY_OPS[m["alg"]]
            return [
                pkey_item(m["alg"], m["bits"], ops[0], float(m["r1"]), lineno),
                pkey_item(m["alg"], m["bits"], ops[1], float(m["r2"]), lineno),
            ], True
        if line.strip().startswith("sign") and "verify" in line:
            return [], True
        return self._table_row(line, lineno)

    def _set_sizes(self, parts: list[str]) -> None:
        sizes = tuple(int(p) for p in parts if p.strip().isdigit())
        if sizes:
            self.sizes = sizes

    def _header_metadata(self, line: str) -> None:
        if line.startswith("version:"):
            self.metadata["openssl_version"] = line.split(":", 1)[1].strip()
        elif line.startswith("CPUINFO:"):
            self.metadata["openssl_cpuinfo"] = line.split(":", 1)[1].strip()
        elif line.startswith("+H:"):
            self._set_sizes(line[3:].split(":"))

    def _table_row(self, line: str, lineno: int) -> tuple[list[Benchmark | Problem], bool]:
        m = _ROW.match(line) if len(line) < 512 else None
        if m is None:
            return [], False
        values = m["values"].split()
        if len(values) != len(self.sizes):
            return [], False
        self.results_seen = True
        out: list[Benchmark | Problem] = []
        for size, text in zip(self.sizes, values, strict=True):
            if text.endswith("k"):
                v = float(text[:-1])
                out.append(symmetric_item(m["name"].strip(), size, v * 1000.0, "KB/s", v, lineno))
            else:
                v = float(text)
                out.append(symmetric_item(m["name"].strip(), size, v, "B/s", v, lineno))
        return out, True

    def _machine_readable(self, line: str, lineno: int) -> tuple[list[Benchmark | Problem], bool]:
        m = _MR_F.match(line)
        if m:
            self.results_seen = True
            values = [v for v in m["values"].split(":") if v]
            return [
                symmetric_item(m["name"], size, float(v), "B/s", float(v), lineno)
                for size, v in zip(self.sizes, values, strict=False)
            ], True
        m = _MR_F2.match(line)
        if m:
            self.results_seen = True
            return [
                pkey_item("rsa", m["bits"], "sign", float(m["sign"]), lineno),
                pkey_item("rsa", m["bits"], "verify", float(m["verify"]), lineno),
            ], True
        m = _MR_DT.match(line)
        if m:
            self.open_progress = (lineno, line.strip())
            self.last_size = int(m["size"])
            return [], True
        m = _MR_R.match(line)
        if m:
            self.open_progress = None
            t = float(m["t"])
            if self.last_size is not None and t > 0:
                bps = int(m["count"]) * self.last_size / t
                self._keep(symmetric_item(m["alg"], self.last_size, bps, "B/s", bps, lineno))
            return [], True
        if line.startswith("+H:"):
            self._set_sizes(line[3:].split(":"))
            return [], True
        return [], line.startswith(("+DTP:", "+R1:", "+R2:", "+F"))

    def _progress(self, line: str, lineno: int) -> list[Benchmark | Problem]:
        m = _DOING.match(line)
        if m and m["count"] is not None:
            self.open_progress = None
            t = float(m["t"])
            size = int(m["size"])
            bps = int(m["count"]) * size / t if t > 0 else 0.0
            self._keep(symmetric_item(m["alg"], size, bps, "B/s", bps, lineno))
            return []
        p = _DOING_PKEY.match(line)
        if p and p["count"] is not None:
            self.open_progress = None
            t = float(p["t"])
            rate = int(p["count"]) / t if t > 0 else 0.0
            op = {"private": "sign", "public": "verify"}.get(p["op"], p["op"])
            self._keep(pkey_item(p["alg"].lower(), p["bits"], op, rate, lineno))
            return []
        self.open_progress = (lineno, line.strip())
        return []

    def _keep(self, item: Benchmark) -> None:
        if len(self.progress) < _MAX_PROGRESS:
            self.progress.append(item)

    def finish(self, out: list[Record], lines: int) -> Ending:
        """Without a results table the progress lines' results, and the log is incomplete."""
        if self.results_seen:
            return Ending()
        if self.open_progress is not None:
            ln, text = self.open_progress
            reason = (
                f"openssl speed was cut off: line {ln} '{text}' has no result and no results table followed"
            )
        elif self.progress:
            reason = (
                "no openssl speed results table (it is printed only at the end): "
                "results taken from progress lines; a killed run or a stderr-only log"
            )
        else:
            reason = "no openssl speed results found"
        out.extend(self.progress)
        return Ending(incomplete=reason)
