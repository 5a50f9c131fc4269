"""The triage in the shells: what a commit status, a step summary and an annotation say, and the
worker-side gate reading the base's outcomes the master recorded (``base-outcomes.json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SHARED
from freebsd_sets import make_kit
from test_pipeline_freebsd_base import _config, _tree, worker  # noqa: F401 - the FreeBSD double fixture

from buildbot_bsdkm.buildbot import summaries
from buildbot_bsdkm.commands.action.annotations import check_annotation
from buildbot_bsdkm.commands.action.workflow import Level
from buildbot_bsdkm.github.aggregate import WARNINGS, BuildFacts
from buildbot_bsdkm.model import LogResult, RunResult
from buildbot_bsdkm.policy import Check, Verdict
from buildbot_bsdkm.report.commit_status import pair_status
from buildbot_bsdkm.report.triage_summary import triage_property, triage_words

PANIC = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
SINCE = "since 5.9.2, first seen 2026-11-30T02:00:00Z, in 3 of the last 3 base builds"


def failed(name: str, kind: str, sig: str, word: str, note: str | None = None,
           blocking: bool = False) -> Check:
    return Check("intelasm", "freebsd-kmod-qemu", name, kind, False, f"{name} failed", signature=sig,
                 triage=word, triage_note=note, blocking=blocking)


def verdict_doc(*checks: Check) -> dict:
    return {"passed": all(c.passed or not c.blocking for c in checks), "summary": "x",
            "checks": [c.to_dict() for c in checks]}


PRE_EXISTING = verdict_doc(failed("stage:load", "complete", PANIC, "pre-existing", SINCE),
                           failed("kernel:panic@159", "kernel", PANIC, "pre-existing", SINCE))
NEW = verdict_doc(failed("AES-GCM", "selftest", "selftest: AES-GCM (-216)", "new", blocking=True))


def test_one_panic_two_checks_is_one_pre_existing_failure_since_the_version() -> None:
    prop = triage_property(PRE_EXISTING)
    assert prop == {"counts": {"pre-existing": 1}, "blocking": 0, "since": "5.9.2", "new": []}
    assert triage_words(prop) == "1 pre-existing failure since 5.9.2"
    assert summaries.verdict_summary(PRE_EXISTING).endswith("— 1 pre-existing failure since 5.9.2")
    assert triage_words(triage_property(NEW)) == "1 new failure"
    untriaged = {"passed": False, "checks": [{"name": "x", "kind": "selftest", "passed": False}]}
    assert triage_words(triage_property(untriaged)) == ""  # nothing triaged: nothing said


def test_commit_status_is_green_for_a_pre_existing_failure_and_red_for_a_new_one() -> None:
    run = [RunResult("intelasm", "freebsd-kmod-qemu", logs=[LogResult("console.log", complete=True)])]
    green = Verdict.from_dict(PRE_EXISTING)
    assert pair_status(green, run) == ("success", "passed — 1 pre-existing failure since 5.9.2")
    compared = {**NEW, "triage": {"base_outcomes": [{"target": "freebsd-kmod-qemu", "variant": "intelasm"}]}}
    state, text = pair_status(Verdict.from_dict(compared), run)
    assert state == "failure" and text == "failed — 1 new failure: selftest: AES-GCM (-216)"
    assert len(text) <= 140


def test_annotations_error_for_new_warning_otherwise() -> None:
    pre = check_annotation(failed("kernel:panic@159", "kernel", PANIC, "pre-existing", SINCE))
    assert pre.level == Level.WARNING and pre.title.startswith("[pre-existing since 5.9.2] ")
    known = check_annotation(failed("kernel:panic@159", "kernel", PANIC, "known", "known issue aesni"))
    assert known.level == Level.WARNING and known.title.startswith("[known] ")
    new = check_annotation(failed("AES-GCM", "selftest", "selftest: AES-GCM (-216)", "new", blocking=True))
    assert new.level == Level.ERROR and not new.title.startswith("[")
    blocked = check_annotation(failed("x", "kernel", PANIC, "pre-existing", SINCE, blocking=True))
    assert blocked.level == Level.ERROR  # the policy fails it (pre_existing: fail): an error


# -- the worker's gate, through the real ``bsdkm-ci stage`` with the boot replayed

BASE, HEAD = "b" * 40, "c" * 40
CONFIG = f"""\
source: {{debian: {{suite: sid, package: wolfssl, version: "5.9.2"}}}}
targets:
  freebsd-kmod-qemu:
    flags: [--enable-cryptonly, --enable-crypttests, --enable-kernel-benchmarks]
    kernels: [debug]
