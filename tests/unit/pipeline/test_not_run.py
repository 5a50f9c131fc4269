"""A run this machine cannot do (no FreeBSD set reachable, freebsd-kmod off FreeBSD) is reported not
run by ``bsdkm-ci run`` and ``main``: in the headline, the report, summary.json and JUnit, never as a
pass or a failure. Buildbot's stages and the Action treat it as the infrastructure failure it is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import junitparser
from conftest import FIXTURES, ROOT

from buildbot_bsdkm.contract import TARGET_UNAVAILABLE
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure, from_json, to_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.jobs.matrix import as_not_run
from buildbot_bsdkm.policy import Verdict, evaluate, load_policy
from buildbot_bsdkm.report.junit import junit_xml
from buildbot_bsdkm.report.markdown import markdown_report

REASON = "no FreeBSD release set reachable (freebsd.mirror)"
CONFIG = """\
source: {{local: {source}}}
targets:
  freebsd-kmod-qemu: {{flags: [--enable-cryptonly]}}
variants:
  noasm: {{flags: [--disable-asm], targets: [freebsd-kmod-qemu]}}
cache_dir: {cache}
freebsd: {{release: 15.0-RELEASE, snapshot: 16.0-CURRENT, mirror: {mirror}}}
"""


def _unavailable(target: str, variant: str) -> RunResult:
    failure = StageFailure("configure", REASON, FailureCategory.INFRASTRUCTURE, TARGET_UNAVAILABLE,
                           ["https://mirror: no route"])
    return RunResult(variant, target, failure=failure)


def _userspace_run() -> RunResult:
    logs = [parse_file(FIXTURES / "userspace" / "noasm" / f)
            for f in ("testwolfcrypt.txt", "bench_default.txt")]
    return RunResult("noasm", "userspace", logs=logs)


def test_only_an_unavailable_target_becomes_not_run() -> None:
    run = as_not_run(_unavailable("freebsd-kmod-qemu", "noasm"))
    assert run.not_run == REASON and run.failure is None
    real = RunResult("noasm", "linux-kmod-qemu", failure=StageFailure(
        "load", "module load failed", FailureCategory.REAL, "load-error"))
    assert as_not_run(real).failure is not None and as_not_run(real).not_run is None
    infra = RunResult("noasm", "linux-kmod-qemu", failure=StageFailure(
        "fetch", "cannot fetch", FailureCategory.INFRASTRUCTURE, "network"))
    assert as_not_run(infra).not_run is None
    # The old freebsd-kmod wording loses its prefix: the headline says what to do.
    worker = RunResult("noasm", "freebsd-kmod", failure=StageFailure(
        "build", "target not available: freebsd-kmod needs a FreeBSD worker (this is Linux)",
        FailureCategory.INFRASTRUCTURE, TARGET_UNAVAILABLE))
    assert as_not_run(worker).not_run == "freebsd-kmod needs a FreeBSD worker (this is Linux)"


def test_not_run_is_in_the_headline_report_summary_and_junit(tmp_path: Path) -> None:
    runs = [_userspace_run(), as_not_run(_unavailable("freebsd-kmod-qemu", "intelasm")),
            as_not_run(_unavailable("freebsd-kmod-qemu", "noasm"))]
    verdict = evaluate(runs, load_policy(ROOT / "policies" / "default.yml"))
    assert verdict.summary().endswith(f"; 2 runs not run: {REASON}")
    assert len(verdict.not_run) == 2 and not any(c.target == "freebsd-kmod-qemu" for c in verdict.checks)
    again = Verdict.from_dict(json.loads(json.dumps(verdict.to_dict())))
    assert again.not_run == verdict.not_run and again.summary() == verdict.summary()
    back = from_json(to_json(runs))
    assert [r.not_run for r in back][-2:] == [REASON, REASON]
    md = markdown_report(runs, verdict)
    assert "### Not run" in md and md.count("freebsd-kmod-qemu/noasm") == 1  # not in the self-test table
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(runs, verdict))
    skipped = [(suite.name, case.result[0].message) for suite in junitparser.JUnitXml.fromfile(str(path))
               for case in suite if case.result and isinstance(case.result[0], junitparser.Skipped)]
    assert ("bsdkm.freebsd-kmod-qemu.noasm.run", f"not run: {REASON}") in skipped


def _fake_tree(tmp_path: Path) -> Path:
    """Enough of a wolfSSL tree to fetch: the run stops at configure, before anything is built."""
    source = tmp_path / "wolfssl"
    (source / "bsdkm").mkdir(parents=True)
    for name in ("autogen.sh", "configure"):
        (source / name).write_text("#!/bin/sh\nexit 1\n")
    return source


def test_run_without_sets_reports_not_run_or_fails_as_infrastructure(tmp_path: Path) -> None:
    source = _fake_tree(tmp_path)
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache", mirror=tmp_path / "no-mirror"))
    cli = [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg)]
    proc = subprocess.run([*cli, "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    line = f"freebsd-kmod-qemu/noasm: 0 self-tests, 0 benchmarks; not run: {REASON}"
    assert line in proc.stdout, proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verdict"]["not_run"] == [{"target": "freebsd-kmod-qemu", "variant": "noasm",
                                              "reason": REASON}]
    # Nothing else ran: judging nothing is no pass, whatever was not run.
    assert proc.returncode == 1 and "the gate evaluated 0 checks" in proc.stdout
    # CI's way (the Action passes it): the infrastructure failure it is, retried by the shell.
    proc = subprocess.run([*cli, "--out", str(tmp_path / "ci"), "--unavailable", "fail"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1
    assert f"FAILED configure (infrastructure): {REASON}" in proc.stdout, proc.stdout
    state = json.loads((tmp_path / "ci" / "freebsd-kmod-qemu" / "noasm" / "state.json").read_text())
    assert state["failure"]["reason"] == TARGET_UNAVAILABLE
    assert state["failure"]["category"] == "infrastructure"


def test_the_buildbot_stage_reports_an_infrastructure_failure(tmp_path: Path) -> None:
    source = _fake_tree(tmp_path)
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache", mirror=tmp_path / "no-mirror"))
    common = ["--config", str(cfg), "--variant", "noasm", "--target", "freebsd-kmod-qemu",
              "--out", str(tmp_path / "out")]
    cli = [sys.executable, "-m", "buildbot_bsdkm.cli", "stage"]
    subprocess.run([*cli, "fetch", *common], capture_output=True, text=True, timeout=300, check=True)
    proc = subprocess.run([*cli, "configure", *common], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "infrastructure" in proc.stdout + proc.stderr and REASON in proc.stdout + proc.stderr


def test_the_action_runs_with_unavailable_inputs_failing() -> None:
    script = (ROOT / "action" / "run-bsdkm-ci.sh").read_text()
    assert "--unavailable fail" in script
