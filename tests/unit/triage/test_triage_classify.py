"""Classification of every failed check: new / pre-existing / known / flaky, fixed; the triage policy."""

from __future__ import annotations

import copy

from conftest import SHARED

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import RunResult, SelfTest, StageFailure
from buildbot_bsdkm.parsers import parse_file, parse_text
from buildbot_bsdkm.policy import Verdict, evaluate, load_policy, parse_policy
from buildbot_bsdkm.support.resources import default_config_path, default_policy_path
from buildbot_bsdkm.triage.classify_checks import TriageInputs, failed_signatures
from buildbot_bsdkm.triage.known import KnownIssues
from buildbot_bsdkm.triage.outcomes import BaseOutcome

LOGS = SHARED / "freebsd" / "logs"
AESNI_SIG = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
POLICY = load_policy(default_policy_path())


def panic_run(version: str = "5.9.2", fp: str = "fp1") -> RunResult:
    """freebsd-kmod-qemu/intelasm as the main job runs it: the debug kernel panics, the release one passes."""
    debug = parse_file(LOGS / "debug-kernel_aesni-nobench_aesni-panic.log")
    debug.source = "out/freebsd-kmod-qemu/intelasm/console-debug.log"
    release = parse_file(LOGS / "release-kernel_aesni-fpecc_selftest-pass.log")
    release.source = "out/freebsd-kmod-qemu/intelasm/console-release.log"
    failure = StageFailure("load", "debug kernel: kernel panic: panic: malloc: called with spinlock or "
                           "critical section held (in AES_set_decrypt_key_AESNI)", reason="panic",
                           part="debug kernel")
    return RunResult("intelasm", "freebsd-kmod-qemu", logs=[debug, release], failure=failure,
                     metadata={"wolfssl_version": version, "fingerprint": {"id": fp}})


def clean_run(fp: str = "fp1") -> RunResult:
    release = parse_file(LOGS / "release-kernel_aesni-fpecc_selftest-pass.log")
    release.source = "out/freebsd-kmod-qemu/intelasm/console-release.log"
    debug = parse_file(LOGS / "debug-kernel_nofpecc_selftest-pass.log")
    debug.source = "out/freebsd-kmod-qemu/intelasm/console-debug.log"
    return RunResult("intelasm", "freebsd-kmod-qemu", logs=[debug, release],
                     metadata={"wolfssl_version": "5.9.2", "fingerprint": {"id": fp}})


def base(n: int, with_panic: list[bool], fp: str = "fp1") -> list[BaseOutcome]:
    out = []
    for i, panics in enumerate(with_panic[:n]):
        out.append(BaseOutcome("freebsd-kmod-qemu", "intelasm", "debug", "fail" if panics else "pass",
                               [AESNI_SIG] if panics else [], f"c{i:02d}aaaaaaaaaaaa", "5.9.2",
                               f"2026-11-{i + 1:02d}T00:00:00Z", fp, ["complete", "kernel"]))
    return out


def panic_failures(v: Verdict) -> list:
    return [c for c in v.failures if c.signature == AESNI_SIG]


def test_the_main_job_panic_is_known_with_the_default_config_and_fails_without_it() -> None:
    known = load_config(default_config_path()).known_issues
    with_entry = evaluate([panic_run()], POLICY, triage=TriageInputs(known=known))
    assert with_entry.passed and with_entry.failures  # failed checks remain, none blocks
    assert {c.triage for c in with_entry.failures} == {"known"}
    assert all(not c.blocking and "https://" in (c.triage_note or "") for c in with_entry.failures)
    assert {c.name.split("@")[0] for c in panic_failures(with_entry)} == {"stage:load", "kernel:panic"}
    assert with_entry.summary().startswith("PASS: ") and "do not block (known)" in with_entry.summary()
    (issue,) = with_entry.triage["known_issues"]
    assert issue["status"] == "matched" and issue["failures"] == 2
    without = evaluate([panic_run()], POLICY)
    assert not without.passed and {c.triage for c in without.failures} == {"new"}


def test_known_fail_policy_blocks_and_expired_entry_is_an_error() -> None:
    known = load_config(default_config_path()).known_issues
    strict = copy.copy(POLICY)
    strict.triage = parse_policy("triage: {known: fail}\n", "p.yml").triage
    assert not evaluate([panic_run()], strict, triage=TriageInputs(known=known)).passed
    from buildbot_bsdkm.triage.known import KnownIssueError
    try:
        evaluate([panic_run(version="5.9.3")], POLICY, triage=TriageInputs(known=known))
    except KnownIssueError as e:
        assert "known_issues.aesni-key-setup-malloc-in-critical-section: expired: wolfSSL 5.9.3" in str(e)
        assert str(e).startswith(f"{default_config_path()}:")
    else:
        raise AssertionError("an expired entry must be an error")


