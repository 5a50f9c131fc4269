"""Failure signatures: equal across boots of one bug, different between bugs (real FreeBSD consoles)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import SHARED

from buildbot_bsdkm.model import LogResult, RunResult, SelfTest, StageFailure
from buildbot_bsdkm.parsers import parse_text
from buildbot_bsdkm.policy import Check, CheckKind, evaluate, load_policy
from buildbot_bsdkm.retry.classify_failure import classify
from buildbot_bsdkm.support.resources import default_policy_path
from buildbot_bsdkm.triage.signature import function_name, normalise, signature

LOGS = SHARED / "freebsd" / "logs"
AESNI = "debug-kernel_aesni-nobench_aesni-panic.log"
FPECC = "debug-kernel_plain_fpecc-panic.log"
AESNI_SIG = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
FPECC_SIG = "panic: malloc: called with spinlock or critical section held | add_entry"


def failed_signatures(text: str, source: str = "console-debug.log", target: str = "freebsd-kmod-qemu",
                      variant: str = "intelasm", *, from_dict: bool = False) -> list[str]:
    run = RunResult(variant, target, logs=[parse_text(text, source)])
    verdict = evaluate([run], load_policy(default_policy_path()))
    fails = [c for c in verdict.failures if c.kind == CheckKind.KERNEL]
    if from_dict:  # only the check's JSON at hand (compare --json, summary.json)
        return [signature(c.to_dict()) for c in fails]
    return [signature(c, run) for c in fails]


def real(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8", errors="replace")


def reboot(text: str, seed: int) -> str:
    """The same boot on another machine: other addresses, offsets, CPU, pid/tid, uptime."""
    out = re.sub(r"0x[0-9a-f]{6,}", lambda m: hex(int(m.group(0), 16) + 0x1000 * seed), text)
    out = re.sub(r"\+0x([0-9a-f]+)/", lambda m: f"+{hex(int(m.group(1), 16) + seed)}/", out)
    out = out.replace("cpuid = 0", f"cpuid = {seed % 4}").replace("time = 1", f"time = {seed + 3}")
    out = re.sub(r"pid 0 tid 100000", f"pid {seed * 7} tid {100000 + seed}", out)
    return out


def test_the_two_real_panics_have_their_issue_signatures_and_differ() -> None:
    assert failed_signatures(real(AESNI)) == [AESNI_SIG]
    assert failed_signatures(real(FPECC)) == [FPECC_SIG]


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_a_reboot_elsewhere_gives_the_same_signature(seed: int) -> None:
    for name, sig in ((AESNI, AESNI_SIG), (FPECC, FPECC_SIG)):
        again = reboot(real(name), seed)
        assert again != real(name)
        assert failed_signatures(again, source=f"/tmp/bsdkm-{seed}/console-debug.log") == [sig]


def test_the_check_alone_gives_the_signature_its_run_gives() -> None:
    for name, sig in ((AESNI, AESNI_SIG), (FPECC, FPECC_SIG)):
        assert failed_signatures(real(name), from_dict=True) == [sig]


def test_a_stage_failure_for_the_panic_has_the_panic_signature() -> None:
    log = parse_text(real(AESNI), "console-debug.log")
    run = RunResult("intelasm", "freebsd-kmod-qemu", logs=[log], failure=StageFailure(
        "load", "kernel panic: panic: malloc: called with spinlock or critical section held", reason="panic"))
    verdict = evaluate([run], load_policy(default_policy_path()))
    sigs = {signature(c, run) for c in verdict.failures}
    assert sigs == {AESNI_SIG}


def test_a_stage_failure_for_a_selftest_has_the_selftest_signature() -> None:
    run = RunResult("intelasm", "freebsd-kmod-qemu", logs=[parse_text("", "console-debug.log")],
                    failure=StageFailure("load", "debug kernel: self-test failed: AES-GCM (error -216)",
                                         reason="selftest"))
    run.logs[0].tests.append(SelfTest("AES-GCM", False, " error L=7420 code=-216", -216))
    verdict = evaluate([run], load_policy(default_policy_path()))
    both = [c for c in verdict.failures if c.name in ("stage:load", "AES-GCM")]  # (the empty log is cut off)
    assert len(both) == 2
    assert {signature(c, run) for c in both} == {"selftest: AES-GCM (-216)"}
    assert {signature(c.to_dict()) for c in both} == {"selftest: AES-GCM (-216)"}  # the JSON alone
    again = {signature(Check.from_dict({**c.to_dict(), "signature": None})) for c in both}
    assert again == {"selftest: AES-GCM (-216)"}  # made again from the JSON's fields
    unnamed = _stage_check(StageFailure("load", "self-test failed: the program reported failure",
                                        reason="selftest"))
    assert signature(unnamed) == "selftest: failed without naming an algorithm"


def _stage_check(failure: StageFailure, logs: tuple[LogResult, ...] = ()) -> Check:
    """The stage check the policy makes of ``failure``, as a summary.json holds it, without the
    signature triage gave it (so that the check alone makes it again)."""
    run = RunResult("v", "t", logs=list(logs), failure=failure)
    check = next(c for c in evaluate([run], load_policy(default_policy_path())).failures
                 if c.name == f"stage:{failure.stage}")
    return Check.from_dict({**check.to_dict(), "signature": None})


LINUX_BUG = """\
[   {t}] BUG: kernel NULL pointer dereference, address: {addr}
[   {t}] #PF: supervisor read access in kernel mode
[   {t}] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   {t}] CPU: {cpu} PID: {pid} Comm: insmod Tainted: G           O       6.1.0 #1
[   {t}] RIP: 0010:{fn}+0x{off:x}/0x1f0 [libwolfssl]
[   {t}] Call Trace:
[   {t}]  <TASK>
[   {t}]  wc_AesGcmEncrypt+0x{off:x}/0x200 [libwolfssl]
[   {t}]  aesgcm_test+0x22/0x400 [libwolfssl]
[   {t}]  </TASK>
[   {t}] ---[ end trace 0000000000000000 ]---
"""


def linux_bug(fn: str, seed: int) -> str:
    return LINUX_BUG.format(t=f"{seed + 1}.{seed * 1234:06d}", addr=f"{seed * 8:016x}", cpu=seed % 3,
                            pid=100 + seed, fn=fn, off=0x40 + seed)


def test_linux_bug_signature_is_stable_and_names_the_function() -> None:
    boots = [linux_bug("AesGcmEncrypt_C", seed) for seed in range(3)]
    sigs = {s for text in boots for s in failed_signatures(text, "kernel.log", "linux-kmod-qemu", "asm")}
    assert sigs == {"kernel BUG: kernel NULL pointer dereference | AesGcmEncrypt_C"}
    other = failed_signatures(linux_bug("GHASH", 0), "kernel.log", "linux-kmod-qemu", "asm")
    assert other == ["kernel BUG: kernel NULL pointer dereference | GHASH"]


def _selftest_sig(name: str, code: int | None) -> str:
    run = RunResult("asm", "userspace", logs=[parse_text("", "test.log")])
    run.logs[0].tests.append(SelfTest(name, False, f" error L={code and -code * 17} code={code}", code))
    verdict = evaluate([run], load_policy(default_policy_path()))
    return next(signature(c, run) for c in verdict.failures if c.kind == CheckKind.SELFTEST)


def test_selftest_signatures_keep_the_algorithm_and_code() -> None:
    assert _selftest_sig("AES-GCM", -216) == "selftest: AES-GCM (-216)"
    assert _selftest_sig("AES-GCM", -216) != _selftest_sig("AES-CCM", -216)
    assert _selftest_sig("AES-GCM", -216) != _selftest_sig("AES-GCM", -217)
    assert _selftest_sig("ECC", None) == "selftest: ECC"


def test_other_kinds() -> None:
    def sig(kind: CheckKind, name: str, message: str = "", **kw: object) -> str:
        return signature(Check("v", "t", name, kind, False, message, **kw))  # type: ignore[arg-type]

    assert sig(CheckKind.REGRESSION, "AES-128-GCM-enc") == "regression: AES-128-GCM-enc"
    assert sig(CheckKind.REGRESSION, "geomean:*") == "regression: geomean:*"
    bench = parse_text("Benchmark RSA 2048 sign failed: -180\n", "bench.log")
    assert bench.benchmarks[0].code == -180  # the parser reads wolfCrypt's line once
    bench_run = RunResult("v", "t", logs=[bench])
    (failed,) = [c for c in evaluate([bench_run], load_policy(default_policy_path())).failures
                 if c.kind == CheckKind.BENCHMARK]
    assert signature(Check.from_dict({**failed.to_dict(), "signature": None})) == \
        "benchmark: RSA 2048 sign (-180)"
    builds = [classify("build", exit_code=2, output=f"{where}/wolfcrypt/src/aes.c:{n}:5: error: use of "
                       "undeclared identifier 'k'\nmake: *** [all] Error 1\n")
              for where, n in (("/tmp/w/x/wolfssl-5.9.2", 1234), ("/home/b/cache/wolfssl-5.9.2", 1301))]
    assert {signature(_stage_check(f)) for f in builds} == {
        "build: src/aes.c: error: use of undeclared identifier 'k'"}
    load = classify("load", exit_code=None, timed_out=True, timeout_s=600)
    assert signature(_stage_check(load)) == "load: module load timed out after <n> s"


def test_a_signature_is_made_of_fields_never_of_a_message_s_words() -> None:
    """Signatures read what the project recorded in fields; its messages may say it in other words."""
    test_log = parse_text("AES-GCM  test failed!\n error L=7420 code=-216\n", "test.log")
    for failure, logs, expected in (
            (classify("build", exit_code=2, output="x.c:1:2: error: y\n"), (), "build: x.c: error: y"),
            (classify("load", exit_code=1, log_results=[test_log]), (test_log,), "selftest: AES-GCM (-216)")):
        check = _stage_check(failure, logs)
        reworded = Check.from_dict({**check.to_dict(), "message": "the stage went wrong, in other words"})
        assert signature(reworded) == signature(check) == expected


def test_normalise_and_function_name() -> None:
    assert normalise("[  12.5] at 0xffffffff81756e10 CPU#3 pid 77 [insmod:110] /tmp/pytest-1/a.log") == \
        "at <addr> CPU pid [insmod] <tmp>"
    assert function_name("AES_set_decrypt_key_AESNI+0x47/0x90 [libwolfssl]") == "AES_set_decrypt_key_AESNI"
    assert function_name("ecc_mulmod.isra.0+0x3") == "ecc_mulmod"
    assert function_name("AesGcmEncrypt_C") != function_name("AesGcmEncrypt")


def test_each_real_console_signature_is_distinct_or_absent() -> None:
    seen: dict[str, str] = {}
    for path in sorted(Path(LOGS).glob("*.log")):
        for s in failed_signatures(path.read_text(errors="replace")):
            assert s not in seen, (path.name, seen.get(s))
            seen[s] = path.name
    assert set(seen) == {AESNI_SIG, FPECC_SIG}


def test_a_log_cut_off_by_the_panic_has_the_panic_signature() -> None:
    lines = real(AESNI).splitlines()
    cut = "\n".join(lines[: next(i for i, ln in enumerate(lines) if "Uptime:" in ln)]) + "\n"
    run = RunResult("intelasm", "freebsd-kmod-qemu", logs=[parse_text(cut, "console-debug.log")])
    run.logs[0].complete = False
    run.logs[0].incomplete_reason = "the boot stopped"
    verdict = evaluate([run], load_policy(default_policy_path()))
    assert {signature(c, run) for c in verdict.failures} == {AESNI_SIG}
