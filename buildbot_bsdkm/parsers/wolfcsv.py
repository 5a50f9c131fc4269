"""wolfCrypt benchmark ``-csv`` tables (plain and GENERATE_MACHINE_PARSEABLE_REPORT).

The unit trap: the symmetric header always says "MB/s" but each row is printed in
its own auto-scaled unit (PBKDF2 comes out in KiB/s). The rows carry no unit, so
it is inferred per row from the cycle counter: rate x cycles-per-byte is the TSC
rate in Hz once the rate is in bytes/s (log-formats §9), and only one power of 1024
puts that product in the range of a real CPU clock. Without a cycles column the
unit cannot be known: the row keeps the header's "MB/s" with ``per_second = 0``
(unknown) and a warning. Base-10 (``-base10``) CSV cannot be told apart from
base 2 this way (the factors differ by 4.9 %); such rows are labelled MiB/s.
Machine-parseable rows carry bytes and seconds, so their rate is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import BenchKind, Benchmark, Problem
from .text import fold_spaces
from .wolfcrypt import JAPANESE_OPERATIONS

CSV_INTRO = "This format allows you to easily copy the output to a csv file."
_HEADER_FIRST = frozenset('"A')  # every header below starts with one of these
_PLAUSIBLE_TSC_HZ = (1.5e8, 1.5e10)
_POW1024_UNITS = (("bytes/s", 1.0), ("KiB/s", 1024.0), ("MiB/s", 1024.0**2), ("GiB/s", 1024.0**3))
_EXACT_UNITS = (
    ("bytes/s", 1.0),
    ("KB/s", 1e3),
    ("KiB/s", 1024.0),
    ("MB/s", 1e6),
    ("MiB/s", 1024.0**2),
    ("GB/s", 1e9),
    ("GiB/s", 1024.0**3),
)


def infer_unit_from_cycles(rate: float, cycles_per_byte: float) -> tuple[str, float] | None:
    """The (unit, factor) that makes rate x cpb a plausible TSC frequency, if exactly one does."""
    product = rate * cycles_per_byte
    low, high = _PLAUSIBLE_TSC_HZ
    found = None
    for unit_factor in _POW1024_UNITS:
        if low <= product * unit_factor[1] <= high:
            if found is not None:
                return None
            found = unit_factor
    return found


def unit_from_exact_rate(rate: float, bytes_per_second: float) -> str:
    if rate <= 0:
        return "bytes/s"
    ratio = bytes_per_second / rate
    return min(_EXACT_UNITS, key=lambda uf: abs(uf[1] - ratio) / uf[1])[0]


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _join_comma_decimal(fields: list[str], at: int) -> list[str]:
    """WOLFSSL_NO_FLOAT_FMT prints '1320,000788563': glue the 9-digit fraction back on."""
    nxt = fields[at + 1] if at + 1 < len(fields) else ""
    if fields[at].isdigit() and len(nxt) == 9 and nxt.isdigit():
        return fields[:at] + [f"{fields[at]}.{nxt}"] + fields[at + 2 :]
    return fields


@dataclass
class CsvTable:
    """Which CSV table we are in and what its header promised."""

    kind: str | None = None  # "sym" | "asym" | None
    machine: bool = False
    has_cycles: bool = False
    warned_unit: bool = False
    warned_no_cycles: bool = False
    pending_problems: list[Problem] = field(default_factory=list)

    def header(self, line: str) -> bool:
        """Recognise a header line and switch table; True if it was one."""
        if line[:1] not in _HEADER_FIRST:
            return False
        if line.startswith('"sym",Algorithm'):
            self.kind, self.machine, self.has_cycles = "sym", True, True
        elif line.startswith('"asym",Algorithm'):
            self.kind, self.machine = "asym", True
        elif line.startswith("Algorithm,key size,operation"):
            self.kind, self.machine = "asym", False
        elif line.startswith("Algorithm,MB/s") or line.startswith("Algorithm,HW/SW,MB/s"):
            self.kind, self.machine = "sym", False
            self.has_cycles = "Cycles per byte" in line
        else:
            return False
        return True

    def row(self, line: str, lineno: int, block_size: int | None) -> Benchmark | None:
        fields = line.split(",")
        if fields and fields[-1] == "":
            fields.pop()
        if fields and fields[0] == "sym":
            return self._machine_sym(fields[1:], lineno, block_size)
        if fields and fields[0] == "asym":
            return self._asym(fields[1:], lineno, machine=True)
        if self.kind == "sym":
            return self._plain_sym(fields, lineno, block_size)
        # RNG init rows are asymmetric-shaped and may come before any header.
        return self._asym(fields, lineno, machine=False)

    def _plain_sym(self, fields: list[str], lineno: int, block_size: int | None) -> Benchmark | None:
        if len(fields) < 2:
            return None
        fields = _join_comma_decimal(fields, 1)
        name = fields[0].strip()
        rate = _float(fields[1])
        cycles = _float(fields[2]) if self.has_cycles and len(fields) > 2 else None
        if not name or rate is None:
            return None
        unit, per_second = "MB/s", 0.0
        inferred = infer_unit_from_cycles(rate, cycles) if cycles else None
        if inferred is not None:
            unit, per_second = inferred[0], rate * inferred[1]
            if not self.warned_unit:
                self.warned_unit = True
                self.pending_problems.append(
                    Problem(
                        "CSV rows carry no unit (header says MB/s): unit inferred per row from "
                        "rate x cycles/byte; a -base10 run would be mislabelled MiB/s",
                        lineno,
                        "warning",
                    )
                )
        elif not self.warned_no_cycles:
            self.warned_no_cycles = True
            self.pending_problems.append(
                Problem(
                    "CSV row unit unknown (header says MB/s, rows are auto-scaled, no cycles "
                    "column to infer it): per_second left 0",
                    lineno,
                    "warning",
                )
            )
        return Benchmark(
            name, rate, unit, BenchKind.SYMMETRIC, per_second, cycles, None, None, block_size, line=lineno
        )

    def _machine_sym(self, fields: list[str], lineno: int, block_size: int | None) -> Benchmark | None:
        # name, HW/SW, bytes_total, seconds_total, MB/s, cycles_total, Cycles per byte
        if len(fields) < 5:
            return None
        total, secs = _float(fields[2]), _float(fields[3])
        fields = _join_comma_decimal(fields, 4)
        rate = _float(fields[4])
        cycles = _float(fields[6]) if len(fields) > 6 else None
        if total is None or secs is None or rate is None or not fields[0].strip():
            return None
        per_second = total / secs if secs > 0 else 0.0
        return Benchmark(
            name=fields[0].strip(),
            value=rate,
            unit=unit_from_exact_rate(rate, per_second),
            kind=BenchKind.SYMMETRIC,
            per_second=per_second,
            cycles=cycles,
            seconds=secs,
            amount=total,
            block_size=block_size,
            line=lineno,
        )

    def _asym(self, fields: list[str], lineno: int, *, machine: bool) -> Benchmark | None:
        # algo, key size, operation, avg ms, ops/sec[, ops, secs, cycles, cycles/op]
        if len(fields) < 5 or not fields[1].strip().isdigit():
            return None
        rate = _float(fields[4])
        if rate is None or _float(fields[3]) is None:
            return None
        algo = fold_spaces(fields[0])
        strength = fields[1].strip()
        op = fields[2].strip()
        op = JAPANESE_OPERATIONS.get(op, op)
        extra = [_float(f) for f in fields[5:9]] if machine and len(fields) >= 9 else None
        return Benchmark(
            name=" ".join(p for p in (algo, strength, op) if p),
            value=rate,
            unit="ops/s",
            kind=BenchKind.ASYMMETRIC,
            per_second=rate,
            cycles=extra[3] if extra else None,
            seconds=extra[1] if extra else None,
            amount=extra[0] if extra else None,
            algorithm=algo,
            strength=strength,
            operation=op,
            line=lineno,
        )

    def take_problems(self) -> list[Problem]:
        out, self.pending_problems = self.pending_problems, []
        return out
