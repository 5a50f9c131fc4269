"""Single-line matchers for wolfCrypt's benchmark and self-test text output.

Each function takes one cleaned line (kernel prefixes already removed) and returns a
record or ``None``. State (which item a failure belongs to, sections) lives in the engine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import RATE_UNITS, BenchKind, Benchmark, SelfTest

BYTE_UNITS: dict[str, float] = {
    "bytes": 1.0,
    "KiB": 1024.0,
    "MiB": 1024.0**2,
    "GiB": 1024.0**3,
    "KB": 1000.0,
    "MB": 1000.0**2,
    "GB": 1000.0**3,
}

# "MiB" -> ("MiB/s", factor to bytes/s), for every unit _SYM_TAIL's rate may carry.
_RATE_OF: dict[str, tuple[str, float]] = {u: (u + "/s", RATE_UNITS[u + "/s"]) for u in BYTE_UNITS}

# `-lng 1` translates the first eight operation words; baselines need one identity.
JAPANESE_OPERATIONS: dict[str, str] = {
    "公開鍵": "public",
    "秘密鍵": "private",
    "鍵生成": "key gen",
    "鍵共有": "agree",
    "署名": "sign",
    "検証": "verify",
    "暗号化": "encrypt",
    "復号化": "decrypt",
}

# The tail of a symmetric line, searched (not matched) so the free-form name in front
# never has to be matched by a backtracking group. It starts at the space before the
# amount (a literal first character lets the search skip ahead in C).
_SYM_TAIL = re.compile(
    r" (?P<amount>\d+(?:\.\d+)?) (?P<aunit>bytes|[KMG]i?B) \S+ (?P<secs>\d+\.\d+) [^,\s]+, +"
    r"(?P<rate>\d+\.\d+) (?P<runit>bytes|[KMG]i?B)/s"
    r"(?:, (?P<cyctot>\d+) cycles,)?(?: [^=]+= +(?P<cpb>\d+\.\d+))?"
)
# The tail of an asymmetric line:
# "<count> ops took <s> sec, avg <ms> ms, <rate> ops/sec[, <n> cycles <c> Cycles/op]".
_ASYM_TAIL = re.compile(
    r" (?P<count>\d+) (?:\S+ )?\S+ (?P<secs>\d+\.\d+) [^,\s]+, (?:[^,\s]+ (?P<avg>\d+\.\d+) ms, +)?"
    r"(?P<rate>\d+\.\d+) [^,\s]+(?:, (?P<cyctot>\d+) cycles +(?P<cpo>\d+\.\d+) Cycles/op)?"
)
_HW_SW = ("HW", "SW")
_HW_SW_TAILS = frozenset((" HW", " SW"))

BENCH_HEADER = re.compile(r"wolfCrypt Benchmark \(block bytes (?P<block>\d+), min (?P<min>[\d.]+) sec each\)")
BENCH_ITEM_FAILED = re.compile(r"^Benchmark (?P<desc>.+?) failed: (?P<code>-?\d+)\s*$")
VERSION = re.compile(r"^\s*wolfSSL version (?P<version>\S+)")
# The name ends at a character other than a space and the spaces after it are taken whole: a name
# allowed to end inside a long run of spaces would try the run again from each space (quadratic).
TEST_RESULT = re.compile(r"^(?P<name>\S(?:.*?[^ ])??) ++test (?P<result>passed|failed)!\s*$")
TEST_ERROR = re.compile(
    r"^\s*error L=(?P<line>\d+)"
    r"(?: (?:code=(?P<code>-?\d+)|errno=(?P<errno>-?\d+)|i=(?P<i>-?\d+)))?"
    r"(?: \((?P<text>.*)\))?\s*$"
)
RETURN_CODE = re.compile(r"^Exiting main with return code: (?P<rc>-?\d+)")

# Error lines benchmark.c prints without a common prefix (log-formats §3.1).
_FREE_FORM_ERRORS = re.compile(
    r"failed, ret = |failed at L\d+|out of memory at |alloc failed|InitRNG failed|wolfCrypt_Init failed"
    r"|^\w+ failed: -?\d+|\(Skipped: Disabled\)|benchmark is with 128-bit keys only|^Option not recognized"
)


def parse_symmetric(
    line: str,
    lineno: int,
    block_size: int | None,
    _search=_SYM_TAIL.search,  # noqa: B008 - bound once: this runs for every result line
    _sym=BenchKind.SYMMETRIC,
) -> Benchmark | None:
    m = _search(line)
    if m is None:
        return None
    name = line[: m.start()].strip()
    if name[-3:] in _HW_SW_TAILS:  # device builds fill the HW/SW slot
        name = name[:-3].rstrip()
    if not name:
        return None
    amount, aunit, secs, rate_text, runit, _cyctot, cpb = m.groups()
    unit, factor = _RATE_OF[runit]
    rate = float(rate_text)
    return Benchmark(
        name,
        rate,
        unit,
        _sym,
        rate * factor,
        None if cpb is None else float(cpb),
        float(secs),
        float(amount) * BYTE_UNITS[aunit],
        block_size,
        None,
        None,
        None,
        None,
        lineno,
    )


def split_asym_head(head: str) -> tuple[str, str, str] | None:
    """'ML-KEM 512    128  key gen' -> ("ML-KEM 512", "128", "key gen"): algorithm, strength, operation.

    The strength is the last all-digit word: operations never start with a digit,
    and algorithm names may hold digits ("ML-KEM 512").
    """
    words = head.split()
    if words and words[-1] in _HW_SW:
        words.pop()
    for i in range(len(words) - 1, 0, -1):
        if words[i].isdigit():
            op = " ".join(words[i + 1 :])
            algorithm = " ".join(words[:i])  # = fold_spaces: split() already folded the spaces
            if "[" in algorithm:
                algorithm = algorithm.replace("[ ", "[").replace(" ]", "]")
            return algorithm, words[i], JAPANESE_OPERATIONS.get(op, op)
    return None


def parse_asymmetric(
    line: str,
    lineno: int,
    _search=_ASYM_TAIL.search,  # noqa: B008 - bound once: this runs for every result line
    _asym=BenchKind.ASYMMETRIC,
) -> Benchmark | None:
    m = _search(line)
    if m is None:
        return None
    parts = split_asym_head(line[: m.start()])
    if parts is None:
        return None
    algorithm, strength, op = parts
    count, secs, _avg, rate_text, _cyctot, cpo = m.groups()
    rate = float(rate_text)
    return Benchmark(
        f"{algorithm} {strength} {op}" if op else f"{algorithm} {strength}",
        rate,
        "ops/s",
        _asym,
        rate,
        None if cpo is None else float(cpo),
        float(secs),
        float(count),
        None,
        algorithm,
        strength,
        op,
        None,
        lineno,
    )


def parse_test_result(line: str, lineno: int) -> SelfTest | None:
    m = TEST_RESULT.match(line)
    if m is None:
        return None
    return SelfTest(name=m["name"].strip(), passed=m["result"] == "passed", line=lineno)


def apply_test_error(test: SelfTest, m: re.Match[str]) -> None:
    """Attach ' error L=34448 code=-125 (out of memory error)' to the failed test."""
    test.error = m.group(0).strip()
    if m["code"] is not None:
        test.code = int(m["code"])


def is_free_form_error(line: str) -> bool:
    return _FREE_FORM_ERRORS.search(line) is not None


def may_be_free_form_error(line: str) -> bool:
    """Cheap guard: False means is_free_form_error is False (each branch holds one of these)."""
    return (
        "failed" in line
        or "out of memory at " in line
        or "(Skipped: Disabled)" in line
        or "benchmark is with 128-bit keys only" in line
        or line.startswith("Option not recognized")
    )


@dataclass(frozen=True)
class EncodedError:
    """wolfcrypt_test()'s encoded return value: -(line + |code|*100000 + tag*2^29)."""

    value: int
    source_line: int
    code: int | None  # wolfCrypt error code (negative) when tag == 1
    errno: int | None  # tag == 2
    index: int | None  # tag == 3 ("i=")

    def as_detail(self) -> dict[str, int]:
        detail = {"return_code": self.value, "source_line": self.source_line}
        for key in ("code", "errno", "index"):
            v = getattr(self, key)
            if v is not None:
                detail[key] = v
        return detail


def decode_test_error(value: int) -> EncodedError:
    v = abs(value)
    tag = v >> 29
    rest = v - (tag << 29)
    number, source_line = divmod(rest, 100000)
    return EncodedError(
        value=value,
        source_line=source_line,
        code=-number if tag == 1 else None,
        errno=number if tag == 2 else None,
        index=number if tag == 3 else None,
    )


UNNAMED_NOTE = "decoded: "


def unnamed_note(decoded: EncodedError) -> str:
    """``decoded: test.c:5895, vector 1; the test's name needs the build's test.c``: what a log alone says."""
    what = next((f", {word} {v}" for word, v in (("code", decoded.code), ("errno", decoded.errno),
                                                 ("vector", decoded.index)) if v is not None), "")
    return f"{UNNAMED_NOTE}test.c:{decoded.source_line}{what}; the test's name needs the build's test.c"
