"""The Linux path: the AF_ALG benchmark's parser, the path crossover policy, the report.

Fast tests on a saved real output (``tests/data/afalg/lkcapi-tcg.afalg.log``: the ``afalg-*``
lines of a real lkcapi boot under QEMU TCG on this project's 2-core machine) and on small
hand-made logs for the edge cases. The QEMU run itself is in ``test_offload_qemu.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildbot_bsdkm.model import LogFormat, RunResult
from buildbot_bsdkm.parsers import detect_format, parse_file, parse_text
from buildbot_bsdkm.parsers.afalg_bench import split_name
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import afalg, afalg_console
from buildbot_bsdkm.policy import KIND_CROSSOVER, PolicyError, evaluate, parse_policy
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import markdown_report
from buildbot_bsdkm.report.offload_paths import KIND_OFFLOAD, offload_blocks, offload_svg, path_series

SAVED = Path(__file__).parents[2] / "data" / "afalg" / "lkcapi-tcg.afalg.log"
PATHS_POLICY = """
crossovers:
  - pattern: "afalg:*"
    paths: true
    accelerated: lkcapi
    software: user
  - pattern: "afalg:*"
    paths: true
    accelerated: lkcapi
    software: kernel
"""

# Hand-made, in the program's format: 16 B / 64 B / 256 B, offload wins from 256 B against user space.
SMALL = (Path(__file__).parents[2] / "data" / "afalg" / "small.afalg.log").read_text()


def _run(text: str, variant: str = "lkcapi") -> RunResult:
    return RunResult(variant=variant, target="linux-kmod-qemu", logs=[parse_text(text, "afalg.log")])


def test_format_is_detected() -> None:
    assert detect_format(SMALL.splitlines()) == LogFormat.AFALG_BENCH
    assert detect_format(["Doing aes-128-gcm for 3s on 16 size blocks: 1 aes-128-gcm's in 3.00s"]) \
        == LogFormat.OPENSSL_SPEED


def test_small_log_parses_into_block_size_series() -> None:
    log = parse_text(SMALL, "afalg.log")
    assert log.format == LogFormat.AFALG_BENCH and log.complete
    b = {x.name: x for x in log.benchmarks}
    item = b["afalg:lkcapi:AES-128-GCM@64"]
    assert item.block_size == 64 and item.per_second == pytest.approx(64 * 100 / 0.1)
    assert split_name(item.name) == ("lkcapi", "AES-128-GCM", 64)
    assert log.metadata["afalg_bound"]["lkcapi:gcm(aes)"]["module"] == "libwolfssl"
    assert log.metadata["afalg_proc"]["gcm-aes-aesni-wolfcrypt"]["priority"] == 100000


def test_cut_off_log_is_incomplete() -> None:
    cut = "\n".join(SMALL.splitlines()[:6])
    log = parse_text(cut, "afalg.log")
    assert not log.complete and "cut off" in (log.incomplete_reason or "")
    assert len(log.benchmarks) == 2


def test_errors_are_warnings_and_bad_results_are_problems() -> None:
    text = SMALL.replace("afalg-bench: end results=9 errors=0",
                         "afalg-error: path=kernel alg=cbc(aes) stage=bind errno=2 (No such file)\n"
                         "afalg-result: path=user alg=sha256 bytes=x ops=1 ns=1\n"
                         "afalg-bench: end results=9 errors=1")
    log = parse_text(text, "afalg.log")
    assert log.complete
    messages = [p.message for p in log.problems]
    assert any("stage=bind errno=2" in m for m in messages)
    assert any("without path/alg/bytes/ops/ns" in m for m in messages)


def test_path_crossover_and_driver_checks() -> None:
    verdict = evaluate([_run(SMALL)], parse_policy(PATHS_POLICY))
    cross = {c.name: c for c in verdict.checks if c.kind == KIND_CROSSOVER}
    vs_user = cross["afalg:AES-128-GCM lkcapi vs user"]
    # 16 B: 0.1x, 64 B: 0.33x, 256 B: 2x -> offload wins from 256 bytes
    assert vs_user.passed and vs_user.detail["crossover"] == 256
    vs_kernel = cross["afalg:AES-128-GCM lkcapi vs kernel"]
    assert vs_kernel.detail["crossover"] == 64
    assert vs_kernel.detail["worst_ratio"] == pytest.approx(0.909, 1e-3)
    (driver,) = [c for c in verdict.checks if c.kind == KIND_OFFLOAD]
    assert driver.passed and driver.detail["driver"] == "gcm-aes-aesni-wolfcrypt"
    assert driver.detail["by_name"] == "gcm-aes-aesni-wolfcrypt"


def test_limits_max_block_and_max_slower_pct() -> None:
    policy = parse_policy(PATHS_POLICY.replace("software: user", "software: user\n    max_block: 64")
                          .replace("software: kernel", "software: kernel\n    max_slower_pct: 5"))
    verdict = evaluate([_run(SMALL)], policy)
    cross = {c.name: c for c in verdict.checks if c.kind == KIND_CROSSOVER}
    assert not cross["afalg:AES-128-GCM lkcapi vs user"].passed
    assert "at or below 64 bytes" in cross["afalg:AES-128-GCM lkcapi vs user"].message
    slower = cross["afalg:AES-128-GCM lkcapi vs kernel"]
    assert not slower.passed and "9% slower than kernel at 16 bytes (limit 5%)" in slower.message
    within = PATHS_POLICY.replace("software: kernel", "software: kernel\n    max_slower_pct: 10")
    ok = evaluate([_run(SMALL)], parse_policy(within))
    assert all(c.passed for c in ok.checks)


def test_generic_name_resolving_elsewhere_fails_the_driver_check() -> None:
    text = SMALL.replace("afalg-bound: path=name alg=gcm(aes) requested=gcm(aes) "
                         "driver=gcm-aes-aesni-wolfcrypt module=libwolfssl priority=100000",
                         "afalg-bound: path=name alg=gcm(aes) requested=gcm(aes) driver=generic-gcm-aesni "
                         "module=aesni_intel priority=400")
    verdict = evaluate([_run(text)], parse_policy(PATHS_POLICY))
    (driver,) = [c for c in verdict.checks if c.kind == KIND_OFFLOAD]
    assert not driver.passed and "resolved to generic-gcm-aesni" in driver.message


def test_lkcapi_bound_to_a_kernel_driver_fails_the_driver_check() -> None:
    text = SMALL.replace("requested=gcm-aes-aesni-wolfcrypt driver=gcm-aes-aesni-wolfcrypt module=libwolfssl",
                         "requested=gcm-aes-aesni-wolfcrypt driver=generic-gcm-aesni module=aesni_intel")
    verdict = evaluate([_run(text)], parse_policy(PATHS_POLICY))
    (driver,) = [c for c in verdict.checks if c.kind == KIND_OFFLOAD]
    assert not driver.passed and "not libwolfssl" in driver.message


def test_policy_refuses_max_slower_pct_without_paths() -> None:
    with pytest.raises(PolicyError, match="max_slower_pct.*only understood with paths: true"):
        parse_policy("crossovers:\n  - {pattern: '*', accelerated: a, software: b, max_slower_pct: 5}\n")
    with pytest.raises(PolicyError, match="paths"):
        parse_policy("crossovers:\n  - {pattern: '*', accelerated: a, software: b, paths: 3}\n")


def test_variant_crossover_rules_are_unchanged() -> None:
    """A rule without ``paths`` still compares variants (and ignores a single run's paths)."""
    verdict = evaluate([_run(SMALL)], parse_policy(
        "crossovers:\n  - {pattern: 'afalg:*', accelerated: lkcapi, software: noasm}\n"))
    assert not [c for c in verdict.checks if c.kind == KIND_CROSSOVER]
    assert any("no noasm run" in n for n in verdict.notes)


def test_saved_real_output() -> None:
    log = parse_file(SAVED)
    assert log.format == LogFormat.AFALG_BENCH and log.complete
    run = RunResult(variant="lkcapi", target="linux-kmod-qemu", logs=[log])
    series = path_series(run)
    assert set(series) == {"afalg:AES-128-GCM", "afalg:AES-128-CBC", "afalg:SHA-256", "afalg:HMAC-SHA256"}
    for family, paths in series.items():
        assert {"lkcapi", "kernel", "user"} <= set(paths), family
        assert all(len(sizes) == 7 for sizes in paths.values()), family
    verdict = evaluate([run], parse_policy(PATHS_POLICY))
    drivers = [c for c in verdict.checks if c.kind == KIND_OFFLOAD]
    assert len(drivers) == 4 and all(c.passed for c in drivers), [c.message for c in drivers]
    gcm = next(c for c in verdict.checks if c.name == "afalg:AES-128-GCM lkcapi vs user")
    assert gcm.detail["crossover"] in ("never", 16, 64, 256, 1024, 4096, 16384, 65536)


def test_report_has_table_and_chart() -> None:
    run = _run(SMALL)
    verdict = evaluate([run], parse_policy(PATHS_POLICY))
    md = markdown_report([run], verdict)
    assert "Offload vs software" in md and "lkcapi beats user from 256 bytes" in md
    svg = offload_svg([run], verdict)
    assert svg.count("<svg") == 1 and "polyline" in svg and "lkcapi vs user: 256 B" in svg
    page = html_report([run], verdict)
    assert page.count("<svg") >= 1 and "afalg:AES-128-GCM" in page
    assert offload_blocks([], verdict) == []


def test_extract_log_keeps_only_benchmark_lines(tmp_path: Path) -> None:
    console = tmp_path / "console.log"
    console.write_text("[    1.0] boot\r\n### bsdkm-ci: after-load begin uptime=1\n" + SMALL
                       + "afalg-kmod: load /lib/modules/afalg/gcm.ko: ok\n### bsdkm-ci: poweroff\n")
    out = afalg_console.extract_log(console, tmp_path / "afalg.log")
    assert out is not None
    lines = out.read_text().splitlines()
    assert lines[0].startswith("afalg-bench: begin") and all(x.startswith("afalg-") for x in lines)
    (tmp_path / "plain.log").write_text("nothing here\n")
    assert afalg_console.extract_log(tmp_path / "plain.log", tmp_path / "x.log") is None
    missing = afalg_console.console_logs(tmp_path / "plain.log", tmp_path, expected=True)
    assert len(missing) == 1 and not missing[0].complete
    assert afalg_console.console_logs(tmp_path / "plain.log", tmp_path, expected=False) == []


def test_wants_afalg() -> None:
    assert afalg.wants_afalg(["--enable-linuxkm-lkcapi-register=all"])
    assert afalg.wants_afalg(["--enable-linuxkm-lkcapi-register"])
    assert not afalg.wants_afalg(["--enable-linuxkm-lkcapi-register=none", "--enable-aesni"])
    assert afalg.user_configure_flags(["--enable-aesni", "--enable-linuxkm-lkcapi-register=all",
                                       "--enable-kernel-benchmarks"])[-1] == "--enable-aesni"


def test_kernel_modules_in_load_order(tmp_path: Path) -> None:
    root = tmp_path / "modules"
    for rel in ("kernel/crypto/af_alg.ko", "kernel/crypto/algif_aead.ko", "kernel/crypto/gcm.ko",
                "kernel/arch/x86/crypto/aesni-intel.ko", "kernel/crypto/unrelated.ko"):
        (root / "6.1.0-x" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "6.1.0-x" / rel).write_bytes(b"")
    names = [p.name for p in afalg.kernel_module_paths("6.1.0-x", root)]
    assert names == ["af_alg.ko", "algif_aead.ko", "gcm.ko", "aesni-intel.ko"]


def test_overlay_holds_program_hook_and_config(tmp_path: Path) -> None:
    program = tmp_path / "bsdkm-afalg"
    program.write_bytes(b"\x7fELF")
    dest = afalg.make_overlay(program, tmp_path / "vm" / "initramfs.d", "no-such-kernel", budget_ms=50,
                              sizes=(16, 4096))
    assert (dest / "bin" / "bsdkm-afalg").read_bytes() == b"\x7fELF"
    hook = dest / "etc" / "bsdkm-ci.d" / "after-load"
    assert hook.stat().st_mode & 0o111 and "bsdkm-afalg" in hook.read_text()
    conf = (dest / "etc" / "bsdkm-ci.d" / "afalg.conf").read_text()
    assert conf == "AFALG_BUDGET_MS=50\nAFALG_SIZES=16,4096\n"
    assert (dest / "lib" / "modules" / "afalg" / "order").read_text() == ""
    afalg.stage_overlay(None, program, tmp_path / "vm")  # another variant: no stale overlay left
    assert not dest.exists()
