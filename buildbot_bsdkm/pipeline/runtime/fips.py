"""The FIPS round trip: load, read the in-core hash the module asks for, rebuild with it, load again.

A FIPS module's integrity check compares a hash of its own code with the value it was built
with (``-DWOLFCRYPT_FIPS_CORE_HASH_VALUE=...``). The hash of a fresh build is only known once
the module has been loaded and refused itself (bsdkm/README.md, linuxkm the same way), so a
FIPS build needs two builds and two loads, and only the second load's self-test counts.

The sequence is written once over two callables (build with a hash or the placeholder, load
and parse), so the pipeline, the FreeBSD replay double and a Linux FIPS source use the same steps.
Debian's wolfSSL source (the default) has no FIPS boundary code: ``--enable-fips`` needs
wolfSSL's separately distributed FIPS sources, so this runs only where such a source is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...model import LogResult
from .loading import ModuleLoadOutcome

HASH_DEFINE = "WOLFCRYPT_FIPS_CORE_HASH_VALUE"
PLACEHOLDER_HASH = "0123456789abcdef" * 4  # what bsdkm/README.md builds with first
PASS_EVENTS = ("fips_selftest_passed", "selftest_passed")

Build = Callable[[str], Path]  # hash → the built .ko
Load = Callable[[Path, int], tuple[ModuleLoadOutcome, LogResult]]  # (.ko, attempt) → outcome, parsed log


def is_fips(flags: list[str] | tuple[str, ...]) -> bool:
    """True for a build configured with ``--enable-fips[=vN]`` (and not ``=no``)."""
    on = False
    for f in flags:
        if f == "--disable-fips" or f == "--enable-fips=no":
            on = False
        elif f == "--enable-fips" or f.startswith("--enable-fips="):
            on = True
    return on


def hash_cflag(value: str) -> str:
    return f"-D{HASH_DEFINE}={value}"


def requested_hash(log: LogResult) -> str | None:
    """The hash a refused FIPS module asks to be rebuilt with (parsers/lifecycle.py extracts it)."""
    for event in log.lifecycle:
        if event.kind == "fips_hash_mismatch" and event.detail.get("hash"):
            return str(event.detail["hash"])
    return None


def selftest_passed(outcome: ModuleLoadOutcome, log: LogResult) -> bool:
    kinds = {e.kind for e in log.lifecycle}
    return (
        outcome.load_rc == 0
        and not outcome.timed_out
        and not log.failed_tests
        and log.selftest_summary is not False
        and "fips_hash_mismatch" not in kinds
        and bool(kinds & set(PASS_EVENTS))
    )


@dataclass
class FipsStep:
    name: str
    ok: bool
    message: str


@dataclass
class FipsRoundTrip:
    steps: list[FipsStep] = field(default_factory=list)
    hash: str | None = None  # the hash the module asked for on its first load
    outcome: ModuleLoadOutcome | None = None  # the load that counts (the last one)
    log: LogResult | None = None
    passed: bool = False

    @property
    def failure(self) -> str | None:
        bad = next((s for s in self.steps if not s.ok), None)
        return None if self.passed else (bad.message if bad else "FIPS round trip did not finish")

    def record(self) -> dict[str, Any]:
        return {"hash": self.hash, "passed": self.passed, "steps": [asdict(s) for s in self.steps]}


def fips_round_trip(build: Build, load: Load) -> FipsRoundTrip:
    """Build with the placeholder, load (expect the mismatch), rebuild with the asked-for hash, load."""
    trip = FipsRoundTrip()
    ko = build(PLACEHOLDER_HASH)
    trip.steps.append(FipsStep("build", True, f"built {ko.name} with the placeholder in-core hash"))
    outcome, log = load(ko, 1)
    trip.outcome, trip.log = outcome, log
    asked = requested_hash(log)
    if asked is None:
        if selftest_passed(outcome, log):  # the placeholder happened to be right (a rebuilt, known hash)
            trip.steps.append(FipsStep("load", True, "first load passed its self-test: no rebuild needed"))
            trip.passed = True
            return trip
        trip.steps.append(FipsStep("load", False, "FIPS first load failed without an in-core hash mismatch "
                                   f"(load rc {outcome.load_rc}): nothing to rebuild with"))
        return trip
    trip.hash = asked
    trip.steps.append(FipsStep("load", True, f"first load refused as expected: in-core hash mismatch, the "
                               f"module asks for {asked}"))
    ko = build(asked)
    trip.steps.append(FipsStep("rebuild", True, f"rebuilt {ko.name} with {HASH_DEFINE}={asked}"))
    outcome, log = load(ko, 2)
    trip.outcome, trip.log = outcome, log
    if selftest_passed(outcome, log):
        trip.steps.append(FipsStep("reload", True, "second load passed the FIPS self-test"))
        trip.passed = True
        return trip
    again = requested_hash(log)
    why = (f"the hash still does not match (now {again})" if again else
           f"load rc {outcome.load_rc}, {len(log.failed_tests)} failed self-test(s)")
    trip.steps.append(FipsStep("reload", False, f"FIPS second load after the rebuild failed: {why}"))
    return trip
