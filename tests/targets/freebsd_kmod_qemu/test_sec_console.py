"""What a PR's module prints on a console: it cannot stand in for the harness's markers, and it
cannot print without end (the console cap stops the guest and the run is the module's failure).

Real FreeBSD consoles (recorded runs) with what a module would add; the flooding guest here
is a real process writing as fast as it can. The real QEMU runs are in test_linuxkm_qemu.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import SHARED

from buildbot_bsdkm.config.bsdkm_yml import DEFAULT_CONSOLE_CAP_MIB, ConfigError, parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.console_lines import console_lines
from buildbot_bsdkm.pipeline.runtime.proc import CONSOLE_FLOOD, READ_CHUNK, Watched, run_watched
from buildbot_bsdkm.pipeline.targets import kernel
from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import console as fconsole
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import target as linux_target

REAL = Path(__file__).parents[2] / "freebsd_double" / "real"
KLDLOAD_RUN = REAL / "kldload-release-crypto_aesni.console.log"
LOGS = SHARED / "freebsd" / "logs"
NONCE = "0d6f3b1c9a2e4f57"
MIB = 1 << 20
MINIMAL = "targets: {userspace: {flags: []}}\nvariants: {noasm: {flags: [], targets: [userspace]}}\n"


# --------------------------------------------------------------------------- FreeBSD markers


def _kldload_console(tmp_path: Path, *, nonce: str | None, in_load: list[str], after: list[str],
                     load_result: str = "load rc=-1 errno=8") -> Path:
    """The real kldload console up to "load begin" (its markers tagged with ``nonce``), then what the
    module printed during its init (``in_load``), kldinit's ``load_result``, and ``after``."""
    tag = f" nonce={nonce}" if nonce else ""
    lines = []
    for line in KLDLOAD_RUN.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("### bsdkm-ci: "):
            lines.append(line + tag)
            if line == "### bsdkm-ci: load begin":
                break
        else:
            lines.append(line)
    lines += in_load + [f"### bsdkm-ci: {load_result}{tag}"] + after + [f"### bsdkm-ci: poweroff{tag}"]
    console = tmp_path / "release" / "console.log"
    console.parent.mkdir(parents=True, exist_ok=True)
    console.write_text("\n".join(lines) + "\n")
    return console


# What a module's init can printf on a FreeBSD console (no prefix): kldinit's own lines.
FORGED = ["### bsdkm-ci: load rc=0", "### bsdkm-ci: kldstat id=2 refs=1 size=1375368 name=libwolfssl.ko",
          "### bsdkm-ci: unload begin", "### bsdkm-ci: unload rc=0", "### bsdkm-ci: not listed after unload"]
KLDLOAD = fboot.Boot("release", "release-crypto", "kldload")


def _judged(outcome: object, tmp_path: Path) -> object:
    combined = fq.combine({"release": outcome}, [], tmp_path)  # type: ignore[dict-item]
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(combined)}, tmp_path, 900.0)
    return failure


def test_freebsd_markers_printed_by_the_module_during_its_load_do_not_count(tmp_path: Path) -> None:
    console = _kldload_console(tmp_path, nonce=NONCE, in_load=FORGED, after=[])
    out = fconsole.outcome_from_boot(KLDLOAD, console, Watched(0, 60.0, False, None), set(), {}, NONCE)
    assert (out.load_rc, out.load_errno, out.unload_rc, out.loaded_seen) == (-1, 8, None, False)
    assert "5 console line(s) imitate the harness's markers and were ignored" in out.notes
    failure = _judged(out, tmp_path)
    assert failure is not None and failure.category is FailureCategory.REAL  # type: ignore[attr-defined]


def test_freebsd_a_step_result_printed_after_kldinits_does_not_replace_it(tmp_path: Path) -> None:
    # A kept console read without its nonce: markers must start the line, and the first result counts.
    console = _kldload_console(tmp_path, nonce=None, in_load=[], after=FORGED)
    facts = fconsole.read_console(console_lines(console))
    assert (facts.load_rc, facts.load_errno, facts.unload_rc, facts.kldstat) == (-1, 8, None, None)
    out = fconsole.outcome_from_boot(KLDLOAD, console, Watched(0, 60.0, False, None), set(), {})
    assert (out.load_rc, out.loaded_seen) == (-1, False)


def test_freebsd_real_kldload_run_with_its_nonce_still_passes(tmp_path: Path) -> None:
    tag = f" nonce={NONCE}"
    text = "\n".join(ln + tag if ln.startswith("### bsdkm-ci: ") else ln
                     for ln in KLDLOAD_RUN.read_text(encoding="utf-8", errors="replace").splitlines())
    facts = fconsole.read_console(text, NONCE)
    assert (facts.load_rc, facts.unload_rc, facts.still_listed, facts.imitations) == (0, 0, False, 0)
    assert facts.kldstat == "kldstat id=2 refs=1 size=1375368 name=libwolfssl.ko"
    assert fconsole.read_console(text, "ffff").load_rc is None  # another boot's nonce: none of them count


