"""In QEMU: the lkcapi variant through the whole pipeline, one build and one boot.

wolfSSL 5.9.2 built with ``--enable-linuxkm-lkcapi-register`` (flags from the repository's
``bsdkm.yml`` ``lkcapi`` variant), loaded by the existing loader in QEMU TCG; after the load
the guest's AF_ALG program measures wolfCrypt's registered driver, the kernel's own driver
and wolfCrypt in user space, and the run is gated with ``paths: true`` crossover rules. The
module and the benchmark program are cached under the bsdkm-ci cache. Speeds are TCG's:
the test checks structure and that a verdict exists, never a speed. The same boot counts the
module's instructions with the QEMU plugin (``instructions.kernel_count``): the real module's
code, through its AF_ALG entry points, between the harness's nonce-carrying signals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import LogFormat, from_json

ROOT = Path(__file__).resolve().parents[3]
POLICY = """\
instructions: {kernel_count: true, kernel_bytes: 16384, kernel_sizes: [16, 1024]}
regressions:
  - {pattern: "kmod:*", max_pct: 0.5, metric: instructions}
crossovers:
  - {pattern: "afalg:*", paths: true, accelerated: lkcapi, software: user}
  - {pattern: "afalg:*", paths: true, accelerated: lkcapi, software: kernel}
"""

pytestmark = pytest.mark.slow


def _config(tmp: Path) -> Path:
    repo = load_config(ROOT / "bsdkm.yml")
    variant = repo.variants["lkcapi"]
    flags = json.dumps(list(variant.flags))
    cflags = json.dumps(list(variant.cflags))
    # The main job's TCG benchmark settings (RSA keys up to 2048 bits: 3072/4096 key generation
    # took 88 s of this boot's guest time), so `bsdkm-ci run --variant lkcapi` shares the cache.
    bench_cflags = json.dumps(list(repo.targets["linux-kmod-qemu"].bench_cflags))
    (tmp / "policy.yml").write_text(POLICY)
    cfg = tmp / "bsdkm.yml"
    cfg.write_text(f"""\
source: {{debian: {{suite: sid, package: wolfssl, version: "5.9.2"}}}}
targets:
  linux-kmod-qemu:
    {{flags: [--enable-cryptonly, --enable-crypttests], cpu: max, bench_cflags: {bench_cflags}}}
variants:
  lkcapi: {{flags: {flags}, cflags: {cflags}, targets: [linux-kmod-qemu]}}
benchmark: {{min_runtime_s: 0.1, embedded: true, ntimes: 1, agreetimes: 1}}
timeouts: {{load: 900}}
policy: {tmp / 'policy.yml'}
""")
    return cfg


@pytest.fixture(scope="module")
def run_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("lkcapi")
    out = tmp / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(_config(tmp)), "--out", str(out)],
        capture_output=True, text=True, timeout=2400,
    )
    return proc, out


def test_lkcapi_boot_measures_three_paths(run_out: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, out = run_out
    assert proc.returncode in (0, 1), proc.stderr
    d = out / "linux-kmod-qemu" / "lkcapi"
    [run] = from_json((d / "results.json").read_text())
    assert run.failure is None, run.failure
    kernel_log, afalg_log = run.logs
    assert kernel_log.selftest_summary is True
    assert afalg_log.format == LogFormat.AFALG_BENCH and afalg_log.complete, afalg_log.incomplete_reason
    console = (d / "console.log").read_text(errors="replace")
    assert "registered for gcm(aes) with priority" in console  # wolfCrypt's own registration line
    paths = {b.name.split(":")[1] for b in afalg_log.benchmarks}
    assert {"lkcapi", "kernel", "user", "name"} <= paths
    sizes = {b.block_size for b in afalg_log.benchmarks if b.name.startswith("afalg:lkcapi:AES-128-GCM@")}
    assert sizes == {16, 64, 256, 1024, 4096, 16384, 65536}
    assert all(b.per_second > 0 for b in afalg_log.benchmarks)
    bound = afalg_log.metadata["afalg_bound"]
    assert bound["lkcapi:gcm(aes)"]["module"] == "libwolfssl"
    assert bound["kernel:gcm(aes)"]["module"] != "libwolfssl"


def test_lkcapi_verdict_states_aes_gcm_crossover(run_out: tuple[subprocess.CompletedProcess[str],
                                                                 Path]) -> None:
    proc, out = run_out
    summary = json.loads((out / "summary.json").read_text())
    checks = summary["verdict"]["checks"]
    gcm = {c["name"]: c for c in checks if c["name"].startswith("afalg:AES-128-GCM")}
    user = gcm["afalg:AES-128-GCM lkcapi vs user"]
    kernel = gcm["afalg:AES-128-GCM lkcapi vs kernel"]
    for c in (user, kernel):  # a verdict, honestly: a block size or "never"
        point = c["detail"]["crossover"]
        assert point == "never" or point in (16, 64, 256, 1024, 4096, 16384, 65536), c
        assert len(c["detail"]["ratios"]) == 7
    driver = gcm["afalg:AES-128-GCM registered driver"]
    assert driver["passed"], driver["message"]
    html = (out / "report.html").read_text()
    assert "Offload vs software" in html and html.count("<svg") >= 4
    md = (out / "report.md").read_text()
    assert "afalg:AES-128-GCM" in md


def test_lkcapi_boot_counts_the_module_itself(run_out: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    from buildbot_bsdkm.perf.instruction_counts import counts_of
    from buildbot_bsdkm.perf.kernel_counts import SCOPE_MODULE

    _, out = run_out
    d = out / "linux-kmod-qemu" / "lkcapi"
    [run] = from_json((d / "results.json").read_text())
    counts = counts_of(run.metadata)
    assert counts is not None and counts.scope == SCOPE_MODULE and counts.tool == "qemu-tcg-plugin"
    by = {i.name: i for i in counts.items}
    assert set(by) == {f"kmod:{a}@{s}" for a in ("AES-128-GCM", "AES-128-CBC", "SHA-256", "HMAC-SHA256")
                       for s in (16, 1024)}
    assert all(i.status == "measured" and (i.instructions or 0) > 0 for i in counts.items), \
        [(i.name, i.reason) for i in counts.items]
    # Per byte, 16-byte operations cost more than 1 KiB ones (the per-call glue is in the count).
    assert by["kmod:AES-128-GCM@16"].per_unit > by["kmod:AES-128-GCM@1024"].per_unit  # type: ignore[operator]
    names = set().union(*(i.functions for i in counts.items))
    assert any("Gcm" in n or "GCM" in n for n in names), sorted(names)[:20]
    summary = json.loads((out / "summary.json").read_text())
    notes = " ".join(summary["verdict"].get("notes") or [])
    assert "no base instruction counts" in notes  # one run, no base: not judged, never passed
