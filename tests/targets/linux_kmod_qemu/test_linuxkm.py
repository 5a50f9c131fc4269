"""linuxkm harness without booting anything: kernel discovery, build inputs, bad inputs.

The QEMU runs are in test_linuxkm_qemu.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.proc import Watched
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import target as linux_target

KMOD = linuxkm.KMOD_DIR


def installed_kernel() -> str:
    versions = [v for v in linuxkm.installed_kernel_versions() if linuxkm.headers_for(v)]
    if not versions:
        pytest.fail("no kernel image with headers installed: run scripts/bootstrap.sh")
    return versions[-1]


# --------------------------------------------------------------------------- kernels


def test_linux_source_dir_is_the_headers_of_an_installed_kernel() -> None:
    version = installed_kernel()
    headers = linuxkm.linux_source_dir()
    assert headers == Path(f"/usr/src/linux-headers-{version}").resolve()
    assert (headers / "Makefile").is_file()
    assert (Path("/boot") / f"vmlinuz-{version}").is_file()
    assert linuxkm.linux_source_dir(version) == headers


def test_unknown_kernel_version_names_the_missing_image() -> None:
    with pytest.raises(StageError) as err:
        linuxkm.linux_source_dir("9.9.9-nonexistent")
    assert "/boot/vmlinuz-9.9.9-nonexistent" in str(err.value)
    assert err.value.failure.category == FailureCategory.INFRASTRUCTURE
    assert err.value.failure.reason == "worker-setup"


def test_kernel_without_headers_is_reported(tmp_path: Path) -> None:
    (tmp_path / "vmlinuz-1.2.3-test").write_bytes(b"")
    with pytest.raises(StageError) as err:
        linuxkm.default_kernel_version(boot=tmp_path)
    assert "1.2.3-test" in str(err.value) and "linux-headers-amd64" in str(err.value)


def test_installed_versions_sort_numerically(tmp_path: Path) -> None:
    for v in ("6.10.0-1-amd64", "6.9.0-2-amd64", "6.1.0-57-amd64"):
        (tmp_path / f"vmlinuz-{v}").write_bytes(b"")
    assert linuxkm.installed_kernel_versions(tmp_path) == [
        "6.1.0-57-amd64", "6.9.0-2-amd64", "6.10.0-1-amd64",
    ]


# --------------------------------------------------------------------------- build inputs


def test_configure_args_carry_base_variant_and_cflags() -> None:
    spec = linuxkm.LinuxModuleSpec(("--enable-aesni", "--enable-intelasm"), linuxkm.SHORT_BENCH_CFLAGS)
    args = spec.configure_args(Path("/usr/src/linux-headers-x"), jobs=2)
    assert args[0] == "./configure"
    assert "--with-linux-source=/usr/src/linux-headers-x" in args
    assert "--enable-jobserver=2" in args
    assert set(linuxkm.LINUXKM_FLAGS) <= set(args)
    assert args.index("--enable-aesni") > args.index("--enable-linuxkm")
    assert args[-1] == (
        "CFLAGS=-DBENCH_EMBEDDED -DBENCH_MIN_RUNTIME_SEC=0.01 -DBENCH_NTIMES=1 -DBENCH_AGREETIMES=1"
    )


def test_cache_key_follows_flags_cflags_and_source_edits(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "wolfcrypt" / "src").mkdir(parents=True)
    (src / "linuxkm").mkdir()
    (src / "wolfssl").mkdir()
    (src / "configure").write_text("#!/bin/sh\n")
    aes = src / "wolfcrypt" / "src" / "aes.c"
    aes.write_text("int x;\n")
    asm = linuxkm.LinuxModuleSpec(("--enable-intelasm",))
    key = linuxkm.module_cache_key(src, asm)
    assert linuxkm.module_cache_key(src, asm) == key
    assert linuxkm.module_cache_key(src, linuxkm.LinuxModuleSpec(("--disable-asm",))) != key
    assert linuxkm.module_cache_key(src, linuxkm.LinuxModuleSpec(("--enable-intelasm",), "-DX")) != key
    (src / "wolfcrypt" / "src" / "aes.o").write_bytes(b"\x7fELF")  # someone's in-tree build
    assert linuxkm.module_cache_key(src, asm) == key
    aes.write_text("int x = 1;\n")
    assert linuxkm.module_cache_key(src, asm) != key


def test_build_refuses_a_tree_without_configure(tmp_path: Path) -> None:
    with pytest.raises(StageError) as err:
        linuxkm.build_linux_module(tmp_path, tmp_path / "b", linuxkm.LinuxModuleSpec())
    assert "no configure" in str(err.value)
    assert err.value.failure.stage == "configure"


# --------------------------------------------------------------------------- bad inputs to the run


def test_missing_module_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StageError) as err:
        linuxkm.run_linux_module(tmp_path / "nope.ko", tmp_path / "w", timeout_s=60)
    assert f"kernel module not found: {tmp_path / 'nope.ko'}" in str(err.value)


def test_non_module_file_is_rejected_by_mkinitramfs(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a module\n")
    with pytest.raises(StageError) as err:
        linuxkm.make_initramfs(bogus, tmp_path / "i.cpio.gz")
    assert "not a kernel module (expected a .ko file)" in str(err.value)
    assert not (tmp_path / "i.cpio.gz").exists()


def test_module_for_an_absent_kernel_is_reported_before_booting(tmp_path: Path) -> None:
    ko = tmp_path / "x.ko"
    ko.write_bytes(os.urandom(256))
    with pytest.raises(StageError) as err:
        linuxkm.run_linux_module(ko, tmp_path / "w", timeout_s=60, kernel_version="0.0.1-none")
    assert "/boot/vmlinuz-0.0.1-none" in str(err.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage: run-qemu.sh"),
        (["/nonexistent.cpio.gz", "/tmp/x.log"], "initramfs not found: /nonexistent.cpio.gz"),
        (["{initrd}", "{log}", "soon"], "TIMEOUT_S must be whole seconds, got 'soon'"),
    ],
)
def test_run_qemu_script_rejects_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    initrd = tmp_path / "i.cpio.gz"
    initrd.write_bytes(b"")
    real_args = [a.format(initrd=initrd, log=tmp_path / "c.log") for a in args]
    proc = subprocess.run(["sh", str(KMOD / "run-qemu.sh"), *real_args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_run_qemu_script_names_a_missing_kernel(tmp_path: Path) -> None:
    initrd = tmp_path / "i.cpio.gz"
    initrd.write_bytes(b"")
    proc = subprocess.run(["sh", str(KMOD / "run-qemu.sh"), str(initrd), str(tmp_path / "c.log"), "5"],
                          capture_output=True, text=True, env={**os.environ, "KERNEL_VERSION": "0.0-x"})
    assert proc.returncode == 2
    assert "kernel image not readable: /boot/vmlinuz-0.0-x" in proc.stderr


def test_mkinitramfs_refuses_dynamic_busybox(tmp_path: Path) -> None:
    ko = tmp_path / "m.ko"
    ko.write_bytes(b"\x7fELF")
    proc = subprocess.run(["sh", str(KMOD / "mkinitramfs.sh"), str(ko), str(tmp_path / "o.cpio.gz")],
                          capture_output=True, text=True, env={**os.environ, "BUSYBOX": "/bin/ls"})
    assert proc.returncode == 2
    assert "/bin/ls is dynamically linked" in proc.stderr


def test_loader_reports_errno_of_a_failed_open(tmp_path: Path) -> None:
    exe = tmp_path / "bsdkm-modload"
    subprocess.run(["gcc", "-static", "-Os", "-o", str(exe), str(KMOD / "loader.c")], check=True)
    proc = subprocess.run([str(exe), "load", str(tmp_path / "absent.ko")], capture_output=True, text=True)
    assert proc.returncode == 1
    absent = tmp_path / "absent.ko"
    assert proc.stdout == f"bsdkm-modload: load {absent}: failed errno=2 (No such file or directory)\n"
    usage = subprocess.run([str(exe), "frobnicate"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


# --------------------------------------------------------------------------- consoles that are not ours


def test_console_of_another_harness_is_not_mistaken_for_a_run() -> None:
    # Real console of a different initramfs (### LKM-CI: markers): nothing of ours ran.
    console = FIXTURES / "linuxkm" / "asm-verbose-short-eccfail.console.log"
    outcome = linuxkm.outcome_from_console(console, Watched(0, 1.0, False, None))
    assert outcome.load_rc is None and outcome.unload_rc is None
    assert not outcome.timed_out
    assert outcome.notes == ["no bsdkm-ci marker on the console: the initramfs /init never ran"]


def test_missing_console_means_the_vm_never_started(tmp_path: Path) -> None:
    outcome = linuxkm.outcome_from_console(tmp_path / "absent.log", Watched(1, 0.1, False, None),
                                           qemu_stderr="qemu-system-x86_64: -kernel x: No such file\n")
    assert outcome.load_rc is None
    assert outcome.notes == [
        "no bsdkm-ci marker on the console: the initramfs /init never ran",
        "qemu exited 1: qemu-system-x86_64: -kernel x: No such file",
    ]


def test_binary_garbage_console_gives_no_markers(tmp_path: Path) -> None:
    garbage = tmp_path / "console.log"
    garbage.write_bytes(os.urandom(64 * 1024))
    report = linuxkm.read_console(garbage)
    assert report.markers == [] and report.load_rc is None
    assert report.stage_in_progress() == "boot"


def test_host_timeout_before_init_is_a_boot_timeout(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_bytes((FIXTURES / "linuxkm" / "asm-full-bench.console.log").read_bytes()[:2000])
    outcome = linuxkm.outcome_from_console(console, Watched(None, 30.0, True, None))
    assert outcome.timed_out and outcome.timed_out_stage == "boot"
    assert outcome.notes == ["VM killed by the host timeout during boot"]


def test_command_line_names_a_missing_module(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert linuxkm.main([str(tmp_path / "gone.ko"), str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err == f"linuxkm: kernel module not found: {tmp_path / 'gone.ko'}\n"


@pytest.mark.parametrize(("limit", "guest"), [(900, 720), (400, 320), (200, 140), (120, 60), (30, 15)])
def test_guest_watchdog_fires_well_before_the_host_timeout(limit: int, guest: int) -> None:
    assert linuxkm.guest_load_timeout(limit) == guest


def test_the_vm_gets_absolute_paths_from_a_relative_out_dir(tmp_path: Path, monkeypatch) -> None:
    """The main job's --out bsdkm-out is relative; QEMU gets whole paths all the same."""
    seen: dict[str, object] = {}

    def fake_launch(machine: list[str], console: Path, **kwargs: object) -> Watched:
        seen["machine"], seen["console"], seen["qemu_log"] = machine, console, kwargs["qemu_log"]
        return Watched(0, 0.1, False, None)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(linuxkm, "launch", fake_launch)
    monkeypatch.setattr(linuxkm, "kernel_image", lambda version: Path(f"/boot/vmlinuz-{version}"))
    rel = Path("bsdkm-out") / "vm"
    rel.mkdir(parents=True)
    linuxkm.boot_vm(rel / "initramfs.cpio.gz", rel / "console.log", kernel_version="6.1.0", timeout_s=60,
                    load_timeout_s=30, options=linuxkm.VmOptions(), qemu_log=rel / "qemu.log")
    machine = seen["machine"]
    initrd = Path(machine[machine.index("-initrd") + 1])  # type: ignore[attr-defined,index]
    assert initrd == tmp_path / rel / "initramfs.cpio.gz"
    assert Path(seen["console"]).is_absolute() and Path(seen["qemu_log"]).is_absolute()  # type: ignore[arg-type]
    assert "bsdkm_ci.load_timeout=30 bsdkm_ci.unload_timeout=60" in machine[-1]  # type: ignore[index]


