"""Why did a stage fail, and whose fault is it? Evidence in, ``StageFailure`` out.

Infrastructure failures (network, a lost worker, a CI-side exception, a program that
finished its work but never exited, lost logs) may be retried; real ones (configure
or compile errors, failed self-tests, module load errors, panics, hangs while
loading, thresholds) never are. Parsed evidence beats text patterns: a self-test
that printed "failed!" is real whatever else the log says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..model import FailureCategory, FailureReason, LogResult, StageFailure

INFRA = FailureCategory.INFRASTRUCTURE
REAL = FailureCategory.REAL
R = FailureReason

# (regex, reason): the first match wins. These are searched only in text the PR cannot write
# (``classify``'s ``harness`` text and the tool lines of a stage that runs no PR code, see
# ``trusted_text``): a configure script, a compiler, the module and the test programs can print
# any of these strings, so their output is never read for them.
DEFAULT_INFRA_PATTERNS: tuple[tuple[str, FailureReason], ...] = (
    (
        r"Could not resolve host|Temporary failure in name resolution|Temporary failure resolving|"
        r"Name or service not known|could not resolve host|nodename nor servname",
        R.NETWORK,
    ),
    (
        r"Connection reset by peer|Connection refused|Connection timed out|Network is unreachable|"
        r"No route to host|early EOF|The remote end hung up unexpectedly|TLS handshake timeout",
        R.NETWORK,
    ),
    (r"HTTP Error 5\d\d|HTTP 5\d\d|50[234] (Bad Gateway|Service Unavailable|Gateway Time-?out)", R.FETCH),
    (
        r"(?i)\b(worker|slave|remote)( host)? lost\b|lost remote step|ConnectionLost|"
        r"connection to the (worker|master) was lost",
        R.WORKER_LOST,
    ),
    (
        r"java\.lang\.\w+(Exception|Error)|Traceback \(most recent call last\)|"
        r"twisted\.internet\.error\.\w+|buildbot\.\w+\.\w*Error|Internal CI error",
        R.CI_EXCEPTION,
    ),
    (r"No space left on device|Disk quota exceeded", R.CI_EXCEPTION),
    # The VM's /init (which loads the module) never started and nothing panicked: the harness or
    # the worker broke before the module ran, so it cannot be the module's fault.
    (r"the initramfs /init never ran", R.WORKER_SETUP),
    # kldinit found no nonce for its markers (a harness or loader problem): nothing on this console counts.
    (r"the boot had no nonce", R.WORKER_SETUP),
)

# The Linux harness's note on a panic before /init, which loads the module, wrote its first marker.
KERNEL_BEFORE_MODULE = "the kernel panicked before the initramfs /init ran, so before the module was loaded"
BEFORE_MODULE_RE = re.compile(re.escape(KERNEL_BEFORE_MODULE) + r": .*")

# Stages whose output the PR writes: configure scripts and Makefiles, compilers echoing source
# lines, the module's console, the test programs. None of it is evidence of infrastructure.
PR_OUTPUT_STAGES = frozenset({"configure", "build", "load", "selftest", "benchmark", "unload", "collect"})

# The line shapes of the tools a stage without PR code runs (curl, wget, git, apt, pip, ssh, QEMU,
# Python and Buildbot on the CI side): only such lines of its output are read for infrastructure.
TOOL_LINE_RE = re.compile(
    r"^(?:curl: \(\d+\) |wget: |fatal: |error: |remote: |E: |W: |Err:\d+ |Ign:\d+ |ERROR: |WARNING: |"
    r"ssh: |rsync: |qemu-system-[\w-]+: |git: |Traceback \(most recent call last\)|FATAL: |"
    r"Exception in thread |[\w.]+(?:Error|Exception|Lost|Done)\b|\s+at |bsdkm-ci[\w -]*: )"
)


def trusted_text(stage: str, output: str, harness: str = "") -> str:
    """What infrastructure patterns may read: the harness's own lines, and the tool lines of a stage
    that runs no PR code."""
    if stage in PR_OUTPUT_STAGES or not output:
        return harness
    tools = "\n".join(line for line in output.splitlines() if TOOL_LINE_RE.match(line))
    return f"{harness}\n{tools}" if harness else tools


DEFAULT_REAL_PATTERNS: tuple[tuple[str, FailureReason], ...] = (
    (r"Kernel panic|panic: |BUG: unable to handle|general protection fault|Oops:", R.PANIC),
    # A download that is not what was promised, or a tarball that would write outside its tree:
    # tampering or a broken mirror, never fixed by fetching again.
    (r"checksum mismatch for|unsafe tarball member|checkout of \w+ is not clean", R.INTEGRITY),
    (r"configure: error:", R.CONFIGURE),
    (r"^[^\s:]+:\d+(:\d+)?: (fatal )?error:", R.COMPILE),
)


@dataclass(frozen=True)
class Patterns:
    infra: tuple[tuple[str, FailureReason], ...] = DEFAULT_INFRA_PATTERNS
    real: tuple[tuple[str, FailureReason], ...] = DEFAULT_REAL_PATTERNS
    _compiled: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def with_extra(cls, infra: Iterable[str] = (), real: Iterable[str] = ()) -> Patterns:
        """Defaults plus a config's ``retry.infra_patterns``/``real_patterns`` (checked first)."""
        return cls(
            infra=tuple((p, R.INFRA_PATTERN) for p in infra) + DEFAULT_INFRA_PATTERNS,
            real=tuple((p, R.REAL_PATTERN) for p in real) + DEFAULT_REAL_PATTERNS,
        )

    def search(self, table: Sequence[tuple[str, FailureReason]], text: str
               ) -> tuple[FailureReason, str] | None:
        """(reason, the matching line) for the first pattern that matches a line of ``text``."""
        for pattern, reason in table:
            rx = self._compiled.get(pattern)
            if rx is None:
                rx = self._compiled[pattern] = re.compile(pattern, re.MULTILINE)
            m = rx.search(text)
            if m:
                return reason, _line_at(text, m.start())
        return None


