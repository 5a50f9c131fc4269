"""The result model every part of bsdkm-ci speaks.

Parsers produce these records, the policy reads them, JUnit/Markdown writers
render them, and the JSON form (``to_json``/``from_json``) is both the
``bsdkm-ci parse --json`` output and the baseline format for regression gates.

Kept free of I/O and third-party imports so every shell can use it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

# A run's failure record crosses processes and shells, so it lives in ``contract``; named here too.
from .contract import FailureCategory as FailureCategory
from .contract import FailureReason as FailureReason
from .contract import StageFailure

SCHEMA_VERSION = 1


class BenchKind(StrEnum):
    SYMMETRIC = "sym"  # throughput per byte: bytes/s, cycles per byte
    ASYMMETRIC = "asym"  # operations: ops/s, cycles per op
    OPENSSL = "openssl"  # `openssl speed` item at one block size (bytes/s)


class _Formats(type):
    """Iterating ``LogFormat`` gives the formats defined so far, in the order they were defined."""

    def __iter__(cls) -> Iterator[LogFormat]:
        return iter(tuple(cls._defined.values()))  # type: ignore[attr-defined]


class LogFormat(str, metaclass=_Formats):
    """A log format, by the name results documents carry (``wolfcrypt-bench``).

    A closed set that ``define`` opens: the built-in formats are below, and a parser for another one
    defines its format once, then registers against it (``parsers/formats.py``). ``LogFormat(name)``
    is the format of that name, ValueError for a name never defined; a format compares, hashes and
    serialises as its name. ``kernel``: a kernel's log (the module's console, ``dmesg``): scanned for
    kernel trouble, shown in the kernel-health report and JUnit suite, incomplete without the
    module's init verdict.
    """

    _defined: ClassVar[dict[str, LogFormat]] = {}
    kernel: bool

    WOLFCRYPT_BENCH: ClassVar[LogFormat]
    WOLFCRYPT_BENCH_CSV: ClassVar[LogFormat]
    WOLFCRYPT_TEST: ClassVar[LogFormat]
    LINUX_KERNEL_LOG: ClassVar[LogFormat]
    FREEBSD_KERNEL_LOG: ClassVar[LogFormat]
    OPENSSL_SPEED: ClassVar[LogFormat]
    AFALG_BENCH: ClassVar[LogFormat]
    UNKNOWN: ClassVar[LogFormat]

    def __new__(cls, name: object) -> LogFormat:
        try:
            return cls._defined[str(name)]
        except KeyError:
            known = ", ".join(cls._defined)
            raise ValueError(f"{name!r} is not a log format (known: {known})") from None

    @classmethod
    def define(cls, name: str, *, kernel: bool = False) -> LogFormat:
        """The format called ``name``, defined once (again: the same format, if it says the same)."""
        known = cls._defined.get(name)
        if known is not None:
            if known.kernel != kernel:
                raise ValueError(f"log format {name!r} is already defined with kernel={known.kernel}")
            return known
        if not name or name != name.strip():
            raise ValueError(f"a log format's name is a word, not {name!r}")
        fmt = str.__new__(cls, name)
        fmt.kernel = kernel
        cls._defined[name] = fmt
        return fmt

    @property
    def value(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"LogFormat({str(self)!r})"

    def __reduce__(self) -> tuple[type[LogFormat], tuple[str]]:
        return LogFormat, (str(self),)

    def __copy__(self) -> LogFormat:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LogFormat:
        return self


LogFormat.WOLFCRYPT_BENCH = LogFormat.define("wolfcrypt-bench")
LogFormat.WOLFCRYPT_BENCH_CSV = LogFormat.define("wolfcrypt-bench-csv")
LogFormat.WOLFCRYPT_TEST = LogFormat.define("wolfcrypt-test")
LogFormat.LINUX_KERNEL_LOG = LogFormat.define("linux-kernel-log", kernel=True)
LogFormat.FREEBSD_KERNEL_LOG = LogFormat.define("freebsd-kernel-log", kernel=True)
LogFormat.OPENSSL_SPEED = LogFormat.define("openssl-speed")
LogFormat.AFALG_BENCH = LogFormat.define("afalg-bench")  # kmod/linux/afalg_bench.c (parsers/afalg_bench.py)
LogFormat.UNKNOWN = LogFormat.define("unknown")


# Units a benchmark value may carry, with the factor to bytes/s or ops/s.
RATE_UNITS: dict[str, float] = {
    "bytes/s": 1.0,
    "B/s": 1.0,
    "KiB/s": 1024.0,
    "MiB/s": 1024.0**2,
    "GiB/s": 1024.0**3,
    "KB/s": 1000.0,
    "MB/s": 1000.0**2,
    "GB/s": 1000.0**3,
    "ops/s": 1.0,
}


@dataclass
class Benchmark:
    """One benchmark item.

    ``name`` is the stable identity used by baselines and policy globs:
    symmetric items keep wolfCrypt's description (``AES-128-GCM-enc``),
    asymmetric ones are ``<algo> <strength> <op>`` with runs of spaces folded
    (``RSA 2048 private``, ``ECDSA [SECP256R1] 256 sign``), OpenSSL items
    ``openssl:<alg>@<block bytes>`` (``openssl:AES-128-CBC@16384``).
    """

    name: str
    value: float  # as printed
    unit: str  # as printed: MiB/s, KiB/s, MB/s, bytes/s, ops/s
    kind: BenchKind = BenchKind.SYMMETRIC
    per_second: float = 0.0  # normalised: bytes/s (sym, openssl) or ops/s (asym)
    cycles: float | None = None  # cycles per byte (sym) or per op (asym)
    seconds: float | None = None  # measured duration ("took N seconds")
    amount: float | None = None  # bytes (sym) or ops (asym) processed
    block_size: int | None = None  # bytes per call when known
    algorithm: str | None = None  # asym: "RSA"; openssl: "AES-128-CBC"
    strength: str | None = None  # asym key size / category as printed
    operation: str | None = None  # asym operation ("private", "sign", ...)
    error: str | None = None  # "Benchmark X failed: -180" attached to this item
    line: int | None = None  # 1-based line in the source log
    code: int | None = None  # a failed item's wolfCrypt error code (-180); absent in older documents

    @property
    def cycles_unit(self) -> str | None:
        if self.cycles is None:
            return None
        return "cycles/op" if self.kind == BenchKind.ASYMMETRIC else "cycles/byte"

    @property
    def failed(self) -> bool:
        return self.error is not None


@dataclass
class SelfTest:
    """One algorithm of wolfCrypt's self-test (``AES-GCM  test passed!``)."""

    name: str
    passed: bool
    error: str | None = None  # " error L=34448 code=-125 (out of memory error)"
    code: int | None = None  # wolfCrypt error code (-125) when printed
    line: int | None = None
    # A failure's fields, absent in older documents: the line it comes from as the log printed it
    # ("error: wolfcrypt test failed: -1610718631"); wolfcrypt_test()'s return value when that alone
    # tells of it (it encodes the test.c line and a code, errno or vector: wolfcrypt.decode_test_error);
    # and that value taken apart from the build's own test.c (triage/selftest_source.Decoded.to_dict).
    console: str | None = None
    return_code: int | None = None
    decoded: dict[str, Any] | None = None