def test_freebsd_boot_without_a_nonce_is_the_harnesss_fault(tmp_path: Path) -> None:
    # kldinit printed this before it loaded the module: nothing of the boot can be read.
    console = _kldload_console(tmp_path, nonce=None, in_load=FORGED, after=[])
    console.write_text("### bsdkm-ci: no nonce (kenv -2)\n" + console.read_text())
    out = fconsole.outcome_from_boot(KLDLOAD, console, Watched(0, 60.0, False, None), set(), {}, NONCE)
    assert out.load_rc is None and out.notes[0].startswith("the boot had no nonce (no nonce (kenv -2))")
    failure = _judged(out, tmp_path)
    assert failure is not None
    assert (failure.category, failure.reason) == (FailureCategory.INFRASTRUCTURE, "worker-setup")  # type: ignore[attr-defined]
    # A module printing the same line after kldinit's first marker changes nothing.
    late = _kldload_console(tmp_path, nonce=NONCE, in_load=["### bsdkm-ci: no nonce (kenv -2)"], after=[])
    out = fconsole.outcome_from_boot(KLDLOAD, late, Watched(0, 60.0, False, None), set(), {}, NONCE)
    assert not any("no nonce" in n for n in out.notes) and out.load_rc == -1


def test_loader_rc_hands_the_nonce_to_kldinit_only() -> None:
    assert f"set bsdkm_ci.nonce={NONCE}" in fboot.loader_rc("kldload", NONCE)
    assert "nonce" not in fboot.loader_rc("preload", NONCE)


def test_freebsd_preloaded_module_whose_init_failed_is_not_loaded(tmp_path: Path) -> None:
    # The module says it loaded; the kernel says its MOD_LOAD handler failed.
    console = tmp_path / "debug" / "console.log"
    console.parent.mkdir(parents=True)
    console.write_text('Preloaded elf obj module "/boot/modules/libwolfssl.ko" at 0xffffffff8213c0b0.\n'
                       "info: libwolfssl loaded\n"
                       "module_register_init: MOD_LOAD (libwolfssl, 0xffffffff8297e2a0, 0) error 5\n")
    out = fconsole.outcome_from_boot(fboot.Boot("debug", "debug", "preload"), console,
                                     Watched(0, 60.0, False, None), set(), {})
    assert out.load_rc == 1 and "the module's MOD_LOAD failed: errno 5" in out.notes


def test_freebsd_preloaded_module_the_loader_placed_is_loaded(tmp_path: Path) -> None:
    # The kit's real debug-kernel run: the loader's own line places the module (the kernel names it
    # only when booting verbose), the self-test passed, the run stops at the benchmark.
    console = tmp_path / "debug" / "console.log"
    console.parent.mkdir(parents=True)
    shutil.copyfile(LOGS / "debug-kernel_nofpecc_selftest-pass.log", console)
    fboot.cut_at_benchmark(console)
    out = fconsole.outcome_from_boot(fboot.Boot("debug", "debug", "preload"), console,
                                     Watched(None, 60.0, False, "benchmark-at-preload"), set(), {})
    assert (out.load_rc, out.loaded_seen) == (0, True)
    combined = fq.combine({"debug": out}, [], tmp_path)
    _, failure = fq.TARGET.logs({"outcome": kernel.outcome_record(combined)}, tmp_path, 900.0)
    assert failure is None, failure


# --------------------------------------------------------------------------- the console cap


def test_console_cap_is_a_config_key_with_a_default() -> None:
    assert parse_config(MINIMAL).console_cap_bytes == int(DEFAULT_CONSOLE_CAP_MIB * MIB) == 64 * MIB
    assert parse_config(MINIMAL + "console_cap_mib: 0.5\n").console_cap_bytes == MIB // 2
    for bad, problem in (("0", "must be greater than 0"), ("lots", "must be a number"),
                         (".inf", "must be a finite number of MiB")):
        with pytest.raises(ConfigError, match=f"x.yml:3: console_cap_mib: {problem}"):
            parse_config(MINIMAL + f"console_cap_mib: {bad}\n", "x.yml")


FLOODER = [sys.executable, "-c", "import sys\nline = b'bsdkm_flood: ' + b'x' * 200 + b'\\n'\n"
           "while True:\n    sys.stdout.buffer.write(line * 64)\n"]