variants:
  intelasm:
    flags: [--enable-aesni, --enable-intelasm, --enable-sp-asm, --disable-ecc]
    targets: [freebsd-kmod-qemu]
policy: {ROOT / "policies" / "default.yml"}
freebsd: {{kit: KIT}}
"""


@pytest.fixture
def panicking_head(tmp_path: Path) -> tuple[Path, list[str]]:
    log = str(SHARED / "freebsd" / "logs" / "debug-kernel_aesni-nobench_aesni-panic.log")
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"base_commit": BASE,
                                    "consoles": {BASE: {"debug": log}, HEAD: {"debug": log}}}))
    (tmp_path / "bsdkm.yml").write_text(CONFIG.replace("KIT", str(make_kit(tmp_path / "kit"))))
    cmd = [sys.executable, str(ROOT / "tests" / "triage_double" / "replay.py"), str(scenario), "stage"]
    common = ["--variant", "intelasm", "--target", "freebsd-kmod-qemu", "--out", str(tmp_path / "out"),
              "--config", str(tmp_path / "bsdkm.yml")]
    env = {"PATH": "/usr/bin:/bin", "BSDKM_CACHE": str(tmp_path / "cache")}
    for stage in ("fetch", "configure", "build", "load", "collect"):
        extra = ["--source-git", "file:///nowhere.git", "--source-ref", HEAD, "--source-commit", HEAD] \
            if stage == "fetch" else []
        subprocess.run([*cmd, stage, *common, *extra], env=env, capture_output=True, text=True, timeout=120)
    return tmp_path, [*cmd, "gate", *common]


def _gate(tmp_path: Path, cmd: list[str]) -> tuple[int, dict]:
    env = {"PATH": "/usr/bin:/bin", "BSDKM_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    state = json.loads((tmp_path / "out" / "freebsd-kmod-qemu" / "intelasm" / "state.json").read_text())
    return proc.returncode, state["verdict"]


def test_the_gate_reads_the_base_outcomes_the_master_wrote_and_the_panic_is_pre_existing(
        panicking_head: tuple[Path, list[str]]) -> None:
    tmp_path, gate = panicking_head
    rc, verdict = _gate(tmp_path, gate)
    assert rc == 1 and {c["triage"] for c in verdict["checks"] if not c["passed"]} == {"new"}
    recorded = {"target": "freebsd-kmod-qemu", "variant": "intelasm", "kernel": "debug", "verdict": "fail",
                "signatures": [PANIC], "commit": BASE, "version": "5.9.2", "date": "2026-11-30T02:00:00Z"}
    run_dir = tmp_path / "out" / "freebsd-kmod-qemu" / "intelasm"
    (run_dir / "base-outcomes.json").write_text(json.dumps({"base_outcomes": [recorded]}))
    rc, verdict = _gate(tmp_path, gate)
    assert rc == 0, verdict["summary"]
    failures = [c for c in verdict["checks"] if not c["passed"]]
    assert failures and {c["triage"] for c in failures} == {"pre-existing"}
    assert {c["signature"] for c in failures} == {PANIC}
    assert all(c["triage_note"].startswith(f"since {BASE[:12]}") for c in failures)
    (run_dir / "base-outcomes.json").write_text("{not json")
    rc, verdict = _gate(tmp_path, gate)
    assert rc == 1 and any("base outcomes" in n and "unusable" in n for n in verdict["notes"])


def test_the_actions_outputs_triage_against_the_base_branchs_artifact(
        panicking_head: tuple[Path, list[str]]) -> None:
    """A PR job whose base artifact (the nightly's summary.json) has the panic: a warning, a pass."""
    tmp_path, _ = panicking_head
    results = tmp_path / "out" / "freebsd-kmod-qemu" / "intelasm" / "results.json"
    artifact = tmp_path / "baseline"
    artifact.mkdir()
    (artifact / "summary.json").write_text(results.read_text())  # the base's run: the same panic
    out, summary = tmp_path / "action", tmp_path / "summary.md"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "GITHUB_OUTPUT": str(tmp_path / "gh-output"),
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    cmd = [sys.executable, "-m", "buildbot_bsdkm.cli", "action", "outputs", "--out", str(out),
           "--results", str(results), "--config", str(tmp_path / "bsdkm.yml")]
    alone = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert "::error title=" in alone.stdout and _last_verdict(tmp_path / "gh-output") == "fail"
    proc = subprocess.run([*cmd, "--baseline-dir", str(artifact)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    annotations = [line for line in proc.stdout.splitlines() if line.startswith("::")]
    assert not any(a.startswith("::error") for a in annotations), annotations
    assert any(a.startswith("::warning title=[pre-existing since") for a in annotations), annotations
    assert _last_verdict(tmp_path / "gh-output") == "pass"
    assert "re-existing" in summary.read_text()  # the job summary's Pre-existing section
    # The base-outcomes artifact: the base's last run, failed (never a perf baseline), same effect.
    proc = subprocess.run([*cmd, "--base-outcomes-dir", str(artifact)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _last_verdict(tmp_path / "gh-output") == "pass"
    assert not any(line.startswith("::error") for line in proc.stdout.splitlines())


def _last_verdict(output: Path) -> str:
    lines = output.read_text().splitlines()
    return lines[max(i for i, line in enumerate(lines) if line.startswith("verdict<<")) + 1]


@pytest.mark.usefixtures("worker")  # test_pipeline_freebsd_base's FreeBSD double
def test_run_with_a_base_triages_the_heads_failure_against_the_base_built_next_to_it(tmp_path: Path) -> None:
    """``bsdkm-ci run --base-*`` (the Action's run): a build failure the base has too is pre-existing."""
    from buildbot_bsdkm.config.bsdkm_yml import LocalSource
    from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix

    config = _config(tmp_path, 2)
    (config.source.path / "BROKEN").write_text("")  # the head's build fails ...
    base = _tree(tmp_path / "base-src")
    (base / "BROKEN").write_text("")  # ... as the base's does
    result = run_matrix(config, None, None, tmp_path / "out", progress=lambda m: None,
                        base_source=LocalSource(base), repeats=2)
    failures = result.verdict.failures
    assert failures and {c.triage for c in failures} == {"pre-existing"}, [(c.name, c.triage)
                                                                          for c in failures]
    assert result.verdict.passed


def test_the_pr_comment_is_triaged_with_the_outcomes_each_build_was_gated_against() -> None:
    from buildbot_bsdkm.github.aggregate import PrReport, base_outcomes_of
    from buildbot_bsdkm.model import LogResult, RunResult, SelfTest
    from buildbot_bsdkm.policy import load_policy

    run = RunResult("intelasm", "userspace", logs=[LogResult(
        "test.log", tests=[SelfTest("AES-GCM", False, code=-216)], complete=True)])
    recorded = {"target": "userspace", "variant": "intelasm", "verdict": "fail",
                "signatures": ["selftest: AES-GCM (-216)"], "commit": BASE, "date": "2026-11-30T02:00:00Z"}
    build = BuildFacts("userspace", "intelasm", WARNINGS, properties={"bsdkm_base_outcomes": [recorded, 7]})
    base = base_outcomes_of([build])  # what is no outcome is left out
    report = PrReport(load_policy(None))
    assert {c.triage for c in report.verdict([run]).failures} == {"new"}
    assert {c.triage for c in report.verdict([run], base).failures} == {"pre-existing"}


def test_with_no_base_outcome_the_status_says_so_as_the_comment_does() -> None:
    """Nothing on the base to compare with: the failure is not called new in the one-line places either."""
    lone = {**NEW, "triage": {"base_outcomes": []}}
    assert triage_words(triage_property(lone)) == "1 failure with no base to compare with"
    compared = {**NEW, "triage": {"base_outcomes": [{"target": "freebsd-kmod-qemu"}]}}
    assert triage_words(triage_property(compared)) == "1 new failure"
