"""``bsdkm-ci action outputs`` writes exactly the outputs action.yml declares: a key a workflow cannot
read through the Action is noise in its log, and a declared one it never writes reads as empty."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT

from buildbot_bsdkm.commands.action.results import RunOutcome
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult
from buildbot_bsdkm.policy import evaluate, load_policy

ACTION = ROOT / "action" / "action.yml"


def declared() -> dict[str, dict[str, str]]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))["outputs"]


def test_each_declared_output_is_the_result_steps_own() -> None:
    for name, spec in declared().items():
        assert spec["value"] == f"${{{{ steps.result.outputs.{name} }}}}", name


def test_a_judged_run_writes_the_declared_outputs_and_no_others() -> None:
    bench = Benchmark("AES-128-CBC-enc", 300.0, "MiB/s")
    run = RunResult("noasm", "userspace", logs=[LogResult("bench.log", complete=True, benchmarks=[bench])])
    verdict = evaluate([run], load_policy())
    outputs = RunOutcome([run], verdict, "", None, []).outputs()
    assert set(outputs) == set(declared())


def test_a_run_without_results_writes_the_declared_outputs_and_no_others(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}  # no GITHUB_OUTPUT: the outputs are printed
    done = subprocess.run([sys.executable, "-m", "buildbot_bsdkm.cli", "action", "outputs", "--out", str(out),
                           "--run-exit-code", "3"], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    printed = {line.split("=", 1)[0] for line in done.stdout.splitlines()
               if "=" in line and not line.startswith("::")}
    # The json output is one line; every other line of the printout is NAME=VALUE.
    assert printed == set(declared()), done.stdout
