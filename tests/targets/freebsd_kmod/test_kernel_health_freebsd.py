"""Kernel health on FreeBSD through the replay double.

The scenarios ``kernel-*`` are constructed from FreeBSD's kernel sources (docs/kernel-messages.md),
not recorded; the real panics in ../shared/freebsd/logs are tested in test_kernel_health.py. Each
runs the real kmod/freebsd scripts (run_freebsd_module) against the double, and the kernel log
they slice is parsed and gated like a real one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES
from freebsd_double import FreeBSDDouble, load_scenario, make_scenarios

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import run_freebsd_module
from buildbot_bsdkm.policy import Policy, evaluate

KERNEL_SCENARIOS = {
    # name: (record kind, faulting/stuck function, first module frames, gate fails, kldload returns)
    "kernel-lock-order-reversal": ("lock_order_reversal", "linker_file_lookup_symbol",
                                   ["wc_InitRng", "wolfkmod_event"], True, True),
    "kernel-sleeping-thread": ("sleeping_thread_lock", "wc_GenerateSeed",
                               ["wc_GenerateSeed", "wc_InitRng", "wolfkmod_event"], True, False),
    "kernel-spin-lock-held": ("spin_lock_held", "wolfkmod_vecreg_save",
                              ["wolfkmod_vecreg_save", "wc_AesGcmEncrypt", "bench_aesgcm"], True, False),
    "kernel-fpu-panic": ("fpu", "AES_GCM_encrypt_avx2", ["AES_GCM_encrypt_avx2", "wc_AesGcmEncrypt"],
                         True, False),
    "kernel-fatal-trap": ("fatal_trap", "wc_ecc_mulmod_ex2", ["wc_ecc_mulmod_ex2", "ecc_make_pub_ex"],
                          True, False),
    "kernel-sleep-with-lock": ("sleep_with_lock", "wc_GenerateSeed", ["wc_GenerateSeed", "wc_InitRng"],
                               True, True),
}


def run(tmp_path: Path, name: str):  # noqa: ANN201 - (outcome, parsed kernel log)
    double = FreeBSDDouble.boot(name, tmp_path / "kernel")
    ko = tmp_path / "build" / "libwolfssl.ko"
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"\x7fELF not really a module")
    outcome = run_freebsd_module(ko, tmp_path / "logs", timeout_s=2, privilege=[], env=double.env())
    return outcome, parse_file(outcome.kernel_log)


def test_kernel_scenarios_are_built_by_make_scenarios_and_say_they_are_constructed() -> None:
    built = make_scenarios.build_all(FIXTURES)
    for name in KERNEL_SCENARIOS:
        doc = load_scenario(name)
        assert doc == built[name], f"{name}.json is stale: run make_scenarios.py"
        assert "not recorded on FreeBSD" in doc["provenance"] and "kernel sources" in doc["provenance"]


@pytest.mark.parametrize("name", sorted(KERNEL_SCENARIOS))
def test_freebsd_kernel_trouble_through_the_double(tmp_path: Path, name: str) -> None:
    kind, function, frames, fails, returns = KERNEL_SCENARIOS[name]
    outcome, log = run(tmp_path, name)
    assert (outcome.load_rc == 0) is returns and outcome.timed_out is not returns
    records = [e for e in log.kernel if e.kind == kind]
    assert len(records) == 1, [(e.kind, e.message) for e in log.kernel]
    ev = records[0]
    assert ev.os == "freebsd" and ev.names_module
    assert ev.function == function and ev.module_frames[: len(frames)] == frames
    assert ev.line and ev.end_line and ev.end_line > ev.line and ev.evidence[0] == ev.message
    verdict = evaluate([RunResult(variant="default", target="freebsd-kmod", logs=[log])], Policy())
    kernel = [c for c in verdict.checks if c.kind == "kernel"]
    assert kernel and (not all(c.passed for c in kernel)) is fails
    assert all(c.detail["classification"] == "real" for c in kernel)


def test_panics_keep_their_panic_line_and_numbers(tmp_path: Path) -> None:
    _, log = run(tmp_path, "kernel-fatal-trap")
    (ev,) = log.kernel
    assert ev.detail["trap"] == 12 and ev.detail["panic"] == "panic: page fault"
    assert (ev.process, ev.pid, ev.cpu) == ("kldload", 812, 1)
    _, log = run(tmp_path / "spin", "kernel-spin-lock-held")
    (ev,) = log.kernel
    assert ev.detail["lock"] == "sched lock 1" and ev.detail["owner_tid"] == 100112
    assert ev.detail["panic"] == "panic: spin lock held too long"
    _, log = run(tmp_path / "lor", "kernel-lock-order-reversal")
    (ev,) = log.kernel
    assert [lk["name"] for lk in ev.detail["locks"]] == ["wolfkmod_mtx", "kernel linker"]