def test_a_vm_whose_init_never_ran_is_the_environments_fault(tmp_path: Path) -> None:
    from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log

    outcome = linuxkm.outcome_from_console(tmp_path / "absent.log", Watched(2, 0.1, False, None),
                                           qemu_stderr="run-qemu.sh: initramfs not found: x.cpio.gz\n")
    log = parse_kernel_log(linux_target.TARGET.log_format, outcome.kernel_log)
    failure = judge_outcome(outcome, log, 60)
    assert failure is not None and failure.category is FailureCategory.INFRASTRUCTURE
    assert failure.reason == "worker-setup"


# --------------------------------------------------------------------------- what the module may print

NONCE = "5f0c2a9e81d34b7a"


def _forged_console(nonce: str | None) -> str:
    """The console of a module whose init prints the harness's lines and fails with -EINVAL (the
    shape of a real boot: /init's markers, the loader's line, the kernel's timestamped dmesg dump)."""
    tag = f" nonce={nonce}" if nonce else ""
    return "".join([
        f"### bsdkm-ci: init begin kernel=6.1.0-57-amd64 uptime=5.55{tag}\n",
        f"### bsdkm-ci: module path=/lib/modules/bsdkm/bsdkm_forge.ko name=bsdkm_forge load_timeout=45 "
        f"unload_timeout=60 uptime=5.60{tag}\n",
        f"### bsdkm-ci: load begin uptime=6.27{tag}\n",
        "bsdkm-modload: load /lib/modules/bsdkm/bsdkm_forge.ko: calling finit_module\n",
        "[    6.301244] ### bsdkm-ci: load rc=0 uptime=1.00\n",  # pr_err, live on the console
        "[    6.301250] bsdkm-modload: load /lib/modules/bsdkm/bsdkm_forge.ko: ok\n",
        "bsdkm-modload: load /lib/modules/bsdkm/bsdkm_forge.ko: failed errno=22 (Invalid argument)\n",
        f"### bsdkm-ci: load rc=1 uptime=6.40{tag}\n",
        f"### bsdkm-ci: load dmesg begin uptime=6.41{tag}\n",
        "[    6.301244] ### bsdkm-ci: load rc=0 uptime=1.00\n",
        "[    6.301262] ### bsdkm-ci: load rc=0\n",
        "[    6.301262] ### bsdkm-ci: modules begin\n",
        "[    6.301262] bsdkm_forge 16384 0 - Live 0x0\n",
        f"### bsdkm-ci: load dmesg end uptime=6.50{tag}\n",
        f"### bsdkm-ci: modules begin uptime=6.52{tag}\n",
        f"### bsdkm-ci: modules end uptime=6.53{tag}\n",
        # Printed without a timestamp (a module that turned printk.time off), without the nonce:
        "### bsdkm-ci: load rc=0 uptime=6.54\n",
        "### bsdkm-ci: modules begin uptime=6.54\n",
        "bsdkm_forge 16384 0 - Live 0x0\n",
        f"### bsdkm-ci: unload skipped: bsdkm_forge not loaded uptime=6.60{tag}\n",
        f"### bsdkm-ci: poweroff uptime=6.70{tag}\n",
    ])