DEFAULT_PATTERNS = Patterns()


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)].strip()[:300]


def first_configure_error(output: str) -> str | None:
    m = re.search(r"^.*configure: error: .*$", output, re.MULTILINE)
    return m.group(0).strip()[:300] if m else None


def first_compile_error(output: str) -> str | None:
    for rx in (
        r"^[^\s:]+:\d+(?::\d+)?: (?:fatal )?error: .*$",
        r"^.*\berror: .*$",
        r"^make(\[\d+\])?: \*\*\* .*$",
    ):
        m = re.search(rx, output, re.MULTILINE)
        if m:
            return m.group(0).strip()[:300]
    return None


def selftest_failure(stage: str, logs: Sequence[LogResult], evidence: list[str]) -> StageFailure | None:
    """The failure of a stage whose logs hold a failed self-test, named by its first; None if none did."""
    failed = [t for log in logs for t in log.tests if not t.passed]
    if failed:
        t = failed[0]
        detail = f"error {t.code}" if t.code is not None else (t.error or "").strip() or "no error code"
        more = f" (+{len(failed) - 1} more)" if len(failed) > 1 else ""
        return StageFailure(stage, f"self-test failed: {t.name} ({detail}){more}", REAL, R.SELFTEST, evidence,
                            line=t.console)
    if any(log.selftest_summary is False for log in logs):
        return StageFailure(
            stage, "self-test failed: the program reported failure", REAL, R.SELFTEST, evidence
        )
    return None


def _kernel_failure(stage: str, logs: Sequence[LogResult], evidence: list[str]) -> StageFailure | None:
    for log in logs:
        for ev in log.lifecycle:
            if ev.kind in ("panic", "oops"):
                return StageFailure(stage, f"kernel {ev.kind}: {ev.message}", REAL, R.PANIC, evidence,
                                    line=ev.message)
        # BUG/Oops/GPF records (parsers/kernel_trouble.py) took the place of the old "oops" events
        for kev in log.kernel:
            if kev.kind in ("bug", "oops", "gpf", "fatal_trap"):
                where = f" in {kev.function}" if kev.function else ""
                message = f"kernel {kev.kind}{where}: {kev.message}"
                return StageFailure(stage, message, REAL, R.PANIC, evidence, line=kev.message)
    return None


