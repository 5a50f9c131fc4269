"""freebsd-kmod-qemu without booting: the real kit consoles read, judged and reported.

The consoles are real recorded FreeBSD consoles (``../shared/freebsd/logs``) and this target's own
recording of a kldload/kldunload run (``tests/freebsd_double/real/``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import SHARED
from freebsd_sets import make_kit

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.loading import ModuleLoadOutcome
from buildbot_bsdkm.pipeline.runtime.proc import Watched
from buildbot_bsdkm.pipeline.targets import kernel
from buildbot_bsdkm.pipeline.targets._freebsd import freebsd_kmod_dir
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import build as fbuild
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import console as fconsole
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import kit as fkit
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.options import freebsd_options

LOGS = SHARED / "freebsd" / "logs"
REAL = Path(__file__).parents[2] / "freebsd_double" / "real"
AESNI_PANIC = "debug-kernel_aesni-nobench_aesni-panic.log"
FPECC_PANIC = "debug-kernel_plain_fpecc-panic.log"
RELEASE_PASS = "release-kernel_aesni-fpecc_selftest-pass.log"
CRYPTO_REG = "release-crypto-kernel_crypto-register_driver-registered.log"
KLDLOAD_RUN = "kldload-release-crypto_aesni.console.log"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def test_backtrace_frames_of_the_real_aesni_panic() -> None:
    facts = fconsole.read_console(_text(LOGS / AESNI_PANIC))
    assert facts.panic == "panic: malloc: called with spinlock or critical section held"
    assert facts.backtrace[:3] == ["db_trace_self_wrapper+0x2b", "vpanic+0x136", "panic+0x5b"]
    frames = fconsole.module_frames(facts.backtrace, set())
    assert frames[0] == "AES_set_decrypt_key_AESNI+0x47"
    assert "wolfkmod_event+0xe9" in frames
    # by the module's own symbols the kernel's startup frames drop out too
    own = fconsole.module_frames(facts.backtrace,
                                 {"AES_set_decrypt_key_AESNI", "wc_AesSetKeyLocal", "aes_test"})
    assert own == ["AES_set_decrypt_key_AESNI+0x47", "wc_AesSetKeyLocal+0x7e2", "aes_test+0x2ed"]


def test_fpecc_panic_that_stopped_in_ddb_names_add_entry() -> None:
    facts = fconsole.read_console(_text(LOGS / FPECC_PANIC))
    assert fconsole.module_frames(facts.backtrace, set())[0].startswith("add_entry+")


def test_kldload_markers_of_a_real_run() -> None:
    facts = fconsole.read_console(_text(REAL / KLDLOAD_RUN))
    assert (facts.load_rc, facts.unload_rc, facts.still_listed) == (0, 0, False)
    assert facts.kldstat and "name=libwolfssl.ko" in facts.kldstat
    assert facts.panic is None and not facts.link_errors


def test_crypto_register_preload_counts_as_loaded() -> None:
    facts = fconsole.read_console(_text(LOGS / CRYPTO_REG))
    assert facts.loaded_line and facts.preloaded and facts.mountroot


def test_stop_rule() -> None:
    now = [0.0]
    stop = fboot.stop_rule("preload", lambda: now[0])
    assert stop("booting\nmountroot> ") == "mountroot"
    assert stop("info: wolfCrypt self-test passed.\nwolfCrypt Benchmark (block bytes 1024") == \
        "benchmark-at-preload"
    assert fboot.stop_rule("kldload", lambda: 0.0)("wolfCrypt Benchmark (block bytes 1024") is None
    panic = fboot.stop_rule("preload", lambda: now[0])
    assert panic("panic: boom\ncpuid = 0\n") is None  # the backtrace is still coming
    now[0] = fboot.PANIC_GRACE_S + 1
    assert panic("panic: boom\ncpuid = 0\n") == "panic"
    ended = fboot.stop_rule("preload", lambda: 0.0)
    assert ended("panic: boom\nKDB: stack backtrace:\nUptime: 1s\n") == "panic"


def test_loader_rc_per_mode() -> None:
    pre, kld = fboot.loader_rc("preload"), fboot.loader_rc("kldload")
    assert "load /boot/modules/libwolfssl.ko" in pre and "init_path" not in pre
    assert "libwolfssl.ko" not in kld and "set init_path=/init" in kld
    assert f"vfs.root.mountfrom=msdosfs:{fboot.ROOT_DEVICE}" in kld
    for rc in (pre, kld):
        assert "debug.debugger_on_panic=0" in rc and rc.rstrip().endswith("boot")


def _kit_copy(tmp_path: Path, kernels: tuple[str, ...]) -> fkit.Kit:
    root = tmp_path / "kit"
    (root / "boot").mkdir(parents=True)
    for name in kernels:
        (root / "boot" / f"kernel-{name}.xz").write_bytes(b"")
    return fkit.Kit(root)


def test_boot_plan_uses_the_crypto_kernel_for_kldload(tmp_path: Path) -> None:
    kit = _kit_copy(tmp_path, ("debug", "release", "release-crypto"))
    boots, notes = fboot.boot_plan(kit, ("debug", "release"), crypto=False)
    assert [(b.kind, b.kernel, b.mode) for b in boots] == [
        ("debug", "debug", "preload"), ("release", "release-crypto", "kldload")]
    assert notes == []
    boots, notes = fboot.boot_plan(kit, ("debug", "release"), crypto=True)
    assert [b.kernel for b in boots] == ["release-crypto"]
    assert notes and "not covered" in notes[0] and "device crypto" in notes[0]


def test_boot_plan_without_a_crypto_kernel(tmp_path: Path) -> None:
    kit = _kit_copy(tmp_path, ("debug", "release"))
    boots, _ = fboot.boot_plan(kit, ("release",), crypto=False)
    assert [(b.kernel, b.mode) for b in boots] == [("release", "preload")]
    boots, notes = fboot.boot_plan(kit, ("debug", "release"), crypto=True)
    assert boots == [] and len(notes) == 2 and all("not covered" in n for n in notes)


def _part(kind: str, log: Path, mode: str, run: Watched, tmp_path: Path) -> ModuleLoadOutcome:
    kept = tmp_path / kind / "console.log"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(log, kept)
    boot = fboot.Boot(kind, kind, mode)
    return fconsole.outcome_from_boot(boot, kept, run, set(), {"console": kept})


def test_debug_panic_is_a_real_failure_naming_kernel_and_function(tmp_path: Path) -> None:
    debug = _part("debug", LOGS / AESNI_PANIC, "preload", Watched(0, 60.0, False, None), tmp_path)
    release = _part("release", REAL / KLDLOAD_RUN, "kldload", Watched(0, 300.0, False, None), tmp_path)
    outcome = fq.combine({"debug": debug, "release": release}, [], tmp_path)
    state = {"outcome": kernel.outcome_record(outcome)}
    logs, failure = fq.TARGET.logs(state, tmp_path, 900.0)
    assert failure is not None
    assert failure.category is FailureCategory.REAL and failure.reason == "panic"
    assert failure.message.startswith("debug kernel: kernel panic")
    assert "(in AES_set_decrypt_key_AESNI)" in failure.message
    assert any(e.startswith("backtrace: AES_set_decrypt_key_AESNI+0x47 < wc_AesSetKeyLocal") for e in
               failure.evidence)
    debug_log, release_log = logs
    assert Path(debug_log.source).name == "console-debug.log"
    assert release_log.selftest_summary is True and release_log.complete
    assert len(release_log.benchmarks) > 50
    assert {e.kind for e in release_log.lifecycle} >= {"loaded", "unloaded", "benchmark_passed"}


def test_both_kernels_failing_keeps_the_second_failure_as_evidence(tmp_path: Path) -> None:
    debug = _part("debug", LOGS / AESNI_PANIC, "preload", Watched(0, 60.0, False, None), tmp_path)
    release = _part("release", LOGS / FPECC_PANIC, "preload", Watched(0, 60.0, False, None), tmp_path)
    outcome = fq.combine({"debug": debug, "release": release}, [], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is not None and "(in AES_set_decrypt_key_AESNI)" in failure.message
    assert any(e.startswith("also: release kernel: kernel panic") and "(in add_entry)" in e
               for e in failure.evidence)


def test_release_pass_and_preloaded_benchmark_stop(tmp_path: Path) -> None:
    stopped = Watched(None, 50.0, False, "mountroot")
    part = _part("release", LOGS / RELEASE_PASS, "preload", stopped, tmp_path)
    assert part.load_rc == 0 and part.unload_rc is None and not part.timed_out
    outcome = fq.combine({"release": part}, [], tmp_path)
    logs, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is None and logs[0].selftest_summary is True


def test_not_covered_is_never_a_pass(tmp_path: Path) -> None:
    outcome = fq.combine({}, ["release kernel: not covered (no device crypto)"], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is not None and failure.reason == "target-unavailable"
    assert failure.category is FailureCategory.INFRASTRUCTURE
    assert failure.message.startswith("not covered: release kernel")
    # covered by one kernel, not by the other: the run is judged on the one, the other is a note
    part = _part("release", LOGS / CRYPTO_REG, "preload", Watched(None, 50.0, False, "mountroot"), tmp_path)
    outcome = fq.combine({"release": part}, ["debug kernel: not covered (no device crypto)"], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is None and "debug kernel: not covered (no device crypto)" in outcome.notes


def test_vm_killed_at_the_limit_is_a_load_timeout(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    lines = _text(REAL / KLDLOAD_RUN).splitlines()
    cut.write_text("\n".join(lines[: next(i for i, ln in enumerate(lines) if "took" in ln) + 3]) + "\n")
    part = _part("release", cut, "kldload", Watched(None, 900.0, True, None), tmp_path)
    assert part.timed_out and part.timed_out_stage == "load"
    outcome = fq.combine({"release": part}, [], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is not None and failure.reason == "load-timeout"
    assert failure.category is FailureCategory.REAL


@pytest.fixture()
def kit_dir(tmp_path: Path) -> Path:
    return make_kit(tmp_path / "kit")


def test_config_freebsd_kit(kit_dir: Path) -> None:
    base = "targets: {freebsd-kmod-qemu: {kernels: [debug]}}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
    cfg = parse_config(base + f"freebsd: {{kit: {kit_dir}}}\n", "b.yml")
    assert freebsd_options(cfg).freebsd.kit == kit_dir and fkit.find_kit(cfg).root == kit_dir
    assert fkit.kernels_option(cfg) == ("debug",)
    with pytest.raises(ConfigError, match=r"^b\.yml:4: freebsd\.kit: .* is not a directory"):
        parse_config(base + "freebsd:\n  kit: /no/such/kit\n", "b.yml")
    with pytest.raises(ConfigError, match=r"^b\.yml:3: freebsd\.kits: unknown key"):
        parse_config(base + "freebsd: {kits: x}\n", "b.yml")
    reg = "targets: {freebsd-kmod-qemu: null}\nvariants: {r: {flags: [--enable-freebsdkm-crypto-register], " \
          "targets: [freebsd-kmod-qemu]}}\n"
    assert parse_config(reg, "r.yml").variants["r"].targets == ("freebsd-kmod-qemu",)


def test_missing_kit_is_target_unavailable(tmp_path: Path) -> None:
    cfg = parse_config("targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
                       f"freebsd: {{kit: {tmp_path}}}\n", "c.yml")
    from buildbot_bsdkm.pipeline.runtime.stage_error import StageError

    with pytest.raises(StageError) as err:
        fkit.find_kit(cfg)
    assert err.value.failure.reason == "target-unavailable" and "incomplete" in err.value.failure.message


def test_registry_has_one_entry_per_kernel_target() -> None:
    from buildbot_bsdkm.targets import kernel_names
    KERNEL_TARGETS = kernel_names()

    assert {t.name for t in map(kernel.target, KERNEL_TARGETS)} == set(KERNEL_TARGETS)
    assert kernel.target("freebsd-kmod-qemu").log_name == "console.log"


def test_build_commands_follow_the_kit_and_its_version(tmp_path: Path, kit_dir: Path) -> None:
    kit = fkit.Kit(kit_dir)
    args = fbuild.configure_args(kit, ["--enable-aesni"], "-DBENCH_EMBEDDED")
    assert args[:3] == ["./configure", "CC=clang", "ac_cv_header_machine_atomic_h=yes"]
    assert args.index("--enable-freebsdkm") < args.index("--enable-aesni")
    assert f"--with-kernel-source={kit_dir / 'sysroot' / 'sys'}" in args
    assert args[-1] == "CFLAGS=-DBENCH_EMBEDDED"
    make = fbuild.bmake_args(kit, 2, kit.triple)
    assert "CC=clang --target=x86_64-unknown-freebsd15.0" in make
    assert f"XARGS={freebsd_kmod_dir() / 'bsdxargs'}" in make  # the kit has none: ours
    newer = fkit.Kit(make_kit(tmp_path / "current", "16.0"))
    assert newer.triple == "x86_64-unknown-freebsd16.0"


def test_a_linux_only_flag_is_a_configure_error_before_anything_runs(tmp_path: Path, kit_dir: Path) -> None:
    from buildbot_bsdkm.pipeline.runtime.stage_error import StageError

    cfg = parse_config("targets: {freebsd-kmod-qemu: null}\nvariants: {p: {flags: [--enable-linuxkm-pie], "
                       f"targets: [freebsd-kmod-qemu]}}}}\nfreebsd: {{kit: {kit_dir}}}\n", "l.yml")
    with pytest.raises(StageError) as err:
        fq.build_module(cfg, "p", tmp_path, tmp_path / "cache", 1, tmp_path / "build.log")
    assert err.value.failure.reason == "configure" and "for the Linux module" in err.value.failure.message


def _without_ddb(console: str) -> str:
    """The console as a kernel without ``options DDB`` prints it (release GENERIC: KDB, KDB_TRACE):
    kdb_backtrace falls back to stack(9)'s ``#N 0xADDR at func+0xoff`` (stack_print_ddb)."""
    out, n = [], 0
    for line in console.splitlines():
        m = re.match(r"^(?P<func>[\w.$]+)\(\) at (?P=func)\+(?P<off>0x[0-9a-f]+)/frame 0x[0-9a-f]+$", line)
        if m:
            out.append(f"#{n} 0xffffffff80{n:06x} at {m['func']}+{m['off']}")
            n += 1
        else:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("shape", ["ddb", "stack9"])
