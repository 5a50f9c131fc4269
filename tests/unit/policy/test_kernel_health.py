"""Kernel health: kernel trouble parsed into records, gated, reported.

Linux: a module oops constructed in the kernel's own format (arch/x86/mm/fault.c, dumpstack.c,
kernel/panic.c of 6.1) inside a real console log (shared fixture), and the main job's real
lockup/stall console (tests/data/kernel/, trimmed from a real run on this machine). FreeBSD:
the real panic consoles in ../shared/freebsd/logs.
"""

# ruff: noqa: E501, W291 - kernel lines are quoted verbatim, trailing blanks and widths as printed
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, SHARED

from buildbot_bsdkm.model import KernelEvent, LogFormat, LogResult, RunResult, from_json, to_json
from buildbot_bsdkm.parsers import parse_file, parse_text
from buildbot_bsdkm.policy import Policy, evaluate, kernel_health, parse_policy
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.junit import junit_xml
from buildbot_bsdkm.report.markdown import markdown_report

DATA = Path(__file__).parents[2] / "data" / "kernel"
FREEBSD_LOGS = SHARED / "freebsd" / "logs"

# A NULL dereference in the module during the AES-GCM benchmark, in 6.1's exact shapes.
MODULE_OOPS = """\
[   18.980101] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   18.980415] #PF: supervisor read access in kernel mode
[   18.980622] #PF: error_code(0x0000) - not-present page
[   18.980805] PGD 0 P4D 0 
[   18.980941] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   18.981160] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1  Debian 6.1.192-3
[   18.981612] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014
[   18.982034] RIP: 0010:wc_AesGcmEncrypt+0x3c/0x2f0 [libwolfssl]
[   18.982311] Code: 41 57 41 56 41 55 41 54 55 53 48 83 ec 38 <48> 8b 47 08 48 85 c0 0f 84 3b 02 00 00 89 d5
[   18.982756] RSP: 0018:ffffb3c5c0227c18 EFLAGS: 00010246
[   18.982970] RAX: 0000000000000000 RBX: ffff8f5a4a1c8000 RCX: 0000000000000010
[   18.983255] Call Trace:
[   18.983377]  <TASK>
[   18.983481]  ? __die+0x23/0x70
[   18.983617]  ? page_fault_oops+0x171/0x4e0
[   18.983790]  ? exc_page_fault+0x77/0x170
[   18.983957]  ? asm_exc_page_fault+0x26/0x30
[   18.984129]  ? wc_AesGcmEncrypt+0x3c/0x2f0 [libwolfssl]
[   18.984336]  bench_aesgcm_internal+0x1c5/0x3a0 [libwolfssl]
[   18.984548]  bench_aesgcm+0x39/0x70 [libwolfssl]
[   18.984733]  benchmark_test+0x5f4/0x8c0 [libwolfssl]
[   18.984925]  wolfcrypt_benchmark_main+0x1e/0x40 [libwolfssl]
[   18.985128]  wolfssl_init+0x1a8/0x1f0 [libwolfssl]
[   18.985311]  do_one_initcall+0x5b/0x320
[   18.985480]  do_init_module+0x4c/0x1f0
[   18.985646]  __do_sys_finit_module+0xac/0x120
[   18.985824]  do_syscall_64+0x55/0xb0
[   18.985986]  entry_SYSCALL_64_after_hwframe+0x6e/0xd8
[   18.986182] RIP: 0033:0x4a1f3d
[   18.986310]  </TASK>
[   18.986412] Modules linked in: libwolfssl(OE+)
[   18.986597] CR2: 0000000000000008
[   18.986731] ---[ end trace 0000000000000000 ]---
"""


def console_with(splat: str, after: str = "AES-128-GCM-enc") -> str:
    """A real console log (shared fixture) with ``splat`` printed right after the line holding ``after``."""
    real = (FIXTURES / "linuxkm" / "asm-full-bench.console.log").read_text(errors="replace").splitlines(True)
    at = next(i for i, line in enumerate(real) if after in line) + 1
    return "".join(real[:at]) + splat + "".join(real[at:])


def kernel_run(log: LogResult, target: str = "linux-kmod-qemu", variant: str = "intelasm") -> RunResult:
    return RunResult(variant=variant, target=target, logs=[log])