def classify(
    stage: str,
    *,
    exit_code: int | None,
    output: str = "",
    log_results: Sequence[LogResult] = (),
    timed_out: bool = False,
    timeout_s: float | None = None,
    patterns: Patterns | None = None,
    evidence: Sequence[str] = (),
    program: str | None = None,
    harness: str = "",
) -> StageFailure:
    """Name the failure of ``stage`` from its exit status, output and parsed logs.

    ``output`` is what the stage printed (the build log, the console); ``log_results``
    what the parsers made of the program's logs; ``harness`` what the harness itself wrote
    (its notes on a load, QEMU's own error): only that, and a non-PR stage's tool lines, can
    show infrastructure. A real-failure pattern anywhere beats an infrastructure one. Call only
    when the stage did fail.
    """
    pats = patterns or DEFAULT_PATTERNS
    ev = list(evidence)
    logs = list(log_results)

    if stage == "load" and (hit := BEFORE_MODULE_RE.search(harness)):
        # The harness's own word that the kernel fell over before it loaded the module: no PR code
        # ran, so whatever the console shows is not the module's.
        return StageFailure(stage, f"load failed (vm-boot): {hit.group(0)}", INFRA, R.VM_BOOT, ev)
    definitive = _kernel_failure(stage, logs, ev) or selftest_failure(stage, logs, ev)
    if definitive:
        return definitive
    if stage in ("load", "selftest", "benchmark", "unload"):
        hit = pats.search([p for p in pats.real if p[1] == R.PANIC], output)
        if hit:
            return StageFailure(stage, f"kernel panic: {hit[1]}", REAL, R.PANIC, ev, line=hit[1])

    if timed_out:
        return _timeout(stage, logs, timeout_s, ev, program)

    both = f"{output}\n{harness}" if harness else output
    real = pats.search(pats.real, both)
    infra = None if real else pats.search(pats.infra, trusted_text(stage, output, harness))
    if infra and not (infra[0] == R.WORKER_LOST and stage == "load"):
        reason, line = infra
        return StageFailure(stage, f"{stage} failed ({reason}): {line}", INFRA, reason, ev, line=line)
    if infra and stage == "load":  # a worker that vanishes while loading a module: the module took it down
        # (no ``line``: the harness's line tells that the worker went, not what the kernel printed)
        return StageFailure(stage, f"worker lost while loading the module: {infra[1]}", REAL, R.PANIC, ev)

    if stage in ("configure", "build"):
        return _build_failure(stage, exit_code, output, pats, ev)

    if real:
        return StageFailure(stage, f"{stage} failed: {real[1]}", REAL, real[0], ev, line=real[1])
    if stage in ("load", "selftest", "benchmark"):
        return _program_failure(stage, exit_code, logs, ev, program)
    what = f"exit status {exit_code}" if exit_code is not None else "no exit status"
    return StageFailure(stage, f"{stage} failed ({what})", REAL, R.of_stage(stage), ev)


def _timeout(
    stage: str, logs: list[LogResult], timeout_s: float | None, ev: list[str], program: str | None
) -> StageFailure:
    after = f" after {timeout_s:g} s" if timeout_s is not None else ""
    if logs and all(log.complete for log in logs):
        who = program or stage
        return StageFailure(
            stage, f"{who} finished its output but did not exit{after}", INFRA, R.HUNG_AFTER_COMPLETE, ev
        )
    if stage == "load":
        return StageFailure(stage, f"module load timed out{after}", REAL, R.LOAD_TIMEOUT, ev)
    if stage in ("selftest", "benchmark"):
        return StageFailure(
            stage, f"{program or stage} timed out{after} before finishing", REAL, R.LOAD_TIMEOUT, ev
        )
    if stage == "fetch":
        return StageFailure(stage, f"fetch timed out{after}", INFRA, R.NETWORK, ev)
    # A configure or make that outlives its limit on a shared worker is nearly always load, not code.
    return StageFailure(stage, f"{stage} timed out{after}", INFRA, R.TIMEOUT, ev)


def _build_failure(
    stage: str, exit_code: int | None, output: str, pats: Patterns, ev: list[str]
) -> StageFailure:
    custom = pats.search([p for p in pats.real if p[1] == R.REAL_PATTERN], output)
    if stage == "configure":
        line = first_configure_error(output) or (custom[1] if custom else None) or _last_line(output)
        return StageFailure(stage, f"configure failed: {line}", REAL, R.CONFIGURE, ev, line=line)
    line = first_compile_error(output) or (custom[1] if custom else None) or _last_line(output)
    return StageFailure(stage, f"compile failed: {line}", REAL, R.COMPILE, ev, line=line)


def _program_failure(
    stage: str, exit_code: int | None, logs: list[LogResult], ev: list[str], program: str | None
) -> StageFailure:
    who = program or stage
    empty = not logs or all(not log.benchmarks and not log.tests and not log.lifecycle for log in logs)
    if empty and exit_code == 0:
        return StageFailure(stage, f"{who} produced no usable log", INFRA, R.LOGS_LOST, ev)
    incomplete = [log for log in logs if not log.complete]
    if incomplete:
        why = incomplete[0].incomplete_reason or "cut off"
        return StageFailure(
            stage, f"{who} log incomplete ({why}); exit status {exit_code}", REAL, R.INCOMPLETE_LOG, ev
        )
    if stage == "load":
        return StageFailure(stage, f"module load failed (exit status {exit_code})", REAL, R.LOAD_ERROR, ev)
    return StageFailure(stage, f"{who} failed with exit status {exit_code}", REAL, R.of_stage(stage), ev)


def _last_line(output: str) -> str:
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"
