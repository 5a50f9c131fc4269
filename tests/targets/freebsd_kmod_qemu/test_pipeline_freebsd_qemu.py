"""freebsd-kmod-qemu through the whole pipeline: `bsdkm-ci run --target freebsd-kmod-qemu`.

Real wolfSSL 5.9.2 bsdkm builds (clang 19 + bmake against each kernel's own sources, cached by their
inputs) booted on FreeBSD's release and CURRENT snapshot kernels under QEMU TCG, from the sets that
``BSDKM_FREEBSD_SETS`` names (skipped without them). One variant pair on both
kernels (the full matrix is the main job's):
- ``aesni`` (AES-NI, no benchmark): the debug kernel panics in AES_set_decrypt_key_AESNI
  (malloc with a critical section held: wolfSSL 5.9.2's bug);
  the release kernel kldloads it, self-test passes, kldunload prints its line.
- ``short`` (no RSA/DH/ECC/ML-KEM and fewer AES modes, so the whole-second benchmark is short):
  the debug kernel's preloaded self-test passes and the run stops at the benchmark (no clock yet);
  the release kernel kldloads it: self-test, benchmark with working clocks, kldunload.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from freebsd_sets import RELEASE, SNAPSHOT, real_sets
from junitparser import Error, Failure, JUnitXml

from buildbot_bsdkm.model import from_json

CONFIG = """\
source: {{debian: {{suite: sid, package: wolfssl, version: "5.9.2"}}}}
targets:
  freebsd-kmod-qemu:
    flags: [--enable-cryptonly, --enable-crypttests, --enable-kernel-benchmarks]
    kernels: [debug, release]
    boot_timeout_s: 900
variants:
  aesni:
    flags: [--enable-aesni, --enable-intelasm, --disable-kernel-benchmarks]
    targets: [freebsd-kmod-qemu]
  short:
    flags: [--disable-rsa, --disable-dh, --disable-ecc, --disable-mlkem, --disable-aesccm, --disable-aesxts,
            --disable-aesctr, --disable-aesofb, --disable-aescfb, --disable-chacha, --disable-poly1305,
            --disable-cmac]
    targets: [freebsd-kmod-qemu]
benchmark: {{min_runtime_s: 0.1, embedded: true, ntimes: 1, agreetimes: 1}}
freebsd: {{release: {release}, snapshot: {snapshot}, mirror: {mirror}}}
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    sets = real_sets()
    tmp = tmp_path_factory.mktemp("fbq")
    cfg = tmp / "bsdkm.yml"
    cfg.write_text(CONFIG.format(release=RELEASE, snapshot=SNAPSHOT, mirror=sets))
    out = tmp / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg), "--out", str(out),
         "--target", "freebsd-kmod-qemu"],
        capture_output=True, text=True, timeout=2400,
    )
    return proc, out


def _run(out: Path, variant: str):  # type: ignore[no-untyped-def]
    return from_json((out / "freebsd-kmod-qemu" / variant / "results.json").read_text())[0]


def _cases(out: Path, variant: str) -> dict[str, object]:
    xml = JUnitXml.fromfile(str(out / "freebsd-kmod-qemu" / variant / "junit.xml"))
    return {f"{suite.name}/{case.name}": case for suite in xml for case in suite}


def test_exit_status_is_the_real_failure(run_out: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = run_out
    assert proc.returncode == 1, proc.stderr[-3000:]


def test_debug_kernel_panic_names_the_faulting_function(
    run_out: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = run_out
    run = _run(out, "aesni")
    f = run.failure
    assert f is not None and f.category.value == "real" and f.reason == "panic", f
    assert f.message.startswith("debug kernel: kernel panic: panic: malloc: called with spinlock")
    assert "(in AES_set_decrypt_key_AESNI)" in f.message
    assert any(e.startswith("backtrace: AES_set_decrypt_key_AESNI+0x") for e in f.evidence)
    cases = _cases(out, "aesni")
    load = cases["bsdkm.freebsd-kmod-qemu.aesni.selftest/stage:load"]
    results = [r for r in load.result if isinstance(r, Error | Failure)]  # type: ignore[attr-defined]
    assert results and "AES_set_decrypt_key_AESNI" in (results[0].message or "")


def test_release_kernel_kldload_self_test_and_unload(
    run_out: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = run_out
    for variant in ("aesni", "short"):
        run = _run(out, variant)
        release = next(log for log in run.logs if log.source.endswith("console-release.log"))
        assert release.selftest_summary is True and release.complete, (variant, release.incomplete_reason)
        kinds = [e.kind for e in release.lifecycle]
        assert "loaded" in kinds and "unloaded" in kinds, kinds  # the real unload line, parsed
        console = (out / "freebsd-kmod-qemu" / variant / "console-release.log").read_text(errors="replace")
        assert "### bsdkm-ci: unload rc=0" in console and "### bsdkm-ci: not listed after unload" in console


def test_release_benchmark_runs_with_working_clocks(
    run_out: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = run_out
    run = _run(out, "short")
    assert run.failure is None, run.failure
    release = next(log for log in run.logs if log.source.endswith("console-release.log"))
    names = {b.name for b in release.benchmarks}
    assert {"AES-128-CBC-enc", "AES-128-GCM-enc", "SHA-256"} <= names, sorted(names)
    assert release.clock_resolution == 1.0  # the module's whole-second timer
    cases = _cases(out, "short")
    assert "bsdkm.freebsd-kmod-qemu.short.benchmark/AES-128-GCM-enc" in cases
    debug = next(log for log in run.logs if log.source.endswith("console-debug.log"))
    assert debug.selftest_summary is True and not debug.benchmarks
    state = json.loads((out / "freebsd-kmod-qemu" / "short" / "state.json").read_text())
    assert any("benchmark not run: preloaded" in n for n in state["outcome"]["notes"])