@dataclass
class LifecycleEvent:
    """A fact about the module's life: loaded, cleanup, fpu state, crid, errors.

    ``kind`` values used by the parsers:
      loaded, load_failed, unloaded, cleanup_complete, cleanup_failed,
      selftest_passed, selftest_failed, benchmark_passed, benchmark_failed,
      fpu_state, fpu_error, crid_registered, crid_unregistered, detached,
      fips_hash_mismatch, fips_error, module_register_error, kldload_error,
      init_error, rng_error, taint, signature_warning, panic, oops
    ``detail`` carries the numbers (``{"cpu": 0, "nest": 0, "tid": 0}``,
    ``{"crid": 3}``, ``{"hash": "ABC..."}``, ``{"error": 85}``).
    """

    kind: str
    message: str
    detail: dict[str, Any] = field(default_factory=dict)
    line: int | None = None


@dataclass
class KernelEvent:
    """Kernel trouble seen in a kernel log: a splat, with the evidence (parsers/kernel_trouble.py).

    ``kind``: Linux ``bug``, ``oops``, ``gpf``, ``warning``, ``soft_lockup``, ``hard_lockup``,
    ``rcu_stall``, ``hung_task``, ``kasan``, ``ubsan``, ``kmemleak``, ``lockdep``, ``panic``;
    FreeBSD ``panic``, ``fatal_trap``, ``lock_order_reversal``, ``sleeping_thread_lock``,
    ``spin_lock_held``, ``fpu``, ``sleep_with_lock``, ``backtrace``. Shapes and their kernel
    sources: docs/kernel-messages.md. ``function`` is the faulting or stuck function (``RIP``,
    else the first module frame); ``module_frames`` the call-trace frames in the module, outermost
    last; ``names_module`` whether the module (a frame, the RIP, or its loader process) is named.
    """

    kind: str
    message: str  # the header line, without its timestamp
    line: int | None = None  # first line of the splat (1-based)
    end_line: int | None = None  # last line of the splat
    os: str = "linux"  # "linux" | "freebsd"
    process: str | None = None
    pid: int | None = None
    cpu: int | None = None
    duration_s: float | None = None  # stuck/blocked for, where the kernel says
    function: str | None = None
    module_frames: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)  # the first frames of the trace, all modules
    names_module: bool = False
    evidence: list[str] = field(default_factory=list)  # the splat's lines as printed (capped)
    detail: dict[str, Any] = field(default_factory=dict)  # jiffies, trap number, locks, taint, ...


