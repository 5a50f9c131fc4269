"""The FreeBSD path: kmod/freebsd scripts under a POSIX sh, against the replay double.

FreeBSD cannot run here. The scripts are the real ones; kldload, kldstat,
kldunload, dmesg and sysctl are the double in tests/freebsd_double (scenarios
constructed from the message catalogue, see its README). The configure test
runs wolfSSL's real configure with the flags this target uses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import FIXTURES
from freebsd_double import BIN, SCENARIOS, FreeBSDDouble, load_scenario, make_scenarios, scenario_names

from buildbot_bsdkm.model import LogFormat
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.runtime.loading import read_status
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets._freebsd import FREEBSD_BASE_FLAGS, KMOD_DIR, FreeBSDFlagError
from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import freebsd_configure_flags, run_freebsd_module

SH = shutil.which("dash") or "/bin/sh"  # dash: the closest to FreeBSD's /bin/sh on Debian
MARKER_TAG = "bsdkm-ci-marker:"
BENCH_ITEMS = 108  # items of the real FreeBSD recording (freebsd_double/real/, aesni+intelasm build)
WHOLE_SECONDS = re.compile(r" took \d+\.000 sec(?:onds)?, ")


# --------------------------------------------------------------------------- helpers


class Worker:
    """One fake FreeBSD worker: a booted double, a module file and a log directory."""

    def __init__(self, tmp_path: Path, scenario: str | dict, name: str = "libwolfssl.ko") -> None:
        state = tmp_path / "kernel"
        if isinstance(scenario, dict):
            self.double = FreeBSDDouble.boot_doc(scenario, state)
        else:
            self.double = FreeBSDDouble.boot(scenario, state)
        self.ko = tmp_path / "build" / name
        self.ko.parent.mkdir(parents=True, exist_ok=True)
        self.ko.write_bytes(b"\x7fELF not really a module")
        self.logs = tmp_path / "logs"

    def sh(
        self, script: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [SH, str(KMOD_DIR / script), *args],
            env=self.double.env() if env is None else env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def load(self, timeout_s: int = 5) -> subprocess.CompletedProcess[str]:
        return self.sh("load.sh", str(self.ko), str(timeout_s), str(self.logs))

    def unload(self) -> subprocess.CompletedProcess[str]:
        return self.sh("unload.sh", "libwolfssl", str(self.logs))

    def log_lines(self, name: str = "kernel.log") -> list[str]:
        return (self.logs / name).read_text(encoding="utf-8").splitlines()

    def status(self, name: str = "load.status") -> dict[str, str]:
        return read_status(self.logs / name)


def kernel_lines(scenario: str, step: str) -> list[str]:
    return list(load_scenario(scenario)[step]["kernel_log"])


def processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(proc.name))
    return found


# --------------------------------------------------------------------------- the scenarios themselves


def test_committed_scenarios_are_what_make_scenarios_builds_from_the_fixtures() -> None:
    built = make_scenarios.build_all(FIXTURES)
    assert sorted(built) == scenario_names()
    for name, doc in built.items():
        committed = (SCENARIOS / f"{name}.json").read_text(encoding="utf-8")
        assert committed == make_scenarios.render(doc), f"{name}.json is stale: run make_scenarios.py"


def test_benchmark_block_is_the_real_freebsd_recording() -> None:
    bench = make_scenarios.bench_block(FIXTURES)
    items = [line for line in bench if " took " in line]
    assert len(items) == BENCH_ITEMS
    assert bench[0].startswith("Math: ") and bench[-1] == "Benchmark complete"
    assert "wolfCrypt Benchmark (block bytes 1024, min 0.1 sec each)" in bench
    # The whole-second clock: every item takes whole seconds, not always one.
    assert all(WHOLE_SECONDS.search(x) for x in items)
    assert any(" took 4.000 sec, " in x for x in items)  # RSA 2048 key gen
    # A symmetric item's amount is not its rate times the seconds; the rate is what counts.
    assert items[2] == (
        "AES-128-CBC-enc          23.1 MiB took 1.000 seconds, 23.755 MiB/s Cycles per byte = 100.85"
    )


def test_every_scenario_says_what_was_constructed_and_what_recorded() -> None:
    for name in scenario_names():
        doc = load_scenario(name)
        if doc.get("real"):
            assert "recorded on FreeBSD 15.0-CURRENT" in doc["provenance"], name
        else:
            assert "not recorded on FreeBSD" in doc["provenance"], name
    assert load_scenario("success")["real"] == ["kldload.kernel_log", "kldunload.kernel_log"]


# --------------------------------------------------------------------------- load.sh / unload.sh


def test_success_slices_exactly_the_load_lines_then_the_whole_story(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    load = w.load()
    assert load.returncode == 0, load.stderr
    # The boot log holds an earlier run's "libwolfssl loaded": the slice must not.
    assert w.log_lines() == kernel_lines("success", "kldload")
    assert w.log_lines().count("info: libwolfssl loaded") == 1
    status = w.status()
    assert (status["result"], status["loaded_seen"], status["module"], status["slice_method"]) == (
        "loaded", "1", "libwolfssl", "marker",
    )
    assert ["kldload", str(w.ko)] in w.double.calls()

    unload = w.unload()
    assert unload.returncode == 0, unload.stderr
    assert w.log_lines("unload.kernel.log") == ["info: libwolfssl unloaded"]
    assert w.log_lines() == kernel_lines("success", "kldload") + ["info: libwolfssl unloaded"]
    assert not any(MARKER_TAG in line for line in w.log_lines())
    assert w.status("unload.status")["cleanup_seen"] == "1"
    assert (w.logs / "collect.method").read_text().strip() == "marker"
    assert w.double.loaded_files() == []
    assert "hw.model: AMD EPYC 7B13 64-Core Processor" in (w.logs / "worker.txt").read_text()


def test_markers_are_in_the_message_buffer_but_not_in_the_logs(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    assert w.load().returncode == 0
    raw = w.double.msgbuf_text()
    assert f"<118>{MARKER_TAG} {w.status()['marker']}" in raw
    assert MARKER_TAG not in "\n".join(w.log_lines())


def test_verbose_build_keeps_module_events_and_cleanup_complete(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success-verbose")
    assert w.load().returncode == 0
    assert w.unload().returncode == 0
    lines = w.log_lines()
    assert lines[0] == "info: wolfkmod_event: MOD_LOAD"
    assert lines[-3:] == [
        "info: wolfkmod_event: MOD_UNLOAD",
        "info: libwolfssl 5.9.2 cleanup complete.",
        "info: libwolfssl unloaded",
    ]
    assert sum(line.endswith("test passed!") for line in lines) == 89


def test_orphaned_fpu_state_is_kept_in_the_unload_slice(tmp_path: Path) -> None:
    w = Worker(tmp_path, "unload-fpu-orphan")
    assert w.load().returncode == 0
    assert w.unload().returncode == 0
    assert w.log_lines("unload.kernel.log") == [
        "error: wolfkmod_vecreg_exit: fpu_states[1] = 1, 100112",
        "info: libwolfssl unloaded",
    ]


def test_selftest_failure_is_a_load_error_with_the_kernel_log_kept(tmp_path: Path) -> None:
    w = Worker(tmp_path, "selftest-failure")
    load = w.load()
    assert load.returncode == 1
    assert "kldload failed (status 1)" in load.stderr
    assert "kernel log kept as evidence" in load.stderr
    assert w.log_lines() == kernel_lines("selftest-failure", "kldload")
    assert w.log_lines()[-1].endswith("error 85")
    assert (w.logs / "kldload.out").read_text().startswith(
        f"kldload: an error occurred while loading module {w.ko}."
    )
    assert w.status()["result"] == "load-error"
    assert w.status()["load_rc"] == "1"
    assert w.double.loaded_files() == []


def test_fips_hash_mismatch_is_a_load_error_with_the_new_hash_in_the_log(tmp_path: Path) -> None:
    w = Worker(tmp_path, "fips-hash-mismatch")
    assert w.load().returncode == 1
    lines = w.log_lines()
    assert lines == kernel_lines("fips-hash-mismatch", "kldload")
    # The five lines bsdkm/README.md shows from `dmesg | tail -n5`.
    assert lines[-5:] == [
        "In-core integrity hash check failure.",
        'Rebuild with "WOLFCRYPT_FIPS_CORE_HASH_VALUE='
        '3B144A08F291DBA536324646BBD127447B8F222D29A135780E330351E0DF9F0F".',
        "error: wc_RunAllCast_fips failed at shutdown with return value 19",
        "info: libwolfssl unloaded",
        "module_register_init: MOD_LOAD (libwolfssl_fips, 0xffffffff842c28d0, 0) error 85",
    ]


def test_hang_is_cut_off_by_the_time_limit_even_when_sigterm_is_ignored(tmp_path: Path) -> None:
    w = Worker(tmp_path, "load-hang")
    started = time.monotonic()
    load = w.load(timeout_s=2)
    took = time.monotonic() - started
    assert load.returncode == 3, load.stderr
    assert 2.0 <= took < 6.0  # 2 s limit + 1 s between TERM and KILL + snapshots
    assert "did not finish within 2 s" in load.stderr
    assert w.log_lines() == kernel_lines("load-hang", "kldload")
    status = w.status()
    assert (status["result"], status["timed_out"], status["load_rc"]) == ("timeout", "1", "")
    assert processes_mentioning(str(w.ko)) == []  # the stuck kldload was killed, not left behind


def test_crypto_register_driver_is_found_as_nexus_module_and_crid_unregistered_counts_as_cleanup(
    tmp_path: Path,
) -> None:
    w = Worker(tmp_path, "crypto-register")
    assert w.load().returncode == 0
    assert w.status()["module"] == "nexus/libwolfssl"
    assert w.unload().returncode == 0
    assert w.log_lines() == [  # as FreeBSD printed them (freebsd_double/real/)
        "libwolf0: <wolfSSL crypto>",
        "libwolf0: info: driver loaded: 1",
        "libwolf0: info: crid unregistered: 1",
        "libwolf0: detached",
    ]


def test_unload_failure_leaves_the_module_loaded_and_says_why(tmp_path: Path) -> None:
    w = Worker(tmp_path, "unload-failure")
    assert w.load().returncode == 0
    unload = w.unload()
    assert unload.returncode == 1
    assert "kldunload: can't unload file: Operation canceled" in unload.stderr
    assert w.status("unload.status")["result"] == "unload-error"
    assert w.double.loaded_files() == ["libwolfssl"]
    assert w.log_lines()[-2:] == [
        "error: wolfCrypt_Cleanup failed: Bad mutex, operation failed",
        "error: wolfkmod_vecreg_exit: fpu_states[0] = 1, 100107",
    ]


def test_unload_without_a_cleanup_line_is_flagged(tmp_path: Path) -> None:
    doc = load_scenario("success")
    doc["kldunload"]["kernel_log"] = []
    w = Worker(tmp_path, doc)
    assert w.load().returncode == 0
    unload = w.unload()
    assert unload.returncode == 5
    assert "no cleanup line" in unload.stderr
    assert w.status("unload.status")["result"] == "no-cleanup-line"


def test_console_logging_off_falls_back_to_aligning_snapshots(tmp_path: Path) -> None:
    w = Worker(tmp_path, "console-not-logged")
    assert w.load().returncode == 0
    assert w.status()["slice_method"] == "snapshot"
    assert w.log_lines() == kernel_lines("console-not-logged", "kldload")
    assert w.unload().returncode == 0
    assert (w.logs / "collect.method").read_text().strip() == "joined"
    assert w.log_lines() == kernel_lines("success", "kldload") + ["info: libwolfssl unloaded"]


def test_wrapped_message_buffer_keeps_what_survived_and_says_so(tmp_path: Path) -> None:
    w = Worker(tmp_path, "msgbuf-wrapped")
    assert w.load().returncode == 0
    assert w.status()["slice_method"] == "whole-buffer"
    lines = w.log_lines()
    expected = kernel_lines("msgbuf-wrapped", "kldload")
    assert lines[-1] == "info: libwolfssl loaded"
    assert len(lines) < len(expected)
    # Everything but the first (cut mid-line) line is the tail of what the module printed.
    assert lines[1:] == expected[-(len(lines) - 1):]
    assert sum(len(x) + 1 for x in lines) <= 2048


def test_snapshot_alignment_copes_with_a_first_line_cut_by_the_ring(tmp_path: Path) -> None:
    before = tmp_path / "before"
    after = tmp_path / "after"
    before.write_text("boot one\nboot two\nboot three\n")
    after.write_text("ot two\nboot three\nnew one\nnew two\n")
    out = tmp_path / "out"
    script = f'. "{KMOD_DIR}/_common.sh"; slice_after_snapshot "{before}" "{after}" "{out}"'
    assert subprocess.run([SH, "-c", script], timeout=10).returncode == 0
    assert out.read_text() == "new one\nnew two\n"
    after.write_text("lost everything\nnew two\n")
    assert subprocess.run([SH, "-c", script], timeout=10).returncode == 1
    assert out.read_text() == "lost everything\nnew two\n"


def bwk_awk_env(tmp_path: Path, base: dict[str, str]) -> dict[str, str]:
    """PATH with `awk` = the one-true-awk, the awk FreeBSD ships (Debian: original-awk)."""
    original = shutil.which("original-awk")
    if original is None:
        pytest.fail("original-awk is not installed: add Debian package 'original-awk' to bootstrap.sh")
    shim = tmp_path / "bwk"
    shim.mkdir()
    (shim / "awk").symlink_to(original)
    return dict(base, PATH=f"{shim}:{base['PATH']}")


def test_scripts_work_with_freebsds_awk(tmp_path: Path) -> None:
    w = Worker(tmp_path, "console-not-logged")  # exercises both slicing programs
    env = bwk_awk_env(tmp_path, w.double.env())
    assert w.sh("load.sh", str(w.ko), "5", str(w.logs), env=env).returncode == 0
    assert w.log_lines() == kernel_lines("console-not-logged", "kldload")
    assert w.sh("unload.sh", "libwolfssl", str(w.logs), env=env).returncode == 0
    assert w.log_lines("unload.kernel.log") == ["info: libwolfssl unloaded"]

    marker_run = Worker(tmp_path / "m", "success")
    env = bwk_awk_env(tmp_path / "m", marker_run.double.env())
    assert marker_run.sh("load.sh", str(marker_run.ko), "5", str(marker_run.logs), env=env).returncode == 0
    assert marker_run.status()["slice_method"] == "marker"
    assert marker_run.log_lines() == kernel_lines("success", "kldload")


def test_second_load_of_a_loaded_module_is_refused(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    assert w.load().returncode == 0
    again = w.load()
    assert again.returncode == 4
    assert "already loaded" in again.stderr
    assert w.status()["result"] == "already-loaded"


def test_unload_of_a_module_that_is_not_loaded_is_refused(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    r = w.unload()
    assert r.returncode == 4
    assert "libwolfssl is not loaded" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "usage: load.sh KO [TIMEOUT_S] LOGDIR"),
        (["{missing}", "5", "{logs}"], "does not exist"),
        (["{ko}", "abc", "{logs}"], "TIMEOUT_S must be a whole number of seconds > 0, got 'abc'"),
        (["{ko}", "0", "{logs}"], "got '0'"),
    ],
)
def test_load_usage_errors_exit_2_naming_the_problem(tmp_path: Path, args: list[str], message: str) -> None:
    w = Worker(tmp_path, "success")
    subst = {"ko": str(w.ko), "logs": str(w.logs), "missing": str(tmp_path / "nope.ko")}
    r = w.sh("load.sh", *[a.format(**subst) for a in args])
    assert r.returncode == 2
    assert message in r.stderr


def test_scripts_refuse_to_run_where_there_is_no_kldload(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    env = {k: v for k, v in w.double.env().items() if k != "BSDKM_SYSTEM_PATH"}
    r = w.sh("load.sh", str(w.ko), "5", str(w.logs), env=env)  # Linux's /sbin: no kldload there
    assert r.returncode == 2
    assert "'kldload' not found in /sbin:/bin:/usr/sbin:/usr/bin: this must run on a FreeBSD host" in r.stderr


def test_collect_without_a_load_says_so(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    w.logs.mkdir()
    r = w.sh("collect.sh", str(w.logs))
    assert r.returncode == 2
    assert "holds no load.status: run load.sh first" in r.stderr


# --------------------------------------------------------------------------- build.sh


FAKE_CONFIGURE = """#!/bin/sh
printf '%s\\n' "$@" > configure.args
[ -z "${FAIL_CONFIGURE:-}" ] || exit 1
"""
FAKE_MAKE = """#!/bin/sh
printf '%s\\n' "$@" > make.args
[ -z "${FAIL_MAKE:-}" ] || exit 2
[ -n "${NO_KO:-}" ] || { mkdir -p bsdkm && : > bsdkm/libwolfssl.ko; }
"""


def fake_tree(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    src = tmp_path / "wolfssl"
    src.mkdir()
    (src / "configure").write_text(FAKE_CONFIGURE)
    (src / "configure").chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "fakemake").write_text(FAKE_MAKE)
    (tools / "fakemake").chmod(0o755)
    env = dict(os.environ, MAKE=str(tools / "fakemake"))
    return src, env


def run_build(src: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SH, str(KMOD_DIR / "build.sh"), str(src), *flags],
        env=env, capture_output=True, text=True, timeout=600,
    )


def test_build_passes_the_freebsd_flags_then_the_variant_and_makes_with_two_jobs(tmp_path: Path) -> None:
    src, env = fake_tree(tmp_path)
    r = run_build(src, env, "--enable-intelasm", "CFLAGS=-DX=1 -DY")
    assert r.returncode == 0, r.stderr
    assert (src / "configure.args").read_text().splitlines() == [
        "--enable-freebsdkm", "--enable-kernel-benchmarks", "--enable-intelasm", "CFLAGS=-DX=1 -DY",
    ]
    assert (src / "make.args").read_text().splitlines() == ["-j2"]
    assert f"built {src}/bsdkm/libwolfssl.ko" in r.stderr


@pytest.mark.parametrize(
    ("knob", "rc", "message"),
    [
        ("FAIL_CONFIGURE", 21, "configure failed"),
        ("FAIL_MAKE", 22, "make failed"),
        ("NO_KO", 23, "bsdkm/libwolfssl.ko is missing"),
    ],
)
def test_build_failures_have_their_own_exit_status(tmp_path: Path, knob: str, rc: int, message: str) -> None:
    src, env = fake_tree(tmp_path)
    env[knob] = "1"
    r = run_build(src, env)
    assert r.returncode == rc
    assert message in r.stderr


def test_build_rejects_a_directory_that_is_not_a_wolfssl_tree(tmp_path: Path) -> None:
    r = run_build(tmp_path, dict(os.environ))
    assert r.returncode == 2
    assert "neither ./configure nor ./autogen.sh" in r.stderr
    r = run_build(tmp_path / "absent", dict(os.environ))
    assert r.returncode == 2
    assert "does not exist" in r.stderr


@pytest.mark.slow
def test_real_wolfssl_configure_accepts_the_freebsd_flags(tmp_path: Path) -> None:
    """wolfSSL 5.9.2's own configure, with this target's flags (make is skipped: no FreeBSD)."""
    from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source

    src = tmp_path / "wolfssl"
    shutil.copytree(wolfssl_source(), src, symlinks=True)
    flags = freebsd_configure_flags(["--enable-intelasm", "--enable-aesni"], kernel_source="/usr/src/sys")
    r = run_build(src, dict(os.environ, MAKE="true"), *flags)
    assert r.returncode == 23, r.stderr[-2000:]  # configured; `true` built nothing
    assert "unrecognized options" not in (r.stdout + r.stderr)
    makefile = (src / "Makefile").read_text()
    assert "ENABLED_KERNEL_BENCHMARKS = yes" in makefile
    assert "KERNEL_ROOT = /usr/src/sys" in makefile
    assert "-DWOLFSSL_BSDKM" in makefile
    assert "ENABLED_AESNI = yes" in makefile


# --------------------------------------------------------------------------- freebsd_configure_flags


def test_configure_flags_put_the_base_first_and_the_kernel_source_last() -> None:
    flags = freebsd_configure_flags(["--enable-intelasm", "--disable-kernel-benchmarks"], "/usr/src/sys")
    assert flags == [
        *FREEBSD_BASE_FLAGS,
        "--enable-intelasm",
        "--disable-kernel-benchmarks",
        "--with-kernel-source=/usr/src/sys",
    ]
    assert freebsd_configure_flags([]) == list(FREEBSD_BASE_FLAGS)


@pytest.mark.parametrize(
    ("variant", "source", "message"),
    [
        (["--enable-linuxkm-benchmarks"], None, "'--enable-linuxkm-benchmarks' is for the Linux module"),
        (["--with-linux-source=/usr/src/linux"], None, "is for the Linux module"),
        (["intelasm"], None, "'intelasm' is neither --option nor VAR=value"),
        ([""], None, "empty"),
        (["--with-kernel-source=/a"], "/b", "kernel source given twice"),
        ([], "usr/src/sys", "must be an absolute path"),
    ],
)
def test_configure_flags_reject_what_cannot_work(
    variant: list[str], source: str | None, message: str
) -> None:
    with pytest.raises(FreeBSDFlagError, match=message.replace("(", r"\(")):
        freebsd_configure_flags(variant, source)


# --------------------------------------------------------------------------- run_freebsd_module


def run_module(tmp_path: Path, scenario: str, timeout_s: int = 5):  # noqa: ANN201 - test helper
    w = Worker(tmp_path, scenario)
    outcome = run_freebsd_module(w.ko, w.logs, timeout_s=timeout_s, privilege=[], env=w.double.env())
    return w, outcome


def test_module_outcome_for_a_clean_run_and_the_parsed_kernel_log(tmp_path: Path) -> None:
    w, o = run_module(tmp_path, "success")
    assert (o.load_rc, o.unload_rc, o.timed_out, o.loaded_seen) == (0, 0, False, True)
    assert set(o.stages) == {"load", "unload"}
    assert o.notes == []
    assert o.kernel_log == w.logs / "kernel.log"
    assert set(o.extra_logs) == {"kldload", "kldunload", "load-kernel", "unload-kernel", "worker"}
    result = parse_file(o.kernel_log)
    assert result.format == LogFormat.FREEBSD_KERNEL_LOG
    assert result.complete
    assert len(result.benchmarks) == BENCH_ITEMS
    assert result.clock_resolution == 1.0
    assert [e.kind for e in result.lifecycle] == ["selftest_passed", "benchmark_passed", "loaded", "unloaded"]


def test_module_outcome_for_a_failed_selftest(tmp_path: Path) -> None:
    w, o = run_module(tmp_path, "selftest-failure")
    assert (o.load_rc, o.unload_rc, o.timed_out, o.loaded_seen) == (1, None, False, False)
    assert o.notes[0].startswith("kldload: an error occurred while loading module")
    assert "worker" in o.extra_logs  # collect.sh ran although unload did not
    result = parse_file(o.kernel_log)
    assert [t.name for t in result.failed_tests] == ["ECC"]
    assert "module_register_error" in [e.kind for e in result.lifecycle]


def test_module_outcome_for_a_hang(tmp_path: Path) -> None:
    _, o = run_module(tmp_path, "load-hang", timeout_s=2)
    assert (o.timed_out, o.timed_out_stage, o.load_rc, o.unload_rc) == (True, "load", None, None)
    assert o.duration_s < 10
    assert parse_file(o.kernel_log).benchmark_complete is False


def test_module_outcome_for_an_unload_failure(tmp_path: Path) -> None:
    _, o = run_module(tmp_path, "unload-failure")
    assert (o.load_rc, o.unload_rc, o.timed_out) == (0, 1, False)
    assert "kldunload: can't unload file: Operation canceled" in o.notes


def test_module_outcome_notes_a_wrapped_buffer(tmp_path: Path) -> None:
    _, o = run_module(tmp_path, "msgbuf-wrapped")
    assert any("message buffer wrapped" in n for n in o.notes)


def test_module_script_that_never_returns_is_killed_with_its_process_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import buildbot_bsdkm.pipeline.targets.freebsd_kmod.target as freebsd

    stuck = tmp_path / "kmod"
    shutil.copytree(KMOD_DIR, stuck)
    token = f"stuck-{tmp_path.name}"
    # A grandchild whose command line carries the token: it must die with the script's group.
    (stuck / "load.sh").write_text(f"#!/bin/sh\nsh -c 'sleep 300; :' {token}\n")
    monkeypatch.setattr(freebsd, "SCRIPT_SLACK_S", 1)
    w = Worker(tmp_path, "success")
    started = time.monotonic()
    o = run_freebsd_module(w.ko, w.logs, timeout_s=1, kmod_dir=stuck, privilege=[], env=w.double.env())
    assert time.monotonic() - started < 15
    assert (o.timed_out, o.timed_out_stage, o.load_rc) == (True, "load", None)
    assert "load.sh did not return within 2 s and was killed" in o.notes
    assert "no kernel log could be read from the worker" in o.notes
    time.sleep(0.5)
    assert processes_mentioning(token) == []


def test_module_errors_name_the_problem(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    with pytest.raises(StageError, match="does not exist"):
        run_freebsd_module(tmp_path / "missing.ko", w.logs, timeout_s=5, privilege=[], env=w.double.env())
    with pytest.raises(StageError, match="FreeBSD scripts missing in"):
        run_freebsd_module(w.ko, w.logs, timeout_s=5, kmod_dir=tmp_path, privilege=[], env=w.double.env())
    with pytest.raises(StageError, match="time limits must be > 0"):
        run_freebsd_module(w.ko, w.logs, timeout_s=0, privilege=[], env=w.double.env())
    env = {k: v for k, v in w.double.env().items() if k != "BSDKM_SYSTEM_PATH"}
    with pytest.raises(StageError, match="'kldload' not found in /sbin") as err:
        run_freebsd_module(w.ko, w.logs, timeout_s=5, privilege=[], env=env)
    assert err.value.failure.category == "infrastructure"


def test_module_already_loaded_before_the_run_is_an_infrastructure_error(tmp_path: Path) -> None:
    w = Worker(tmp_path, "success")
    assert w.load().returncode == 0
    with pytest.raises(StageError, match="already loaded on the worker") as err:
        run_freebsd_module(w.ko, tmp_path / "second", timeout_s=5, privilege=[], env=w.double.env())
    assert err.value.failure.category == "infrastructure"


# --------------------------------------------------------------------------- lint


WORKER_SETUP = KMOD_DIR.parents[1] / "workers" / "freebsd" / "setup.sh"


def shell_files() -> list[Path]:
    return sorted(KMOD_DIR.glob("*.sh")) + sorted(BIN.iterdir()) + [WORKER_SETUP]


def test_scripts_pass_shellcheck_as_posix_sh() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is not installed: add Debian package 'shellcheck' to scripts/bootstrap.sh")
    r = subprocess.run(
        [shellcheck, "-s", "sh", "-x", *map(str, shell_files())],
        cwd=KMOD_DIR, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_scripts_parse_under_dash() -> None:
    for script in shell_files():
        r = subprocess.run([SH, "-n", str(script)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{script.name}: {r.stderr}"


def test_scenario_json_is_valid_for_the_double() -> None:
    for name in scenario_names():
        doc = json.loads((SCENARIOS / f"{name}.json").read_text())
        assert {"kldload", "kldunload", "boot_log", "sysctl", "modules"} <= set(doc), name


# --------------------------------------------------------------------------- worker setup


def fake_freebsd_tools(tmp_path: Path) -> dict[str, str]:
    tools = tmp_path / "fbsd-tools"
    tools.mkdir()
    (tools / "uname").write_text('#!/bin/sh\ncase "$1" in -m) echo amd64 ;; *) echo FreeBSD ;; esac\n')
    (tools / "freebsd-version").write_text("#!/bin/sh\necho 14.1-RELEASE-p5\n")
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", DRY_RUN="1")


def test_worker_setup_plan_installs_tools_sources_sudo_rule_and_keeps_the_password_secret(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cr3t-worker-pw\n")
    r = subprocess.run(
        [SH, str(WORKER_SETUP), "master.example:9989", "fbsd-14", str(secret)],
        env=fake_freebsd_tools(tmp_path), capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    plan = r.stderr
    assert "pkg install -y python311 py311-buildbot-worker py311-cryptography" in plan
    assert "https://download.freebsd.org/releases/amd64/14.1-RELEASE/src.txz" in plan
    assert "/bin/sh /usr/local/libexec/bsdkm-ci/load.sh *" in plan
    assert "/bin/sh /usr/local/libexec/bsdkm-ci/offload.sh *" in plan
    assert "create-worker /home/buildbot/worker master.example:9989 fbsd-14 <password from" in plan
    assert "s3cr3t-worker-pw" not in plan + r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["master-without-port", "w", "{pw}"], "MASTER must be HOST:PORT"),
        (["m:1", "w", "{missing}"], "cannot read password file"),
        (["m:1"], "usage: setup.sh"),
    ],
)
def test_worker_setup_rejects_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    pw = tmp_path / "pw"
    pw.write_text("x")
    argv = [a.format(pw=pw, missing=tmp_path / "nope") for a in args]
    r = subprocess.run(
        [SH, str(WORKER_SETUP), *argv],
        env=fake_freebsd_tools(tmp_path), capture_output=True, text=True, timeout=60,
    )
    assert r.returncode == 2
    assert message in r.stderr


def test_worker_setup_refuses_to_run_on_linux(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("x")
    argv = [SH, str(WORKER_SETUP), "m:1", "w", str(pw)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "this is Linux, not FreeBSD" in r.stderr
