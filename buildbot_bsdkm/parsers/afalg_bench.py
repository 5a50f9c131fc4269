"""The AF_ALG benchmark's output (``kmod/linux/afalg_bench.c``, the lkcapi variant).

One fact a line::

    afalg-bench: begin version=1 budget_ms=100 sizes=16,64,... paths=lkcapi,kernel,name,user
    afalg-proc: name=gcm(aes) driver=gcm-aes-aesni-wolfcrypt module=libwolfssl priority=100000 type=aead ...
    afalg-bound: path=lkcapi alg=gcm(aes) requested=... driver=... module=libwolfssl priority=100000
    afalg-result: path=lkcapi alg=gcm(aes) driver=... bytes=16 ops=5120 ns=100012345
    afalg-error: path=kernel alg=gcm(aes) stage=bind errno=2 (No such file or directory)
    afalg-bench: end results=84 errors=0

Each result is a block-size item named ``afalg:<path>:<ALG>@<bytes>`` (``afalg:lkcapi:AES-128-GCM@16``),
kind ``openssl`` (an item at one block size, bytes/s), so the ``crossovers`` policy can pair
the paths of one run (``paths:`` in a crossover rule). Paths: ``lkcapi`` (AF_ALG bound to
wolfCrypt's registered driver), ``kernel`` (AF_ALG bound to the kernel's own driver),
``name`` (AF_ALG bound by the generic name: whatever the kernel picks by priority),
``user`` (wolfCrypt in user space). The /proc/crypto entries and the driver each bind
really used go to the log's metadata (``afalg_proc``, ``afalg_bound``). The end line is the
completion marker.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

from ..model import BenchKind, Benchmark, Problem
from .records import Record
from .registry import Ending, ReadsEachLine

# Kernel algorithm names and the names wolfCrypt/OpenSSL readers know them by.
ALG_NAMES = {"gcm(aes)": "AES-128-GCM", "cbc(aes)": "AES-128-CBC", "sha256": "SHA-256",
             "hmac(sha256)": "HMAC-SHA256"}
# Only at a word's start: from inside a long word every start would scan it again (quadratic).
_FIELD = re.compile(r"(?<!\w)(\w+)=(\S+)")
_MAX_FACTS = 512
STARTS = ("afalg-bench: begin",)  # the line that shows the format (formats.py)
_PREFIXES = ("afalg-bench:", "afalg-proc:", "afalg-bound:", "afalg-result:", "afalg-error:", "afalg-kmod:")


def item_name(path: str, alg: str, size: int) -> str:
    return f"afalg:{path}:{ALG_NAMES.get(alg, alg)}@{size}"


def split_name(name: str) -> tuple[str, str, int] | None:
    """(path, algorithm, block bytes) of an ``afalg:`` item name; None for other names."""
    m = re.fullmatch(r"\Aafalg:([^:]+):(.+)@(\d+)", name)
    return (m[1], m[2], int(m[3])) if m else None


def _fields(text: str) -> dict[str, str]:
    return dict(_FIELD.findall(text))


@dataclass
class AfalgParser(ReadsEachLine):
    """``registry.LineParser`` for the AF_ALG benchmark's lines."""

    begun: bool = False
    ended: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    last_line: int = 0
    recognised: int = 0

    def read(self, line: str, lineno: int) -> tuple[list[Benchmark | Problem], bool]:
        """Records from one line and whether the line meant anything."""
        line = line.strip()
        if not line.startswith(_PREFIXES):
            return [], False
        self.last_line = lineno
        head, _, rest = line.partition(" ")
        f = _fields(rest)
        if head == "afalg-bench:":
            return self._bench(rest, f, lineno), True
        if head == "afalg-result:":
            return self._result(f, lineno), True
        if head == "afalg-error:":
            return self._error(rest, f, lineno), True
        if head == "afalg-proc:":
            self._keep("afalg_proc", f.get("driver", "?"), f)
        elif head == "afalg-bound:":
            self._keep("afalg_bound", f"{f.get('path', '?')}:{f.get('alg', '?')}", f)
        elif head == "afalg-kmod:" and "failed" in rest:
            self.metadata.setdefault("afalg_kmod_failures", []).append(rest.strip())
        return [], True

    def _keep(self, key: str, ident: str, fields: dict[str, str]) -> None:
        table = self.metadata.setdefault(key, {})
        if ident in table or len(table) < _MAX_FACTS:  # a later dump of /proc/crypto wins
            if "priority" in fields:
                with contextlib.suppress(ValueError):
                    fields = {**fields, "priority": int(fields["priority"])}
            table[ident] = fields

    def _bench(self, rest: str, f: dict[str, str], lineno: int) -> list[Benchmark | Problem]:
        if rest.startswith("begin"):
            self.begun = True
            self.metadata["afalg_budget_ms"] = _int(f.get("budget_ms"))
            self.metadata["afalg_paths"] = f.get("paths", "").split(",")
        elif rest.startswith("end"):
            self.ended = True
            self.metadata["afalg_errors"] = _int(f.get("errors"))
        return []

    def _result(self, f: dict[str, str], lineno: int) -> list[Benchmark | Problem]:
        size, ops, ns = _int(f.get("bytes")), _int(f.get("ops")), _int(f.get("ns"))
        path, alg = f.get("path"), f.get("alg")
        if not path or not alg or not size or ops is None or not ns:
            return [Problem(f"line {lineno}: AF_ALG result line without path/alg/bytes/ops/ns", lineno)]
        bps = size * ops / (ns / 1e9)
        return [Benchmark(name=item_name(path, alg, size), value=round(bps / 1e6, 3), unit="MB/s",
                          kind=BenchKind.OPENSSL, per_second=bps, seconds=ns / 1e9, amount=float(size * ops),
                          block_size=size, algorithm=ALG_NAMES.get(alg, alg), line=lineno)]

    def _error(self, rest: str, f: dict[str, str], lineno: int) -> list[Benchmark | Problem]:
        self.metadata.setdefault("afalg_failures", []).append(rest.strip())
        return [Problem(f"AF_ALG benchmark: {rest.strip()}", lineno, "warning")]

    def finish(self, out: list[Record], lines: int) -> Ending:
        if self.ended:
            return Ending()
        if self.begun:
            return Ending(f"AF_ALG benchmark was cut off after line {self.last_line} (no 'afalg-bench: end')")
        return Ending("no AF_ALG benchmark output ('afalg-bench: begin') found")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
