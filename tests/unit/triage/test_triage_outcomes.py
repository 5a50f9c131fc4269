"""Base outcomes: one record per (target, variant, kernel kind), from a gated build or a document."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED

from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, load_policy
from buildbot_bsdkm.support.resources import default_policy_path
from buildbot_bsdkm.triage.outcomes import BaseOutcome, kernel_of_source, outcomes_from_document, outcomes_of

LOGS = SHARED / "freebsd" / "logs"
AESNI_SIG = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"


def panic_run() -> RunResult:
    debug = parse_file(LOGS / "debug-kernel_aesni-nobench_aesni-panic.log")
    debug.source = "out/freebsd-kmod-qemu/intelasm/console-debug.log"
    release = parse_file(LOGS / "release-kernel_aesni-fpecc_selftest-pass.log")
    release.source = "out/freebsd-kmod-qemu/intelasm/console-release.log"
    return RunResult("intelasm", "freebsd-kmod-qemu", logs=[debug, release],
                     metadata={"wolfssl_version": "5.9.2", "source_commit": "abc123def4567890",
                               "fingerprint": {"id": "fp1"}})


def test_outcomes_per_kernel_kind() -> None:
    run = panic_run()
    verdict = evaluate([run], load_policy(default_policy_path()))
    outs = {o.kernel: o for o in outcomes_of([run], verdict, date="2026-11-30T00:00:00Z")}
    assert set(outs) == {"debug", "release"}
    assert outs["debug"].verdict == "fail" and outs["debug"].signatures == [AESNI_SIG]
    assert (outs["debug"].version, outs["debug"].commit, outs["debug"].fingerprint) == (
        "5.9.2", "abc123def4567890", "fp1")
    assert AESNI_SIG not in outs["release"].signatures
    assert outs["debug"].since == "abc123def456"


def test_round_trip_and_bad_records() -> None:
    o = BaseOutcome("userspace", "asm", "", "fail", ["selftest: AES-GCM (-216)"], "c1", "5.9.2", "d", "fp")
    assert BaseOutcome.from_dict(json.loads(json.dumps(o.to_dict()))) == o
    for bad, word in (({"variant": "x"}, "target"), ({**o.to_dict(), "verdict": "meh"}, "verdict"),
                      ({**o.to_dict(), "extra": 1}, "unknown keys"), ([], "mapping")):
        with pytest.raises(ValueError, match=word):
            BaseOutcome.from_dict(bad)  # type: ignore[arg-type]


def test_from_documents() -> None:
    run = panic_run()
    policy = load_policy(default_policy_path())
    verdict = evaluate([run], policy)
    parsed = json.loads(to_json([run]))  # parse --json / results.json: no verdict, judged by the caller
    a = outcomes_from_document(parsed, "r.json", lambda runs: evaluate(runs, policy), date="d")
    summary = {**parsed, "verdict": verdict.to_dict()}  # summary.json: judged already
    b = outcomes_from_document(summary, "s.json", date="d")
    assert [o.to_dict() for o in a] == [o.to_dict() for o in b]
    with pytest.raises(ValueError, match="r.json: no verdict"):
        outcomes_from_document(parsed, "r.json")


def test_kernel_of_source() -> None:
    assert kernel_of_source("a/console-debug.log") == "debug"
    assert kernel_of_source("console-release-crypto.log") == "release-crypto"
    assert kernel_of_source("kernel.log") == ""


def test_a_selftest_failure_is_the_kernel_whose_log_shows_it() -> None:
    from buildbot_bsdkm.model import SelfTest

    run = panic_run()
    run.logs[1].tests.append(SelfTest("AES-GCM", False, " error L=1 code=-216", -216))  # release boot
    outs = {o.kernel: o for o in outcomes_of([run], evaluate([run], load_policy(default_policy_path())))}
    assert "selftest: AES-GCM (-216)" in outs["release"].signatures
    assert "selftest: AES-GCM (-216)" not in outs["debug"].signatures


def test_a_stage_failure_is_the_kernel_its_record_names() -> None:
    """The kernel a stage failure is of comes from the record's ``part``, not from its message's
    words: here the release kernel's load fails while the debug kernel's log holds the panic."""
    from buildbot_bsdkm.model import StageFailure
    from buildbot_bsdkm.triage.outcomes import check_kernels

    run = panic_run()
    run.failure = StageFailure("load", "the module's load never finished", reason="load-timeout",
                               part="release kernel")
    verdict = evaluate([run], load_policy(default_policy_path()))
    stage = next(c for c in verdict.failures if c.name == "stage:load")
    assert check_kernels(stage, run) == ["release"]
    without_record = RunResult(run.variant, run.target, logs=run.logs)  # the check's own record then
    assert check_kernels(stage, without_record) == ["release"]