@dataclass
class Problem:
    """Something wrong with the input itself (not with wolfSSL): garbage, a cut-off line."""

    message: str
    line: int | None = None
    severity: str = "error"  # "error" | "warning"


@dataclass
class LogResult:
    """Everything learned from one log (one file or one stream)."""

    source: str
    format: LogFormat = LogFormat.UNKNOWN
    complete: bool = False
    incomplete_reason: str | None = None  # why not complete: "no 'Benchmark complete' line"
    benchmarks: list[Benchmark] = field(default_factory=list)
    tests: list[SelfTest] = field(default_factory=list)
    lifecycle: list[LifecycleEvent] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # Summary verdict printed by the program itself, when any
    # ("wolfCrypt self-test passed." / "Test complete" + return code 0).
    selftest_summary: bool | None = None
    benchmark_complete: bool = False
    # The benchmark clock's resolution when it is coarse (FreeBSD module: 1.0 s).
    clock_resolution: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # version, math, block_bytes, cpu, ...
    # Kernel trouble (lockups, stalls, oopses, panics, witness); absent in older documents.
    kernel: list[KernelEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.format = LogFormat(self.format)  # ValueError for a name no format has

    @property
    def failed_tests(self) -> list[SelfTest]:
        return [t for t in self.tests if not t.passed]

    @property
    def clock_quantised(self) -> bool:
        return self.clock_resolution is not None and self.clock_resolution >= 0.5


@dataclass
class RunResult:
    """One (target, variant) run: its logs' results plus how the stages went."""

    variant: str
    target: str
    logs: list[LogResult] = field(default_factory=list)
    failure: StageFailure | None = None
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds taken
    attempts: list[dict[str, Any]] = field(default_factory=list)  # retry history
    metadata: dict[str, Any] = field(default_factory=dict)  # flags, source, wolfssl version
    # Why the run could not be done on this machine ("no FreeBSD release set reachable
    # (freebsd.mirror)"): reported, never judged as a pass or a failure. Only a local run says so;
    # Buildbot and the Action report a run that cannot get its inputs as an infrastructure failure.
    not_run: str | None = None
    # Parts of a run that did run which this machine could not do ("debug kernel": "cannot fetch
    # ..."): each said not run like a whole run, never dropped; the rest of the run is judged.
    not_run_parts: dict[str, str] = field(default_factory=dict)

    @property
    def benchmarks(self) -> list[Benchmark]:
        return [b for log in self.logs for b in log.benchmarks]

    @property
    def tests(self) -> list[SelfTest]:
        return [t for log in self.logs for t in log.tests]

    @property
    def complete(self) -> bool:
        return bool(self.logs) and all(log.complete for log in self.logs)

    @property
    def clock_quantised(self) -> bool:
        return any(log.clock_quantised for log in self.logs)


def merge_runs(runs: list[RunResult], *, repeats: bool) -> tuple[list[RunResult], list[tuple[int, int]]]:
    """Runs of several documents with one run per (target, variant): the one rule for a pair seen twice.

    ``repeats=True``: the documents are repeats of one measurement (``bsdkm-ci compare``), so the
    pair's run is a copy of its first with every later run's logs added (and its first failure).
    ``repeats=False``: the documents are jobs that should not overlap (the Action's merge), so the
    first run of a pair is kept as it is and each later one is left out. Either way the order is that
    of each pair's first run. Also returned: ``(kept, left_out)`` indices into ``runs`` for every run
    folded in or left out, so the caller can say where each came from.
    """
    out: dict[tuple[str, str], RunResult] = {}
    first: dict[tuple[str, str], int] = {}
    folded: list[tuple[int, int]] = []
    for i, r in enumerate(runs):
        key = (r.target, r.variant)
        if key not in out:
            first[key] = i
            out[key] = (RunResult(r.variant, r.target, logs=list(r.logs), failure=r.failure,
                                  stages=dict(r.stages), attempts=list(r.attempts), metadata=dict(r.metadata),
                                  not_run=r.not_run, not_run_parts=dict(r.not_run_parts))
                        if repeats else r)
            continue
        folded.append((first[key], i))
        if repeats:
            into = out[key]
            into.logs += r.logs
            into.failure = into.failure or r.failure
    return list(out.values()), folded


# ---------------------------------------------------------------------------
# JSON round trip. Hand-written so a baseline written by one version reads back
# in the next, and so a bad file fails with the field that is wrong.


class ModelError(ValueError):
    """A results/baseline document that does not match the model."""


def _benchmark_from(d: dict[str, Any]) -> Benchmark:
    d = dict(d)
    d.pop("cycles_unit", None)
    d.pop("failed", None)
    d["kind"] = BenchKind(d.get("kind", "sym"))
    return Benchmark(**d)


def _log_from(d: dict[str, Any]) -> LogResult:
    d = dict(d)
    d.pop("failed_tests", None)
    d.pop("clock_quantised", None)
    d["format"] = LogFormat(d.get("format", "unknown"))
    d["benchmarks"] = [_benchmark_from(b) for b in d.get("benchmarks", [])]
    d["tests"] = [SelfTest(**t) for t in d.get("tests", [])]
    d["lifecycle"] = [LifecycleEvent(**e) for e in d.get("lifecycle", [])]
    d["problems"] = [Problem(**p) for p in d.get("problems", [])]
    d["kernel"] = [KernelEvent(**k) for k in d.get("kernel", [])]
    return LogResult(**d)


def _run_from(d: dict[str, Any]) -> RunResult:
    d = dict(d)
    for derived in ("benchmarks", "tests", "complete", "clock_quantised"):
        d.pop(derived, None)
    d["logs"] = [_log_from(x) for x in d.get("logs", [])]
    if d.get("failure") is not None:
        d["failure"] = StageFailure.from_dict(d["failure"])
    return RunResult(**d)


# Fields a record's dict leaves out while they are None, as documents from before them did.
_LATER_TEST_FIELDS = ("console", "return_code", "decoded")


def _without_unset(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None or k not in keys}


def _with_derived_benchmark(b: Benchmark) -> dict[str, Any]:
    out = _without_unset(asdict(b), ("code",))
    out["cycles_unit"] = b.cycles_unit
    return out


def log_to_dict(log: LogResult) -> dict[str, Any]:
    out = asdict(log)
    out["benchmarks"] = [_with_derived_benchmark(b) for b in log.benchmarks]
    out["tests"] = [_without_unset(asdict(t), _LATER_TEST_FIELDS) for t in log.tests]
    out["clock_quantised"] = log.clock_quantised
    return out


def run_to_dict(run: RunResult) -> dict[str, Any]:
    out = asdict(run)
    out["logs"] = [log_to_dict(x) for x in run.logs]
    out["complete"] = run.complete
    return out


def to_json(runs: list[RunResult], **extra: Any) -> str:
    """The results document: ``{"schema": 1, "runs": [...], ...extra}``."""
    doc: dict[str, Any] = {"schema": SCHEMA_VERSION, "runs": [run_to_dict(r) for r in runs]}
    doc.update(extra)
    return json.dumps(doc, indent=2, sort_keys=False)


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
_RUN_FIELDS = {"variant": str, "target": str}
_LOG_FIELDS = {"source": str, "complete": bool, "clock_resolution": _OPTIONAL_NUMBER}
_BENCH_FIELDS = {"name": str, "value": _NUMBER, "unit": str, "per_second": _NUMBER,
                 "cycles": _OPTIONAL_NUMBER, "block_size": (int, type(None)), "error": (str, type(None)),
                 "code": (int, type(None))}
_TEST_FIELDS = {"name": str, "passed": bool, "error": (str, type(None)), "code": (int, type(None)),
                "console": (str, type(None)), "return_code": (int, type(None)), "decoded": (dict, type(None))}


def _type_problem(runs: list[RunResult]) -> str | None:
    """The first field of a results document whose type the gates cannot use, or None.

    The constructors check the shape; this checks the values the policy computes with, so a
    hand-edited or foreign document is refused with its field named instead of crashing.
    """
    for obj, fields, where in _typed_fields(runs):
        problem = _field_problem(obj, fields, where)
        if problem:
            return problem
    return None


def _typed_fields(runs: list[RunResult]) -> Iterator[tuple[object, dict, str]]:
    for i, run in enumerate(runs):
        yield run, _RUN_FIELDS, f"runs[{i}]"
        for j, log in enumerate(run.logs):
            where = f"runs[{i}].logs[{j}]"
            yield log, _LOG_FIELDS, where
            for k, b in enumerate(log.benchmarks):
                yield b, _BENCH_FIELDS, f"{where}.benchmarks[{k}]"
            for k, t in enumerate(log.tests):
                yield t, _TEST_FIELDS, f"{where}.tests[{k}]"


def _field_problem(obj: object, fields: dict[str, type | tuple[type, ...]], where: str) -> str | None:
    for name, types in fields.items():
        value = getattr(obj, name)
        wrong_bool = isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))
        if wrong_bool or not isinstance(value, types):
            return f"{where}.{name} has the wrong type: {value!r}"
    return None