def test_markers_a_module_prints_are_not_the_harnesss(tmp_path: Path) -> None:
    from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log

    console = tmp_path / "console.log"
    console.write_text(_forged_console(NONCE))
    outcome = linuxkm.outcome_from_console(console, Watched(0, 1.0, False, None), nonce=NONCE)
    assert (outcome.load_rc, outcome.load_errno, outcome.loaded_seen) == (1, 22, False)
    assert outcome.notes[-1].startswith("console lines that imitate the harness's markers were ignored")
    log = parse_kernel_log(linux_target.TARGET.log_format, outcome.kernel_log)
    failure = judge_outcome(outcome, log, 60)
    assert failure is not None and failure.category is FailureCategory.REAL
    assert failure.reason == "load-error" and "errno 22" in failure.message


def test_without_the_nonce_markers_must_start_their_line_and_the_first_result_counts(tmp_path: Path) -> None:
    # A console of a boot without a nonce: the timestamped copies are not markers, and the loader's
    # result after "load begin" is the one that counts, whatever follows.
    console = tmp_path / "console.log"
    text = _forged_console(None)
    console.write_text(text)
    outcome = linuxkm.outcome_from_console(console, Watched(0, 1.0, False, None))
    assert (outcome.load_rc, outcome.load_errno, outcome.loaded_seen) == (1, 22, False)