def test_a_backtrace_names_its_function_in_either_shape(tmp_path: Path, shape: str) -> None:
    console = _text(LOGS / AESNI_PANIC)
    if shape == "stack9":
        console = _without_ddb(console)
        assert "#5 0xffffffff80000005 at AES_set_decrypt_key_AESNI+0x47" in console
    log = tmp_path / "aesni.log"
    log.write_text(console)
    debug = _part("debug", log, "preload", Watched(0, 60.0, False, None), tmp_path)
    outcome = fq.combine({"debug": debug}, [], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(outcome)}, tmp_path, 900.0)
    assert failure is not None and failure.reason == "panic"
    assert "(in AES_set_decrypt_key_AESNI)" in failure.message
    assert any(e.startswith("backtrace: AES_set_decrypt_key_AESNI+0x47 < wc_AesSetKeyLocal+0x7e2") for e in
               failure.evidence)
    assert any("debug kernel panic in AES_set_decrypt_key_AESNI" in n for n in debug.notes)


def test_the_frames_after_a_trap_marker_are_the_same_trace() -> None:
    console = ("Fatal trap 12: page fault while in kernel mode\npanic: page fault\ncpuid = 0\n"
               "KDB: stack backtrace:\n#0 0xffffffff80b8c0d5 at kdb_backtrace+0x65\n"
               "#1 0xffffffff80b3e7c1 at vpanic+0x151\n#2 0xffffffff80b3e663 at panic+0x43\n"
               "#3 0xffffffff8100a0b7 at trap_fatal+0x387\n#4 0xffffffff8100a10f at trap_pfault+0x4f\n"
               "#5 0xffffffff80fe0f18 at calltrap+0x8\n"
               "--- trap 0xc, rip = 0xffffffff82a1b2c3, rsp = 0xfffffe00d1e2f8a0, "
               "rbp = 0xfffffe00d1e2f8d0 ---\n"
               "#6 0xffffffff82a1b2c3 at wc_AesGcmEncrypt+0x23\n"
               "#7 0xffffffff82a1c000 at wolfkmod_event+0x10\n"
               "Uptime: 3s\n")
    facts = fconsole.read_console(console)
    assert facts.backtrace[-2:] == ["wc_AesGcmEncrypt+0x23", "wolfkmod_event+0x10"]
    assert fconsole.module_frames(facts.backtrace, set())[0] == "wc_AesGcmEncrypt+0x23"