# A results document nests six levels deep; anything far deeper is not one, and Python's
# recursive decoder would die on it with a RecursionError.
MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 40  # far beyond any counter or rate; Python refuses > 4300 with a ValueError


def _refuse_constant(name: str) -> float:
    # NaN/Infinity compare false with every threshold, so a gate on them would silently pass.
    raise ModelError(f"{name} is not a number a gate can use")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ModelError(f"an integer of {len(text.lstrip('-'))} digits (limit {MAX_INT_DIGITS})")
    return int(text)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth(text: str) -> int:
    """Deepest bracket nesting outside strings, found without recursing (json.loads would overflow)."""
    depth = deepest = 0
    for m in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        if m.group() in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_JSON_DEPTH:
                    break
        else:
            depth -= 1
    return deepest


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ModelError(f"{text} overflows to infinity: not a number a gate can use")
    return value


def load_document(text: str, source: str = "<json>") -> Any:
    """Any JSON document a shell reads (results, summaries, base results), under the same limits as
    ``from_json``: nesting, NaN/Infinity, integer size; ModelError names the problem."""
    return _load_json(text, source)


def _load_json(text: str, source: str) -> Any:
    if _json_depth(text) > MAX_JSON_DEPTH:
        raise ModelError(f"{source}: JSON nested deeper than {MAX_JSON_DEPTH} levels: not a results document")
    try:
        return json.loads(
            text, parse_constant=_refuse_constant, parse_int=_bounded_int, parse_float=_finite_float
        )
    except json.JSONDecodeError as e:
        raise ModelError(f"{source}: not JSON: {e}") from None
    except ModelError as e:
        raise ModelError(f"{source}: {e}") from None
    except (ValueError, RecursionError) as e:
        raise ModelError(f"{source}: unusable JSON: {e}") from None


def from_json(text: str, source: str = "<json>") -> list[RunResult]:
    """Read a results document (or baseline) back; ModelError names what is wrong."""
    doc = _load_json(text, source)
    if not isinstance(doc, dict) or "runs" not in doc:
        raise ModelError(f"{source}: not a bsdkm-ci results document (no 'runs' key)")
    if doc.get("schema") != SCHEMA_VERSION:
        raise ModelError(f"{source}: schema {doc.get('schema')!r} is not {SCHEMA_VERSION}")
    if not isinstance(doc["runs"], list):
        raise ModelError(f"{source}: 'runs' is a JSON {type(doc['runs']).__name__}, not a list")
    runs = []
    for i, r in enumerate(doc["runs"]):
        try:
            runs.append(_run_from(r))
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            raise ModelError(f"{source}: runs[{i}] is malformed: {e}") from None
    problem = _type_problem(runs)
    if problem:
        raise ModelError(f"{source}: {problem}")
    return runs
