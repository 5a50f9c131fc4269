"""Every kernel record is judged: past the rows a report shows, a failing record still fails."""

from __future__ import annotations

from buildbot_bsdkm.model import KernelEvent, LogResult, RunResult
from buildbot_bsdkm.policy.kernel_health import MAX_CHECKS_PER_RUN, KernelRules, checks

TARGET = "linux-kmod-qemu"  # emulated: a lockup there is a warning, a module WARNING a failure


def _lockup(line: int) -> KernelEvent:
    return KernelEvent("soft_lockup", "watchdog: BUG: soft lockup - CPU#0 stuck for 22s!", line=line,
                       process="bsdkm-modload", duration_s=22.0, function="wc_AesGcmEncrypt [libwolfssl]",
                       module_frames=["wc_AesGcmEncrypt"], names_module=True)


def _warning(line: int) -> KernelEvent:
    return KernelEvent("warning", "WARNING: CPU: 0 PID: 1 at mod.c:12 f+0x1/0x2 [libwolfssl]", line=line,
                       function="wc_InitRng [libwolfssl]", module_frames=["wc_InitRng"], names_module=True)


def _run(events: list[KernelEvent]) -> RunResult:
    return RunResult("noasm", TARGET, logs=[LogResult(source="console.log", kernel=events)])


def test_a_module_warning_alone_fails() -> None:
    rows = checks(_run([_warning(1)]), KernelRules())
    assert [c["passed"] for c in rows] == [False]


def test_a_module_warning_after_a_lockup_storm_still_fails() -> None:
    events = [_lockup(n) for n in range(1, MAX_CHECKS_PER_RUN + 6)] + [_warning(999)]
    rows = checks(_run(events), KernelRules())
    assert len(rows) == MAX_CHECKS_PER_RUN + 1  # the rows shown stay capped
    assert all(c["passed"] for c in rows[:-1])  # the lockups: warnings under emulation
    more = rows[-1]
    assert more["name"] == "kernel:more" and more["passed"] is False, more
    assert more["detail"]["failing"] == 1 and more["detail"]["records"] == 6
    assert "kernel WARNING" in more["message"] and "line 999" in more["message"]


def test_a_storm_of_warnings_alone_folds_into_a_passing_row() -> None:
    rows = checks(_run([_lockup(n) for n in range(1, MAX_CHECKS_PER_RUN + 3)]), KernelRules())
    assert rows[-1]["name"] == "kernel:more" and rows[-1]["passed"] is True
    assert rows[-1]["message"] == "2 more kernel records (see the report)"
