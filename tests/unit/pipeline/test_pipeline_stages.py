"""Stage bookkeeping without builds: order, skipping after a failure, unavailable targets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from buildbot_bsdkm.cli import main as cli_main
from buildbot_bsdkm.config.bsdkm_yml import parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.job import Job, StageSkipped
from buildbot_bsdkm.pipeline.stages import run_stage

CONFIG = """\
source: {local: /nonexistent/wolfssl}
targets:
  userspace: {flags: [--enable-cryptonly]}
  freebsd-kmod: {flags: [--enable-cryptonly]}
variants:
  noasm: {flags: [--disable-asm], targets: [userspace]}
  crypto-register: {flags: [--enable-freebsdkm-crypto-register], targets: [freebsd-kmod]}
"""


def job(tmp_path: Path, target: str = "userspace", variant: str = "noasm") -> Job:
    cfg = parse_config(CONFIG, "test.yml")
    return Job(cfg, target, variant, tmp_path, progress=lambda m: None)


def test_a_stage_before_its_input_exists_says_which_stage_to_run(tmp_path: Path) -> None:
    with pytest.raises(StageSkipped, match="run stage 'build' first"):
        run_stage(job(tmp_path), "load")
    with pytest.raises(StageSkipped, match="run stage 'fetch' first"):
        run_stage(job(tmp_path), "configure")


def test_a_failed_fetch_is_kept_and_blocks_later_stages(tmp_path: Path) -> None:
    j = job(tmp_path)
    f = run_stage(j, "fetch")
    assert f is not None and f.reason == "fetch" and "/nonexistent/wolfssl does not exist" in f.message
    state = json.loads((tmp_path / "userspace" / "noasm" / "state.json").read_text())
    assert state["failure"]["message"] == f.message and "fetch" in state["stages"]
    again = job(tmp_path)  # a new process reads the state back
    with pytest.raises(StageSkipped, match="skipped, stage 'fetch' failed"):
        run_stage(again, "build")
    run_stage(again, "collect")  # collect and gate still run, to report the failure
    results = json.loads((tmp_path / "userspace" / "noasm" / "results.json").read_text())
    assert results["runs"][0]["failure"]["reason"] == "fetch"


def test_freebsd_target_on_linux_is_unavailable_not_a_code_failure(tmp_path: Path) -> None:
    if os.uname().sysname == "FreeBSD":
        pytest.skip("this worker is FreeBSD")
    j = job(tmp_path, "freebsd-kmod", "crypto-register")
    j.state["source"] = {"path": str(tmp_path), "origin": "local"}
    f = run_stage(j, "build")
    assert f is not None
    assert (f.category, f.reason) == (FailureCategory.INFRASTRUCTURE, "target-unavailable")
    assert f.message.startswith("target not available: freebsd-kmod needs a FreeBSD worker")


def test_stage_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yml"
    cfg.write_text(CONFIG)
    out = str(tmp_path / "o")
    common = ["--variant", "noasm", "--target", "userspace", "--out", out, "--config", str(cfg)]
    assert cli_main(["stage", "fetch", *common]) == 1
    assert "FAILED fetch category=real reason=fetch" in capsys.readouterr().out
    assert cli_main(["stage", "build", *common]) == 1
    assert "skipped, stage 'fetch' failed" in capsys.readouterr().err
    assert cli_main(["stage", "load", "--variant", "noasm", "--target", "freebsd-kmod", "--out",
                     str(tmp_path / "o"), "--config", str(cfg)]) == 2
    assert "does not run on 'freebsd-kmod'" in capsys.readouterr().err


def test_fetch_again_starts_a_new_attempt_and_keeps_the_old_one(tmp_path: Path) -> None:
    j = job(tmp_path)
    first = run_stage(j, "fetch")
    assert first is not None
    second = run_stage(job(tmp_path), "fetch")  # a retry, in a new process
    assert second is not None and second.message == first.message
    state = json.loads((tmp_path / "userspace" / "noasm" / "state.json").read_text())
    assert len(state["attempts"]) == 1
    assert state["attempts"][0]["failure"]["message"] == first.message