# --------------------------------------------------------------------------- Linux: a module oops


def test_module_oops_in_a_real_console_is_one_record_naming_the_faulting_function() -> None:
    text = console_with(MODULE_OOPS)
    log = parse_text(text, "console.log", LogFormat.LINUX_KERNEL_LOG)
    assert [e.kind for e in log.kernel] == ["bug"]
    ev = log.kernel[0]
    assert ev.function == "wc_AesGcmEncrypt [libwolfssl]"
    assert ev.module_frames[:3] == ["bench_aesgcm_internal [libwolfssl]", "bench_aesgcm [libwolfssl]",
                                    "benchmark_test [libwolfssl]"]
    assert (ev.process, ev.pid, ev.cpu) == ("bsdkm-modload", 110, 0)
    assert ev.names_module and ev.detail["oops"].startswith("0000 [#1]")
    assert ev.detail["trace_id"] == "0000000000000000"
    start = text.splitlines().index(MODULE_OOPS.splitlines()[0]) + 1
    assert (ev.line, ev.end_line) == (start, start + len(MODULE_OOPS.splitlines()) - 1)
    assert ev.detail["unreliable_frames"] == 5  # the "? ..." stack words are not callers


def test_module_oops_fails_the_gate_with_the_function_named_even_under_tcg() -> None:
    log = parse_text(console_with(MODULE_OOPS), "console.log", LogFormat.LINUX_KERNEL_LOG)
    verdict = evaluate([kernel_run(log)], Policy())
    bad = [c for c in verdict.failures if c.kind == "kernel"]
    assert len(bad) == 1 and not verdict.passed
    assert "wc_AesGcmEncrypt [libwolfssl]" in bad[0].message
    assert bad[0].detail["classification"] == "real"


def test_the_old_lifecycle_oops_kind_is_now_a_kernel_record() -> None:
    log = parse_text(console_with(MODULE_OOPS), "console.log", LogFormat.LINUX_KERNEL_LOG)
    assert "oops" not in [e.kind for e in log.lifecycle]


def test_the_consoles_live_header_and_its_dmesg_dump_are_one_record() -> None:
    # quiet: only the error-level header reaches the console live; the dump repeats it all
    header = MODULE_OOPS.splitlines(True)[0]
    log = parse_text(console_with(header) + MODULE_OOPS, "console.log", LogFormat.LINUX_KERNEL_LOG)
    assert len(log.kernel) == 1 and log.kernel[0].function == "wc_AesGcmEncrypt [libwolfssl]"


def test_an_oops_outside_the_module_is_a_warning_classified_as_environment() -> None:
    other = (MODULE_OOPS.replace(" [libwolfssl]", "").replace("bsdkm-modload", "kworker/0:1")
             .replace("wc_AesGcmEncrypt", "e1000_clean"))
    log = parse_text(console_with(other), "console.log", LogFormat.LINUX_KERNEL_LOG)
    (ev,) = log.kernel
    assert not ev.names_module and ev.function == "e1000_clean"
    (check,) = [c for c in evaluate([kernel_run(log)], Policy()).checks if c.kind == "kernel"]
    assert check.passed and check.detail == check.detail | {"severity": "warn", "classification": "environment"}


# --------------------------------------------------------------------------- Linux: the main job's real lockups


def test_main_jobs_real_lockups_are_structured_records() -> None:
    log = parse_file(DATA / "noasm-soft-lockup.console.log", LogFormat.LINUX_KERNEL_LOG)
    lockups = [e for e in log.kernel if e.kind == "soft_lockup"]
    assert lockups, [e.kind for e in log.kernel]
    first = lockups[0]
    assert first.process == "bsdkm-modload" and first.cpu == 0 and first.duration_s and first.duration_s >= 20
    assert first.names_module and first.function and first.function.endswith("[libwolfssl]")
    assert first.module_frames and first.line and first.end_line and first.end_line > first.line