def test_pre_existing_says_since_first_seen_and_n_of_m() -> None:
    history = base(5, [False, True, True, True, True])
    v = evaluate([panic_run()], POLICY, triage=TriageInputs(base=history))
    assert v.passed
    (k,) = [c for c in panic_failures(v) if c.name.startswith("kernel:")]
    assert k.triage == "pre-existing"
    assert k.triage_note == ("since c01aaaaaaaaa, first seen 2026-11-02T00:00:00Z, "
                             "in 4 of the last 5 base builds")
    fail_it = copy.copy(POLICY)
    fail_it.triage = parse_policy("triage: {pre_existing: fail}\n", "p.yml").triage
    assert not evaluate([panic_run()], fail_it, triage=TriageInputs(base=history)).passed


def test_comes_and_goes_on_the_base_is_flaky_and_rerun_that_passed_is_flaky() -> None:
    v = evaluate([panic_run()], POLICY, triage=TriageInputs(base=base(5, [True, False, True, False, True])))
    assert {c.triage for c in panic_failures(v)} == {"flaky"}
    assert "comes and goes on the base: in 3 of the last 5" in (panic_failures(v)[0].triage_note or "")
    rerun = failed_signatures([clean_run()], evaluate([clean_run()], POLICY))
    v2 = evaluate([panic_run()], POLICY, triage=TriageInputs(rerun=rerun))
    assert {c.triage for c in panic_failures(v2)} == {"flaky"} and v2.passed
    assert panic_failures(v2)[0].triage_note == "did not reproduce on the re-run"


def test_another_machine_fingerprint_is_not_used_and_says_so() -> None:
    v = evaluate([panic_run(fp="fp1")], POLICY, triage=TriageInputs(base=base(3, [True] * 3, fp="other")))
    assert {c.triage for c in panic_failures(v)} == {"new"} and not v.passed
    assert any("3 base outcome(s) from another machine fingerprint are not used" in n for n in v.notes)


def test_a_new_selftest_failure_on_a_base_with_the_panic_is_new_and_blocks() -> None:
    run = panic_run()
    run.logs[1].tests.append(SelfTest("AES-GCM", False, " error L=1 code=-216", -216))
    v = evaluate([run], POLICY, triage=TriageInputs(base=base(2, [True, True])))
    words = {c.signature: (c.triage, c.blocking) for c in v.failures}
    assert words["selftest: AES-GCM (-216)"] == ("new", True)
    assert words[AESNI_SIG] == ("pre-existing", False)
    assert not v.passed and "FAIL: 1 of" in v.summary()


def test_fixed_when_the_change_no_longer_shows_a_base_failure() -> None:
    v = evaluate([clean_run()], POLICY, triage=TriageInputs(base=base(2, [True, True])))
    (fixed,) = v.triage["fixed"]
    assert (fixed["signature"], fixed["kernel"], fixed["triage"]) == (AESNI_SIG, "debug", "fixed")
    assert any("fixed by this change" in n for n in v.notes)


def test_known_issue_unused_and_unexpectedly_passed() -> None:
    known = load_config(default_config_path()).known_issues
    v = evaluate([clean_run()], POLICY, triage=TriageInputs(known=known))
    assert v.triage["known_issues"][0]["status"] == "unused"
    v2 = evaluate([clean_run()], POLICY, triage=TriageInputs(known=known, base=base(1, [True])))
    assert v2.triage["known_issues"][0]["status"] == "unexpectedly-passed"
    assert any("unexpectedly passed: remove it" in n for n in v2.notes)


def test_json_carries_signature_and_triage_for_every_failure() -> None:
    known = load_config(default_config_path()).known_issues
    v = evaluate([panic_run()], POLICY, triage=TriageInputs(known=known))
    doc = v.to_dict()
    assert all(c["signature"] and c["triage"] for c in doc["checks"] if not c["passed"])
    back = Verdict.from_dict(doc)
    assert back.passed == v.passed and back.triage == v.triage
    assert [c.to_dict() for c in back.checks] == doc["checks"]


def test_no_triage_inputs_every_failure_is_new() -> None:
    run = RunResult("asm", "userspace", logs=[parse_text("", "t.log")])
    run.logs[0].tests.append(SelfTest("ECC", False, None, None))
    v = evaluate([run], POLICY, triage=TriageInputs(known=KnownIssues()))
    assert {(c.signature, c.triage) for c in v.failures if c.kind == "selftest"} == {("selftest: ECC", "new")}
