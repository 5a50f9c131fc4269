"""The Action builds the PR's base next to the head: the ``base-ref`` input (default:
the PR's base commit), the run script's ``--base-git/--base-ref``/``--base-dir`` flags, and the
report job, whose merge keeps every job's base runs and judges the merged heads against them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from conftest import FIXTURES
from test_action_local import ACTION_DIR, LocalRunner

from buildbot_bsdkm.commands.action import merge as merge_cmd
from buildbot_bsdkm.commands.action import results as action_cmd
from buildbot_bsdkm.contract import BASE_RUNS_JSON
from buildbot_bsdkm.model import RunResult, from_json, to_json
from buildbot_bsdkm.parsers import parse_file

BASE = "e" * 40


def run_script(tmp_path: Path, **env: str) -> tuple[list[str], str]:
    """run-bsdkm-ci.sh with a stand-in bsdkm-ci that records its arguments; (argv, recorded exit code)."""
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "bsdkm-ci"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path}/argv\n')
    fake.chmod(0o755)
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("BSDKM_")},
            "PATH": f"{bin_dir}:{os.environ['PATH']}", "BSDKM_OUT": str(out),
            "BSDKM_RUN_TARGETS": "userspace",
            "BSDKM_VARIANTS": "", **env}
    subprocess.run(["bash", str(ACTION_DIR / "run-bsdkm-ci.sh")], env=full, check=True, timeout=60,
                   capture_output=True)
    argv = (tmp_path / "argv").read_text().split("\n")[:-1] if (tmp_path / "argv").exists() else []
    return argv, (out / "run.exit-code").read_text().strip()


def test_base_ref_is_fetched_from_base_git(tmp_path: Path) -> None:
    argv, rc = run_script(tmp_path, BSDKM_BASE_REF=BASE, BSDKM_BASE_GIT="https://github.com/o/r.git",
                          BSDKM_REPEATS="7")
    assert argv[0] == "run" and rc == "0"
    assert argv[-6:] == ["--base-git", "https://github.com/o/r.git", "--base-ref", BASE, "--repeats", "7"]


def test_base_dir_wins_over_base_ref_and_no_base_builds_none(tmp_path: Path) -> None:
    argv, _ = run_script(tmp_path / "a", BSDKM_BASE_REF=BASE, BSDKM_BASE_GIT="u", BSDKM_BASE_DIR="base")
    assert argv[-2:] == ["--base-dir", "base"] and "--base-ref" not in argv
    argv, _ = run_script(tmp_path / "b")
    assert not any(a.startswith("--base") or a == "--repeats" for a in argv)


def test_base_ref_without_a_repository_is_an_unusable_run(tmp_path: Path) -> None:
    argv, rc = run_script(tmp_path, BSDKM_BASE_REF=BASE, BSDKM_BASE_GIT="")
    assert argv == [] and rc == "2"


def test_base_ref_defaults_to_the_prs_base_commit(tmp_path: Path) -> None:
    runner = LocalRunner(ACTION_DIR, {}, tmp_path, tmp_path)
    assert runner.inputs["base-ref"] == ""  # not a pull_request event here: no base
    runner.github["event"]["pull_request"] = {"base": {"sha": BASE}}
    runner.github["server_url"] = "https://github.com"
    for name in ("base-ref", "base-git"):
        runner.inputs[name] = runner._default(runner.meta["inputs"][name])
    (step,) = [s for s in runner.meta["runs"]["steps"] if s.get("id") == "run"]
    env = {k: runner.substitute(str(v)) for k, v in step["env"].items()}
    assert env["BSDKM_BASE_REF"] == BASE
    assert env["BSDKM_BASE_GIT"] == "https://github.com/wolfSSL/wolfssl.git"
    vm_steps = [s for s in runner.meta["runs"]["steps"] if s.get("id") in ("vm", "vm-retry")]
    assert len(vm_steps) == 2
    assert all("BSDKM_BASE_REF" in s["with"]["envs"].split() and "BSDKM_BASE_REF" in s["env"]
               for s in vm_steps)


def bench_run(variant: str, *fixtures: str) -> RunResult:
    return RunResult(variant=variant, target="userspace", logs=[parse_file(FIXTURES / f) for f in fixtures])


def test_report_job_judges_the_merged_heads_against_the_bases_measured_next_to_them(tmp_path: Path) -> None:
    jobs = tmp_path / "bsdkm-results"
    noise = sorted(p.relative_to(FIXTURES).as_posix() for p in (FIXTURES / "noise").glob("accel_r*.txt"))[:6]
    for variant in ("accel", "noasm"):
        job = jobs / f"bsdkm-pr-userspace-{variant}"
        job.mkdir(parents=True)
        (job / "summary.json").write_text(to_json([bench_run(variant, *noise[3:])]))
        (job / BASE_RUNS_JSON).write_text(to_json([bench_run(variant, *noise[:3])]))
    merged = tmp_path / "merged"
    args = argparse.Namespace(sources=[jobs], out=merged)
    assert merge_cmd.run_merge(args) == 0
    base = from_json((merged / BASE_RUNS_JSON).read_text())
    assert sorted(r.variant for r in base) == ["accel", "noasm"] and all(len(r.logs) == 3 for r in base)
    # The nightly artifact's run counts only for a pair that had no base measured next to it.
    artifact = tmp_path / "nightly.json"
    artifact.write_text(to_json([bench_run("accel", noise[5]), bench_run("intelasm", noise[5])]))
    config = tmp_path / "bsdkm.yml"  # results are read only for the pairs the config declares
    config.write_text("targets: {userspace: null}\nvariants:\n" + "".join(f"  {v}: {{targets: [userspace]}}\n"
                                               for v in ("accel", "noasm", "intelasm")))
    req = action_cmd.ResultsRequest(out=merged, baseline=artifact, config=config)
    got = action_cmd._baseline_for(req)
    assert [(r.variant, len(r.logs)) for r in got] == [("accel", 3), ("noasm", 3), ("intelasm", 1)]
    verdict = action_cmd.load_outcome(action_cmd.ResultsRequest(out=merged, config=config)).verdict
    assert {p["base_from"] for p in verdict.perf} == {"baseline"}
    assert {(i["n_base"], i["n_head"]) for p in verdict.perf for i in p["items"]} == {(3, 3)}
