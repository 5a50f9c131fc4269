"""``bsdkm-ci junit`` and ``bsdkm-ci compare`` as real processes on real logs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import junitparser
import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import from_json, to_json

ROOT = Path(__file__).resolve().parents[2]
# the installed console script, as CI runs it (``python -m buildbot_bsdkm.cli`` would load cli.py twice)
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
FIXED_POLICY = ROOT / "policies" / "fixed-limits.yml"  # the previous default: judges one run a side


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def results_json(tmp: Path, name: str, variant: str, log: str) -> Path:
    out = cli("parse", "--json", "--variant", variant, "--target", "userspace", FIXTURES / log)
    assert out.returncode == 0, out.stderr
    path = tmp / name
    path.write_text(out.stdout, encoding="utf-8")
    return path


def test_junit_on_a_text_log(tmp_path: Path) -> None:
    out = tmp_path / "junit.xml"
    md = tmp_path / "report.md"
    p = cli("junit", FIXTURES / "noise/accel_r05.txt", "--variant", "aesni-avx", "--target", "userspace",
            "-o", out, "--markdown", md)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("✅ PASS: 4 checks passed")  # complete + 3 required items
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(out))}
    assert suites["bsdkm.userspace.aesni-avx.benchmark"].tests == 27 + 3
    # accel_r05.txt: "AES-128-GCM-enc  5015 MiB took 1.001 seconds, 5010.149 MiB/s Cycles per byte = 0.49"
    # no baseline, no limit: those columns are left out, not shown empty
    assert "| AES-128-GCM-enc | 5010 MiB/s | 0.49 cycles/byte |\n" in md.read_text(encoding="utf-8")


def test_junit_gates_several_variants_from_json(tmp_path: Path) -> None:
    accel = results_json(tmp_path, "accel.json", "aesni-avx", "noise/accel_r01.txt")
    noasm = results_json(tmp_path, "noasm.json", "noasm", "noise/noasm_r01.txt")
    out, md, page = tmp_path / "j.xml", tmp_path / "r.md", tmp_path / "r.html"
    p = cli("junit", accel, noasm, "-o", out, "--markdown", md, "--html", page)
    assert p.returncode == 0, p.stderr
    text = md.read_text(encoding="utf-8")
    assert ("| userspace | AES-128-GCM-enc | aesni-avx: 4938 MiB/s | noasm: 156 MiB/s | 31.57x | 10x | pass |"
            in text)
    html = page.read_text(encoding="utf-8")
    assert html.count("<rect ") == 18 and "31.57x" in html
    xml = junitparser.JUnitXml.fromfile(str(out))
    bench = {s.name: s for s in xml}["bsdkm.userspace.aesni-avx.benchmark"]
    assert bench.tests == 27 + 3 and bench.failures == 0


def test_junit_with_baseline_fails_on_real_regression(tmp_path: Path) -> None:
    base = results_json(tmp_path, "base.json", "aesni-avx", "noise/accel_r01.txt")
    runs = from_json(base.read_text(encoding="utf-8"))
    bench = runs[0].logs[0].benchmarks
    i = next(i for i, b in enumerate(bench) if b.name == "SHA-256")
    bench[i] = dataclasses.replace(bench[i], value=bench[i].value * 0.7, per_second=bench[i].per_second * 0.7)
    head = tmp_path / "head.json"
    head.write_text(to_json(runs), encoding="utf-8")
    # one run a side is judged by fixed limits only; the default's learned limits say inconclusive
    p = cli("junit", head, "-o", tmp_path / "j.xml", "--baseline", base, "--policy", FIXED_POLICY)
    assert p.returncode == 1
    assert ("userspace/aesni-avx regression: SHA-256 1191 MiB/s is 30.0% below baseline 1701 MiB/s "
            "(limit 15%)") in p.stdout

    c = cli("compare", base, head, "--policy", FIXED_POLICY)
    assert c.returncode == 1
    assert "| userspace/aesni-avx | SHA-256 | 1701 MiB/s | 1191 MiB/s | -30.0% | 15% | FAIL |" in c.stdout
    assert c.stdout.startswith("❌ FAIL: 1 of ")


def test_compare_of_two_healthy_repeats_passes(tmp_path: Path) -> None:
    base = results_json(tmp_path, "a.json", "noasm", "noise/noasm_r07.txt")
    head = results_json(tmp_path, "b.json", "noasm", "noise/noasm_r15.txt")
    p = cli("compare", base, head, "--policy", FIXED_POLICY)
    assert p.returncode == 0, p.stdout
    # the noisiest healthy pair of the series: GMAC drops 10.4 %, inside the 15 % item limit
    assert "| userspace/noasm | GMAC Table 4-bit | 316 MiB/s | 283 MiB/s | -10.4% | 15% | pass |" in p.stdout


def test_failing_selftest_exits_1_and_names_it(tmp_path: Path) -> None:
    log = FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt"
    p = cli("junit", log, "-o", tmp_path / "j.xml")
    assert p.returncode == 1
    assert "unknown/unknown selftest: PWDBASED self-test failed: error L=34448 code=-125" in p.stdout


def test_unusable_inputs_exit_2_with_the_reason(tmp_path: Path) -> None:
    log = FIXTURES / "noise/accel_r01.txt"
    missing = cli("junit", tmp_path / "nope.txt", "-o", tmp_path / "j.xml")
    assert missing.returncode == 2 and "nope.txt: no such file" in missing.stderr

    bad_policy = tmp_path / "p.yml"
    bad_policy.write_text("regressions:\n  - pattern: '*'\n    max_pct: 10\n    cap: 3\n", encoding="utf-8")
    p = cli("junit", log, "-o", tmp_path / "j.xml", "--policy", bad_policy)
    assert p.returncode == 2
    assert f"bad policy: {bad_policy}:4: regressions[0].cap: unknown key" in p.stderr

    not_json = tmp_path / "x.json"
    not_json.write_text("{not json", encoding="utf-8")
    p = cli("compare", not_json, not_json)
    assert p.returncode == 2 and "x.json: not JSON" in p.stderr

    doc = results_json(tmp_path, "doc.json", "noasm", "noise/noasm_r01.txt")
    wrong = tmp_path / "wrong.json"
    wrong.write_text(doc.read_text(encoding="utf-8").replace('"cycles": 7.93', '"cycles": "7.93"', 1),
                     encoding="utf-8")
    p = cli("compare", doc, wrong)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "wrong.json: runs[0].logs[0].benchmarks[0].cycles has the wrong type: '7.93'" in p.stderr

    p = cli("junit", log, "-o", tmp_path / "j.xml", "--baseline", tmp_path / "none.json")
    assert p.returncode == 2 and "none.json: no such file" in p.stderr

    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    p = cli("junit", garbage, "-o", tmp_path / "j.xml")
    assert p.returncode == 2 and "garbage.bin" in p.stderr and "Traceback" not in p.stderr

    p = cli("junit", log, "-o", tmp_path / "no/such/dir/j.xml")
    assert p.returncode == 2 and "cannot write" in p.stderr

    p = cli("junit", log)
    assert p.returncode == 2 and "-o/--output" in p.stderr


def test_cut_off_log_is_an_error_case(tmp_path: Path) -> None:
    out = tmp_path / "j.xml"
    p = cli("junit", FIXTURES / "userspace/accel/bench_timeout3_TERM.txt", "-o", out, "--target", "userspace",
            "--variant", "aesni-avx")
    assert p.returncode == 1
    suites = {s.name: s for s in junitparser.JUnitXml.fromfile(str(out))}
    assert suites["bsdkm.userspace.aesni-avx.selftest"].errors == 1


def test_every_reader_of_a_results_document_refuses_a_value_of_the_wrong_type(tmp_path: Path) -> None:
    """The type check lives in the model, so a pipeline baseline is refused like a `compare` input."""
    from buildbot_bsdkm.contract import BaselineError
    from buildbot_bsdkm.pipeline.gating import load_baseline

    doc = results_json(tmp_path, "doc.json", "noasm", "noise/noasm_r01.txt")
    assert load_baseline(doc)  # the untouched document reads back
    wrong = tmp_path / "baseline.json"
    data = json.loads(doc.read_text(encoding="utf-8"))
    data["runs"][0]["logs"][0]["benchmarks"][0]["value"] = "fast"
    wrong.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BaselineError) as e:
        load_baseline(wrong)
    assert str(e.value) == f"{wrong}: runs[0].logs[0].benchmarks[0].value has the wrong type: 'fast'"