def test_a_zero_status_needs_the_loader_and_the_module_list(tmp_path: Path) -> None:
    from buildbot_bsdkm.pipeline.runtime.loading import ModuleLoadOutcome
    from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log

    console = tmp_path / "console.log"
    console.write_text(_forged_console(NONCE))
    log = parse_kernel_log(linux_target.TARGET.log_format, console)
    with_errno = ModuleLoadOutcome(console, load_rc=0, unload_rc=0, loaded_seen=True, load_errno=22)
    unlisted = ModuleLoadOutcome(console, load_rc=0, unload_rc=0, loaded_seen=False)
    for outcome in (with_errno, unlisted):
        failure = judge_outcome(outcome, log, 60)
        assert failure is not None
        assert (failure.category, failure.reason) == (FailureCategory.REAL, "load-error")


def test_the_first_marker_after_the_firmwares_unfinished_line_counts(tmp_path: Path) -> None:
    # A real console: SeaBIOS's last line has no newline; the kernel resets the terminal before /init.
    console = tmp_path / "console.log"
    first = f"### bsdkm-ci: init begin kernel=6.1.0-57-amd64 uptime=1.80 nonce={NONCE}\n"
    rest = _forged_console(NONCE).encode()
    console.write_bytes(b"Booting from ROM..\x1bc\x1b[?7l\x1b[2J" + first.encode() + rest)
    report = linuxkm.read_console(console, NONCE)
    assert report.markers[0].body == "init begin kernel=6.1.0-57-amd64" and report.markers[0].uptime == 1.80


def test_a_panic_before_init_is_the_boots_and_retried_not_the_modules(tmp_path: Path) -> None:
    """Seen under TCG on a loaded host: the kernel panicked while booting, before /init loaded the
    module. The old harness judged it a real panic, and a bisection's verify step took it for the
    module's."""
    from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log

    console = tmp_path / "console.log"
    console.write_text("[    0.000000] Linux version 6.1.0-57-amd64\n"
                       "[    1.210000] ..MP-BIOS bug: 8254 timer not connected to IO-APIC\n"
                       "[    1.230000] Kernel panic - not syncing: IO-APIC + timer doesn't work!  Boot with "
                       "apic=debug and send a report.  Then try booting with the 'noapic' option.\n")
    outcome = linuxkm.outcome_from_console(console, Watched(0, 3.0, False, None))
    failure = judge_outcome(outcome, parse_kernel_log(linux_target.TARGET.log_format, console), 60)
    assert failure is not None
    assert (failure.category, failure.reason) == (FailureCategory.INFRASTRUCTURE, "vm-boot")
    assert "before the module was loaded: Kernel panic - not syncing: IO-APIC" in failure.message