def test_main_jobs_lockups_are_warnings_with_numbers_under_tcg_and_fail_on_hardware() -> None:
    log = parse_file(DATA / "noasm-soft-lockup.console.log", LogFormat.LINUX_KERNEL_LOG)
    tcg = evaluate([kernel_run(log, variant="noasm")], Policy())
    kernel = [c for c in tcg.checks if c.kind == "kernel"]
    assert kernel and all(c.passed for c in kernel)
    assert all(c.detail["classification"] == "environment" for c in kernel)
    lockup = next(c for c in kernel if c.detail["record_kind"] == "soft_lockup")
    assert lockup.value and lockup.unit == "s" and "stuck" in lockup.message
    hw = evaluate([kernel_run(log, target="linux-kmod-kvm", variant="noasm")], Policy())
    failed = [c for c in hw.failures if c.kind == "kernel"]
    assert failed and all(c.detail["classification"] == "real" for c in failed)


def test_report_has_a_kernel_health_section_for_the_real_lockups() -> None:
    log = parse_file(DATA / "noasm-soft-lockup.console.log", LogFormat.LINUX_KERNEL_LOG)
    runs = [kernel_run(log, variant="noasm")]
    verdict = evaluate(runs, Policy())
    md = markdown_report(runs, verdict)
    assert "### Kernel health" in md and "soft lockup" in md and "bsdkm-modload" in md
    assert "warning" in md and "environment" in md
    assert "BUG: soft lockup" in md  # the log lines themselves
    html = html_report(runs, verdict)
    assert "<h3>Kernel health</h3>" in html and "soft lockup" in html


def test_report_says_no_kernel_trouble_for_a_clean_kernel_log() -> None:
    log = parse_file(FIXTURES / "linuxkm" / "asm-full-bench.console.log")
    runs = [kernel_run(log)]
    md = markdown_report(runs, evaluate(runs, Policy()))
    assert "### Kernel health" in md and "No kernel trouble in 1 kernel log" in md


# --------------------------------------------------------------------------- FreeBSD: real panics


@pytest.mark.parametrize(("name", "function", "frames"), [
    ("debug-kernel_aesni-nobench_aesni-panic.log", "AES_set_decrypt_key_AESNI",
     ["AES_set_decrypt_key_AESNI", "wc_AesSetKeyLocal", "aes_test", "wolfcrypt_test", "wolfkmod_event"]),
    ("debug-kernel_plain_fpecc-panic.log", "add_entry",
     ["add_entry", "wc_ecc_mulmod_ex2", "ecc_make_pub_ex", "_ecc_make_key_ex", "ecc_test_curve", "ecc_test",
      "wolfcrypt_test", "wolfkmod_event"]),
])
def test_real_freebsd_panics_name_the_faulting_function(name: str, function: str, frames: list[str]) -> None:
    log = parse_file(FREEBSD_LOGS / name)
    (ev,) = log.kernel
    assert ev.kind == "panic" and ev.os == "freebsd"
    assert ev.message == "panic: malloc: called with spinlock or critical section held"
    assert ev.function == function and ev.module_frames == frames and ev.names_module
    assert ev.cpu == 0 and ev.frames[0] == "db_trace_self_wrapper"
    verdict = evaluate([kernel_run(log, target="freebsd-kmod", variant="aesni")], Policy())
    (check,) = [c for c in verdict.checks if c.kind == "kernel"]
    assert not check.passed and function in check.message and check.detail["classification"] == "real"


def test_real_freebsd_consoles_without_trouble_have_no_records() -> None:
    for name in ("debug-kernel_nofpecc_selftest-pass.log", "release-kernel_aesni-fpecc_selftest-pass.log"):
        assert parse_file(FREEBSD_LOGS / name).kernel == [], name


# --------------------------------------------------------------------------- model, policy, JUnit


def test_kernel_records_round_trip_through_json_and_old_documents_still_read() -> None:
    log = parse_file(FREEBSD_LOGS / "debug-kernel_plain_fpecc-panic.log")
    runs = [kernel_run(log, target="freebsd-kmod")]
    back = from_json(to_json(runs))
    assert back[0].logs[0].kernel == log.kernel and isinstance(back[0].logs[0].kernel[0], KernelEvent)
    doc = json.loads(to_json(runs))
    del doc["runs"][0]["logs"][0]["kernel"]  # a document written before kernel records existed
    assert from_json(json.dumps(doc))[0].logs[0].kernel == []


