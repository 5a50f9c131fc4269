"""The Linux module through the whole pipeline: `bsdkm-ci run --target linux-kmod-qemu`.

A real wolfSSL 5.9.2 `--enable-linuxkm` build against Debian's headers (cached by its inputs),
loaded once in QEMU TCG: the run must show the module's self-test verdict, parsed benchmark
lines and the unload, and land in results.json / JUnit like any other target.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from buildbot_bsdkm.model import from_json

ROOT = Path(__file__).resolve().parents[3]
CONFIG = f"""\
source: {{debian: {{suite: sid, package: wolfssl, version: "5.9.2"}}}}
targets:
  linux-kmod-qemu: {{flags: [--enable-cryptonly, --enable-crypttests], cpu: max}}
variants:
  intelasm: {{flags: [--enable-aesni, --enable-intelasm, --enable-sp-asm, --disable-ecc],
             targets: [linux-kmod-qemu]}}
benchmark: {{min_runtime_s: 0.1, embedded: true, ntimes: 1, agreetimes: 1}}
timeouts: {{load: 1200}}
policy: {ROOT / 'policies' / 'default.yml'}
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("lkm")
    cfg = tmp / "bsdkm.yml"
    cfg.write_text(CONFIG)
    out = tmp / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg), "--out", str(out)],
        capture_output=True, text=True, timeout=2400,
    )
    return proc, out


def test_module_loads_self_tests_benchmarks_and_unloads(run_out: tuple[subprocess.CompletedProcess[str],
                                                                        Path]) -> None:
    proc, out = run_out
    assert proc.returncode in (0, 1), proc.stderr
    d = out / "linux-kmod-qemu" / "intelasm"
    [run] = from_json((d / "results.json").read_text())
    assert run.failure is None, run.failure
    assert run.complete
    [log] = run.logs
    assert log.selftest_summary is True and log.benchmark_complete
    kinds = {e.kind for e in log.lifecycle}
    assert "cleanup_complete" in kinds, kinds  # the unload was seen
    names = {b.name: b for b in run.benchmarks}
    for item in ("AES-128-GCM-enc", "AES-128-CBC-enc", "SHA-256"):
        assert names[item].per_second > 0 and names[item].cycles, item
    console = Path(log.source)
    assert console.parent == d, console  # the evidence is kept with the variant's outputs
    assert "wolfssl: bench_stats_sym_finish(): AES-128-GCM-enc" in console.read_text(errors="replace")
    # The verdict reaches JUnit: one testcase per benchmark, nothing failed but what the policy says.
    suites = list(JUnitXml.fromfile(str(d / "junit.xml")))
    cases = [c for s in suites for c in s]
    assert any(c.name == "AES-128-GCM-enc" for c in cases)
    assert proc.returncode == 0, proc.stdout
