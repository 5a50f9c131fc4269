"""The exit status of ``run``/``main`` follows the verdict, triage included.

Fails on the old code: ``MatrixResult.passed`` was False for any run with a stage failure, so the main
job on the default configuration printed ``PASS: 223 of 225 checks passed, 2 failed but do not block
(known)`` for wolfSSL 5.9.2's known AES-NI panic and still exited 1.
"""

from __future__ import annotations

from buildbot_bsdkm.checks import Check, CheckKind, Verdict
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure
from buildbot_bsdkm.pipeline.jobs.matrix import MatrixResult

PANIC = StageFailure("load", "debug kernel: kernel panic", FailureCategory.REAL, "panic")


def _failed_run() -> RunResult:
    run = RunResult("intelasm", "freebsd-kmod-qemu")
    run.failure = PANIC
    return run


def _load_check(*, blocking: bool) -> Check:
    return Check("intelasm", "freebsd-kmod-qemu", "stage:load", CheckKind.COMPLETE, False,
                 "load failed (real, panic)", error=True, triage="known" if not blocking else "new",
                 blocking=blocking)


def test_a_known_stage_failure_passes() -> None:
    result = MatrixResult([_failed_run(), RunResult("noasm", "userspace")],
                          Verdict([_load_check(blocking=False)]))
    assert result.verdict.passed and result.passed


def test_a_new_stage_failure_fails() -> None:
    assert not MatrixResult([_failed_run()], Verdict([_load_check(blocking=True)])).passed


def test_a_failed_run_the_verdict_does_not_judge_never_passes() -> None:
    other = Check("noasm", "userspace", "AES", CheckKind.SELFTEST, False, "x", blocking=False)
    assert not MatrixResult([_failed_run()], Verdict([other])).passed
    assert not MatrixResult([_failed_run()], Verdict([])).passed