def test_policy_kernel_section_per_target_and_bad_values_named() -> None:
    policy = parse_policy("kernel:\n  soft_lockup: fail\n  targets:\n    linux-kmod-qemu: {oops: warn}\n")
    rules = policy.kernel
    assert rules.action("linux-kmod-qemu", "soft_lockup") == "fail"
    assert rules.action("linux-kmod-qemu", "oops") == "warn" and rules.action("freebsd-kmod", "oops") == "fail"
    with pytest.raises(ValueError, match=r":3: kernel.targets.x.rcu_stall: must be one of"):
        parse_policy("kernel:\n  targets:\n    x: {rcu_stall: sometimes}\n")
    with pytest.raises(ValueError, match="kernel.lockups: unknown key"):
        parse_policy("kernel:\n  lockups: fail\n")


def test_ignored_kinds_make_no_check_but_stay_in_the_report() -> None:
    log = parse_text(console_with(MODULE_OOPS), "console.log", LogFormat.LINUX_KERNEL_LOG)
    runs = [kernel_run(log)]
    verdict = evaluate(runs, parse_policy("kernel: {oops: ignore}"))
    assert not [c for c in verdict.checks if c.kind == "kernel"]
    assert "not gated" in markdown_report(runs, verdict)


def test_junit_has_a_testcase_per_kernel_kind_with_the_evidence() -> None:
    log = parse_text(console_with(MODULE_OOPS), "console.log", LogFormat.LINUX_KERNEL_LOG)
    runs = [kernel_run(log)]
    xml = junit_xml(runs, evaluate(runs, Policy()))
    assert 'name="kernel:oops"' in xml and 'name="kernel:soft_lockup"' in xml
    oops = xml[xml.index('name="kernel:oops"'):]
    oops = oops[:oops.index("</testcase>")]
    assert "<failure" in oops and "wc_AesGcmEncrypt" in oops and "BUG: kernel NULL pointer" in oops
    # The failure names the record's check as the report does (kernel:bug@<line>): one name for it.
    names = [c.name for c in evaluate(runs, Policy()).failures if c.kind == "kernel"]
    assert names and all(n.startswith("kernel:") and "@" in n for n in names)
    assert all(f'message="{n}: ' in oops for n in names), oops[:600]
    lockup = xml[xml.index('name="kernel:soft_lockup"'):]
    assert "<failure" not in lockup[:lockup.index("</testcase>")]


def test_counts_and_describe_give_the_numbers() -> None:
    ev = KernelEvent(kind="soft_lockup", message="BUG: soft lockup", cpu=0, duration_s=22.0,
                     process="bsdkm-modload", pid=110, function="sp_2048_sqr_avx2_16 [libwolfssl]",
                     names_module=True)
    assert kernel_health.describe(ev) == (
        "soft lockup: CPU#0 stuck 22 s [bsdkm-modload:110] at sp_2048_sqr_avx2_16 [libwolfssl]")
    run = kernel_run(LogResult(source="c", kernel=[ev]))
    assert kernel_health.counts([run]) == {"fail": 0, "warn": 1, "ignore": 0}
    assert kernel_health.counts([kernel_run(LogResult(source="c", kernel=[ev]), target="freebsd-kmod")])["fail"] == 1


# --------------------------------------------------------------------------- shells: Action, Buildbot


def test_action_annotates_kernel_warnings_and_errors_with_numbers() -> None:
    from buildbot_bsdkm.commands.action.results import RunOutcome

    lockups = parse_file(DATA / "noasm-soft-lockup.console.log", LogFormat.LINUX_KERNEL_LOG)
    oops = parse_text(console_with(MODULE_OOPS), "console.log", LogFormat.LINUX_KERNEL_LOG)
    runs = [kernel_run(lockups, variant="noasm"), kernel_run(oops)]
    outcome = RunOutcome(runs, evaluate(runs, Policy()), "", None, [])
    lines = [a.command() for a in outcome.annotations()]
    warnings = [line for line in lines if line.startswith("::warning title=Kernel soft lockup")]
    assert warnings and "101 s at _sp_mont_red [libwolfssl] [linux-kmod-qemu/noasm]" in " ".join(warnings)
    errors = [line for line in lines if line.startswith("::error title=Kernel kernel BUG")]
    assert len(errors) == 1 and "wc_AesGcmEncrypt [libwolfssl]" in errors[0]