def test_a_flooding_guest_is_stopped_at_the_cap_and_its_console_cut(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    pieces: list[str] = []
    res = run_watched(FLOODER, log=log, timeout_s=60, stop=lambda t: pieces.append(t) and None,
                      poll_s=0.05, max_bytes=4 * MIB)
    assert res.stopped == CONSOLE_FLOOD and not res.timed_out and res.exit_code is None
    assert res.log_bytes > 4 * MIB and log.stat().st_size == 4 * MIB and res.seconds < 30
    assert all(len(p) <= READ_CHUNK for p in pieces)  # never the whole console at once


def test_the_watcher_sees_each_piece_of_output_once(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    pieces: list[str] = []
    prog = "import sys, time\nsys.stdout.write('a' * 3000000 + '\\nmount')\nsys.stdout.flush()\n" \
           "time.sleep(0.3)\nsys.stdout.write('root> ')\nsys.stdout.flush()\ntime.sleep(60)\n"
    rule = fboot.stop_rule("kldload", lambda: 0.0)

    def stop(piece: str) -> str | None:
        pieces.append(piece)
        return rule(piece)

    res = run_watched([sys.executable, "-c", prog], log=log, timeout_s=60, stop=stop, poll_s=0.05)
    assert res.stopped == "mountroot"  # the prompt came in two pieces
    assert "".join(pieces) == log.read_text()


def test_freebsd_flood_is_a_real_failure_not_infrastructure(tmp_path: Path) -> None:
    console = _kldload_console(tmp_path, nonce=NONCE, in_load=["wolfssl: flood"] * 1000, after=[],
                               load_result="load begin")
    flood = Watched(None, 12.0, False, CONSOLE_FLOOD, log_bytes=70 * MIB)
    out = fconsole.outcome_from_boot(KLDLOAD, console, flood, set(), {}, NONCE)
    assert out.console_flood_bytes == 70 * MIB
    failure = _judged(out, tmp_path)
    assert failure is not None
    assert (failure.category, failure.reason) == (FailureCategory.REAL, "console-flood")  # type: ignore[attr-defined]
    assert failure.message == (  # type: ignore[attr-defined]
        "release kernel: console flood: 70.0 MiB; the guest was stopped at the console cap")


def test_linux_flood_stopped_at_the_cap_is_a_real_failure(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text("### bsdkm-ci: init begin kernel=6.1.0-57-amd64 uptime=5.55\n"
                       "### bsdkm-ci: load begin uptime=6.27\n" + "[    6.5] bsdkm_flood: xxxx\n" * 5000)
    out = linuxkm.outcome_from_console(console, Watched(None, 20.0, False, CONSOLE_FLOOD, log_bytes=1131173))
    assert out.console_flood_bytes == 1131173
    failure = judge_outcome(out, parse_kernel_log(linux_target.TARGET.log_format, console), 90)
    assert failure is not None
    assert (failure.category, failure.reason) == (FailureCategory.REAL, "console-flood")
    assert failure.message == "console flood: 1.1 MiB; the guest was stopped at the console cap"


def test_judging_a_long_console_still_finds_its_panic(tmp_path: Path) -> None:
    # The console is read line by line for the real-failure patterns: the panic line far down is found.
    console = tmp_path / "console.log"
    with open(console, "w") as out:
        out.write("### bsdkm-ci: load begin uptime=6.27\n")
        out.write(("[    6.5] bsdkm_flood: " + "x" * 200 + "\n") * 20000)
        out.write("y" * (300 * 1024) + "\n")  # one line longer than the reader's piece
        out.write("[   40.1] Kernel panic - not syncing: bsdkm_flood: out of patience\n")
    outcome = linuxkm.outcome_from_console(console, Watched(0, 40.0, False, None))
    failure = judge_outcome(outcome, parse_kernel_log(linux_target.TARGET.log_format, console), 90)
    assert failure is not None and (failure.category, failure.reason) == (FailureCategory.REAL, "panic")
    assert "out of patience" in failure.message


def test_copied_freebsd_console_keeps_its_own_name(tmp_path: Path) -> None:
    # _cut_at_benchmark now streams: the whole console is kept beside the cut one.
    console = tmp_path / "console.log"
    shutil.copyfile(LOGS / "release-kernel_aesni-fpecc_selftest-pass.log", console)
    text = console.read_text(encoding="utf-8", errors="replace")
    if "wolfCrypt Benchmark (" not in text:
        console.write_text(text + "wolfCrypt Benchmark (block bytes 1024, min 1.0 sec each)\nRNG 1 MiB\n")
    fboot.cut_at_benchmark(console)
    cut = console.read_text()
    assert cut.endswith("### bsdkm-ci: benchmark not run at preload (no clock yet)\n")
    assert "wolfCrypt Benchmark (" not in cut
    assert "wolfCrypt Benchmark (" in console.with_name("console.raw.log").read_text()
