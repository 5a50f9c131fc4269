"""The command-line contract of triage: junit/compare --config/--base-results, signature, JSON fields."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import SHARED

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.gating import GateInputs
from buildbot_bsdkm.support.resources import default_config_path

LOGS = SHARED / "freebsd" / "logs"
AESNI_LOG = LOGS / "debug-kernel_aesni-nobench_aesni-panic.log"
FPECC_LOG = LOGS / "debug-kernel_plain_fpecc-panic.log"
AESNI_SIG = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
FPECC_SIG = "panic: malloc: called with spinlock or critical section held | add_entry"
CONFIG = str(default_config_path())
QEMU = ["--target", "freebsd-kmod-qemu", "--variant", "intelasm"]


def results_doc(tmp: Path, name: str, log: Path, *, version: str = "5.9.2", fp: str = "fp1") -> Path:
    parsed = parse_file(log)
    parsed.source = "console-debug.log"
    run = RunResult("intelasm", "freebsd-kmod-qemu", logs=[parsed],
                    metadata={"wolfssl_version": version, "source_commit": f"{name}0123456789abcdef",
                              "fingerprint": {"id": fp}})
    path = tmp / f"{name}.json"
    path.write_text(to_json([run]))
    return path


def test_junit_with_the_default_config_reports_the_panic_known(tmp_path: Path, capsys) -> None:
    out = tmp_path / "junit.xml"
    assert main(["junit", str(AESNI_LOG), *QEMU, "-o", str(out), "--config", CONFIG,
                 "--markdown", str(tmp_path / "r.md")]) == 0
    text = capsys.readouterr().out
    assert "known (does not block)" in text and AESNI_SIG in text
    skipped = [s.get("message", "") for s in ET.parse(out).iter("skipped")]
    assert skipped and "https://" in skipped[0] and skipped[0].startswith("known: ")
    assert not list(ET.parse(out).iter("failure"))
    report = (tmp_path / "r.md").read_text()
    assert "### Known issues" in report and "](https://github.com/wolfSSL/wolfssl/issues?q=" in report
    # the same run without the entry fails, and calls the panic new
    assert main(["junit", str(AESNI_LOG), *QEMU, "-o", str(out)]) == 1
    assert "    new [" in capsys.readouterr().out
    assert list(ET.parse(out).iter("failure"))


def test_junit_base_results_make_the_panic_pre_existing(tmp_path: Path, capsys) -> None:
    b1, b2 = results_doc(tmp_path, "b1", AESNI_LOG), results_doc(tmp_path, "b2", AESNI_LOG)
    head = results_doc(tmp_path, "head", AESNI_LOG)
    assert main(["junit", str(head), "-o", str(tmp_path / "j.xml"), "--base-results", str(b1), str(b2)]) == 0
    out = capsys.readouterr().out
    assert "pre-existing (does not block): since b10123456789, first seen" in out
    assert "in 2 of the last 2 base builds" in out
    other = results_doc(tmp_path, "other", AESNI_LOG, fp="fp-other")
    assert main(["junit", str(head), "-o", str(tmp_path / "j.xml"), "--base-results", str(other)]) == 1
    assert "from another machine fingerprint are not used" in capsys.readouterr().out


def test_compare_json_carries_signature_and_triage(tmp_path: Path) -> None:
    base = results_doc(tmp_path, "base", AESNI_LOG)
    head = results_doc(tmp_path, "head", FPECC_LOG)
    out = tmp_path / "c.json"
    rc = main(["compare", str(base), str(head), "--json", str(out), "--base-results", str(base),
               "--config", CONFIG])
    doc = json.loads(out.read_text())
    assert rc == 1  # the FP-ECC panic is new: the AES-NI entry does not match it
    assert doc["failures"] and all(f["signature"] and f["triage"] for f in doc["failures"])
    assert {(f["signature"], f["triage"]) for f in doc["failures"]} == {(FPECC_SIG, "new")}
    assert [(f["signature"], f["triage"]) for f in doc["triage"]["fixed"]] == [(AESNI_SIG, "fixed")]


def test_signature_command(tmp_path: Path, capsys) -> None:
    # Exit 1: failures were found, as every subcommand says a failure.
    assert main(["signature", str(AESNI_LOG), str(FPECC_LOG)]) == 1
    assert capsys.readouterr().out.splitlines() == [AESNI_SIG, FPECC_SIG]
    # another boot of the same bug: other addresses, CPU, uptime
    text = AESNI_LOG.read_text(errors="replace")
    again = re.sub(r"0xffffffff8175", "0xffffffff8199", text).replace("cpuid = 0", "cpuid = 3")
    again = again.replace("+0x47/", "+0x4b/").replace("time = 1", "time = 9")
    (tmp_path / "again.log").write_text(again)
    doc = results_doc(tmp_path, "r", AESNI_LOG)
    assert main(["signature", str(tmp_path / "again.log"), str(doc)]) == 1
    assert capsys.readouterr().out.splitlines() == [AESNI_SIG]


def test_summary_json_read_as_judged(tmp_path: Path, capsys) -> None:
    assert main(["junit", str(AESNI_LOG), *QEMU, "-o", str(tmp_path / "j.xml")]) == 1
    capsys.readouterr()
    from buildbot_bsdkm.policy import evaluate, load_policy
    run = RunResult("intelasm", "freebsd-kmod-qemu", logs=[parse_file(AESNI_LOG)])
    verdict = evaluate([run], load_policy())
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({**json.loads(to_json([run])), "verdict": verdict.to_dict()}))
    assert all(c["signature"] and c["triage"] for c in verdict.to_dict()["checks"] if not c["passed"])
    assert main(["signature", str(summary)]) == 1
    assert capsys.readouterr().out.splitlines() == [AESNI_SIG]


@pytest.mark.parametrize("bad", ["config", "base", "expired"])
def test_bad_triage_input_exits_2(tmp_path: Path, capsys, bad: str) -> None:
    args = ["junit", str(AESNI_LOG), *QEMU, "-o", str(tmp_path / "j.xml")]
    if bad == "config":
        cfg = tmp_path / "bsdkm.yml"
        cfg.write_text(Path(CONFIG).read_text().replace('until: "5.9.3"', "until: whenever"))
        args += ["--config", str(cfg)]
        want = f"{cfg}:"
    elif bad == "base":
        (tmp_path / "b.json").write_text("[1, 2]")
        args += ["--base-results", str(tmp_path / "b.json")]
        want = "b.json: not a results document"
    else:
        args = ["junit", str(results_doc(tmp_path, "h", AESNI_LOG, version="5.9.3")), "-o",
                str(tmp_path / "j.xml"), "--config", CONFIG]
        want = "expired: wolfSSL 5.9.3 is tested"
    assert main(args) == 2
    assert want in capsys.readouterr().err


def test_the_pipeline_gate_reads_the_config_known_issues() -> None:
    gate = GateInputs.load(load_config(default_config_path()), read_baseline=False)
    assert [e.id for e in gate.known.entries] == ["aesni-key-setup-malloc-in-critical-section"]