def test_buildbot_summary_line_names_the_lockups() -> None:
    from buildbot_bsdkm.buildbot.summaries import results_summary

    log = parse_file(DATA / "noasm-soft-lockup.console.log", LogFormat.LINUX_KERNEL_LOG)
    text = results_summary([kernel_run(log, variant="noasm")])
    assert "kernel warning: 2 RCU stall (max 84.01 s), 3 soft lockup (max 101 s)" in text
    clean = parse_file(FIXTURES / "linuxkm" / "asm-full-bench.console.log")
    assert "kernel" not in results_summary([kernel_run(clean)])


# --------------------------------------------------------------------------- the main job's TCG settings


def test_main_job_tcg_settings_leave_out_the_long_rsa_key_generations_on_the_kernel_target_only() -> None:
    from buildbot_bsdkm.config.bsdkm_yml import load_config

    cfg = load_config(Path(__file__).resolve().parents[3] / "bsdkm.yml")
    assert "-DRSA_MAX_SIZE=2048" in cfg.cflags("linux-kmod-qemu", "noasm")
    assert "-DRSA_MAX_SIZE=2048" not in cfg.cflags("userspace", "noasm")
    assert "RSA 3072 and 4096 key generation" in cfg.targets["linux-kmod-qemu"].bench_skipped


def test_main_job_console_after_the_tcg_settings_has_no_kernel_trouble_and_says_what_was_skipped() -> None:
    log = parse_file(DATA / "noasm-tcg-settings.console.log", LogFormat.LINUX_KERNEL_LOG)
    assert log.complete and log.kernel == []
    assert not [b for b in log.benchmarks if b.name in ("RSA 3072 key gen", "RSA 4096 key gen")]
    assert [b.name for b in log.benchmarks if b.name.startswith("RSA 2048")] == [
        "RSA 2048 key gen", "RSA 2048 public", "RSA 2048 private"]
    run = kernel_run(log, variant="noasm")
    run.metadata["benchmark_skipped"] = "RSA 3072 and 4096 key generation (-DRSA_MAX_SIZE=2048)"
    md = markdown_report([run], evaluate([run], Policy()))
    assert "Skipped under emulation: linux-kmod-qemu/noasm: RSA 3072 and 4096 key generation" in md
    assert "No kernel trouble in 1 kernel log" in md


def test_default_policy_file_writes_out_the_built_in_kernel_defaults() -> None:
    from buildbot_bsdkm.policy import load_policy

    assert load_policy().kernel == kernel_health.KernelRules()


def test_parse_command_fails_on_a_module_oops_and_names_it(tmp_path: Path) -> None:
    from buildbot_bsdkm.commands.parse_cmd import exit_status, summarise

    path = tmp_path / "console.log"
    path.write_text(console_with(MODULE_OOPS))
    log = parse_file(path)
    assert exit_status([log]) == 1  # the old lifecycle "oops" event made it 1; the record keeps it so
    assert "kernel: kernel BUG: CPU#0 [bsdkm-modload:110] at wc_AesGcmEncrypt [libwolfssl]" in summarise(log)
    assert exit_status([parse_file(FIXTURES / "linuxkm" / "asm-full-bench.console.log")]) == 0


# --------------------------------------------------------------------------- every Linux shape (constructed)
# Built from the format strings in docs/kernel-messages.md, each inside the real console log; the
# soft lockup and RCU stall shapes are also covered by the real fixture above.

LINUX_SHAPES = {
    "hung_task": ("[   30.100000] INFO: task bsdkm-modload:110 blocked for more than 120 seconds.\n"
                  "[   30.100100]       Tainted: G           OE      6.1.0-57-amd64 #1 Debian 6.1.192-3\n"
                  "[   30.100200] task:bsdkm-modload   state:D stack:0     pid:110   ppid:1      flags:0x00004002\n"
                  "[   30.100300] Call Trace:\n[   30.100400]  <TASK>\n"
                  "[   30.100500]  wc_LockMutex+0x12/0x30 [libwolfssl]\n[   30.100600]  </TASK>\n",
                  "wc_LockMutex [libwolfssl]", 120.0),
    "hard_lockup": ("[   30.100000] NMI watchdog: Watchdog detected hard LOCKUP on cpu 0\n"
                    "[   30.100100] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1\n"
                    "[   30.100200] RIP: 0010:sp_2048_sqr_avx2_16+0x1f/0x3f0 [libwolfssl]\n"
                    "[   30.100300] Call Trace:\n[   30.100400]  <TASK>\n"
                    "[   30.100500]  benchmark_test+0x5f4/0x8c0 [libwolfssl]\n[   30.100600]  </TASK>\n",
                    "sp_2048_sqr_avx2_16 [libwolfssl]", None),
    "warning": ("[   30.100000] WARNING: CPU: 0 PID: 110 at wc_linuxkm_relax_long_loop+0x4c/0x60 [libwolfssl]\n"
                "[   30.100100] Modules linked in: libwolfssl(OE+)\n"
                "[   30.100200] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1\n"
                "[   30.100300] ---[ end trace 0000000000000000 ]---\n",
                "wc_linuxkm_relax_long_loop [libwolfssl]", None),
    "gpf": ("[   30.100000] general protection fault, probably for non-canonical address 0xdead000000000100: "
            "0000 [#1] PREEMPT SMP NOPTI\n"
            "[   30.100100] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1\n"
            "[   30.100200] RIP: 0010:wc_FreeRng+0x22/0x80 [libwolfssl]\n"
            "[   30.100300] ---[ end trace 0000000000000000 ]---\n",
            "wc_FreeRng [libwolfssl]", None),
    "kasan": ("[   30.100000] BUG: KASAN: slab-out-of-bounds in wc_AesGcmEncrypt+0x3c/0x2f0 [libwolfssl]\n"
              "[   30.100100] Read of size 16 at addr ffff888004a1c000 by task bsdkm-modload/110\n"
              "[   30.100200] Call Trace:\n[   30.100300]  <TASK>\n"
              "[   30.100400]  bench_aesgcm+0x39/0x70 [libwolfssl]\n[   30.100500]  </TASK>\n",
              "wc_AesGcmEncrypt [libwolfssl]", None),
    "ubsan": ("[   30.100000] UBSAN: shift-out-of-bounds in wolfcrypt/src/sp_int.c:5210:28\n"
              "[   30.100100] shift exponent 64 is too large for 64-bit type 'long unsigned int'\n"
              "[   30.100200] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1\n"
              "[   30.100300] Call Trace:\n[   30.100400]  <TASK>\n"
              "[   30.100500]  _sp_mont_red+0xb4/0x590 [libwolfssl]\n[   30.100600]  </TASK>\n"
              "[   30.100700] ---[ end trace ]---\n",
              "_sp_mont_red [libwolfssl]", None),
    "kmemleak": ("[   30.100000] kmemleak: 3 new suspected memory leaks (see /sys/kernel/debug/kmemleak)\n",
                 None, None),
    "lockdep": ("[   30.100000] BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580\n"
                "[   30.100100] in_atomic(): 1, irqs_disabled(): 0, non_block: 0, pid: 110, name: bsdkm-modload\n"
                "[   30.100200] CPU: 0 PID: 110 Comm: bsdkm-modload Tainted: G           OE      6.1.0-57-amd64 #1\n"
                "[   30.100300] Call Trace:\n[   30.100400]  <TASK>\n"
                "[   30.100500]  wc_InitMutex+0x10/0x20 [libwolfssl]\n[   30.100600]  </TASK>\n",
                "wc_InitMutex [libwolfssl]", None),
    "panic": ("[   30.100000] Kernel panic - not syncing: softlockup: hung tasks\n"
              "[   30.100100] ---[ end Kernel panic - not syncing: softlockup: hung tasks ]---\n",
              None, None),
}


@pytest.mark.parametrize("kind", sorted(LINUX_SHAPES))
def test_every_linux_shape_is_one_record_of_its_kind(kind: str) -> None:
    splat, function, duration = LINUX_SHAPES[kind]
    log = parse_text(console_with(splat), "console.log", LogFormat.LINUX_KERNEL_LOG)
    assert [e.kind for e in log.kernel] == [kind]
    ev = log.kernel[0]
    assert ev.function == function and ev.duration_s == duration
    if function:
        assert ev.names_module and ev.process == "bsdkm-modload"
