"""``bsdkm-ci action outputs/gate/merge`` on results made from the real fixtures by the real CLI.

Every result directory is produced the way a run leaves it: ``bsdkm-ci parse --json`` writes
``summary.json``; ``bsdkm-ci junit`` writes ``junit.xml``/``report.md``. The action commands
run as processes with ``GITHUB_OUTPUT``/``GITHUB_STEP_SUMMARY`` pointed at temp files.

Numbers: ``noise/noasm_r01.txt`` (no AES-NI) labelled as the accelerated variant against
``noise/accel_r03.txt`` as baseline is the "acceleration got lost" regression: 28 of the
items drop more than the default policy's 15 % (AES-128-CBC-enc 312 vs 1328 MiB/s, -76.5 %);
``userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt`` fails PWDBASED with code -125.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import junitparser
import pytest
from conftest import FIXTURES

from buildbot_bsdkm.commands.action.workflow import read_outputs
from buildbot_bsdkm.model import from_json, to_json
from buildbot_bsdkm.policy import evaluate, load_policy

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
VARIANT, TARGET = "aesni-avx", "userspace"


def cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=env)


def parse_to(out: Path, *logs: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    proc = cli("parse", "--json", "--variant", VARIANT, "--target", TARGET, *(FIXTURES / log for log in logs))
    assert proc.returncode in (0, 1), proc.stderr
    (out / "summary.json").write_text(proc.stdout)
    return out / "summary.json"



# One run a side: judged by the fixed limits of the previous default (the default's learned
# limits call a single run inconclusive).
FIXED_POLICY = Path(__file__).resolve().parents[4] / "policies" / "fixed-limits.yml"

class Runner:
    """The runner's files for one step, as the Actions runner provides them."""

    def __init__(self, tmp: Path) -> None:
        self.output = tmp / "github_output"
        self.summary = tmp / "step_summary.md"
        self.output.touch()
        self.summary.touch()
        self.env = {**os.environ, "GITHUB_OUTPUT": str(self.output), "GITHUB_STEP_SUMMARY": str(self.summary),
                    "GITHUB_ACTIONS": "true"}

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return cli("action", *args, env=self.env)

    def outputs(self) -> dict[str, str]:
        return read_outputs(self.output.read_text())


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    base = parse_to(root / "base", "noise/accel_r03.txt")
    healthy = parse_to(root / "healthy", "noise/accel_r01.txt")
    broken = parse_to(root / "broken", "noise/noasm_r01.txt",
                      "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    for d in (healthy, broken):
        proc = cli("junit", d, "-o", d.parent / "junit.xml", "--markdown", d.parent / "report.md",
                   "--baseline", base)
        assert proc.returncode in (0, 1), proc.stderr
    return {"base": base, "healthy": healthy.parent, "broken": broken.parent}


def test_regressed_and_failing_run(dirs: dict[str, Path], tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    proc = gh.run("outputs", "--out", dirs["broken"], "--baseline", dirs["base"], "--policy", FIXED_POLICY)
    assert proc.returncode == 0, proc.stderr
    out = gh.outputs()
    counts = (out["verdict"], out["regressions"], out["failed-tests"], out["failed"])
    assert counts == ("fail", "28", "1", "29")
    assert out["summary"] == "FAIL: 29 of 104 checks failed (regression, selftest)"

    lines = proc.stdout.splitlines()
    # Each annotation points at the log line its check is about (file=, line=).
    assert re.fullmatch(r"::error title=Self-test failed%3A PWDBASED \(code -125\) \[userspace/aesni-avx\],"
                        r"file=\S+/testwolfcrypt_FAIL_ulimit_v8000\.txt,line=77::"
                        r"userspace/aesni-avx: PWDBASED self-test failed: error L=34448 code=-125 "
                        r"\(out of memory error\)", lines[0]), lines[0]
    assert re.fullmatch(r"::error title=Regression%3A AES-128-CBC-enc -76\.5%25%2C limit 15\.0%25 "
                        r"\(312 MiB/s vs baseline 1328 MiB/s\) \[userspace/aesni-avx\],file=\S+,line=\d+::"
                        r"userspace/aesni-avx: AES-128-CBC-enc 312 MiB/s is 76\.5%25 below baseline "
                        r"1328 MiB/s \(limit 15%25\)", lines[1]), lines[1]
    assert sum(line.startswith("::error ") for line in lines) == 10  # GitHub shows 10 per step
    assert lines[-1] == ("::notice title=bsdkm-ci%3A annotations truncated::"
                         "19 more error annotation(s) not shown; see the job summary")

    summary = gh.summary.read_text()
    assert "❌ FAIL: 29 of 104 checks failed (regression, selftest)" in summary
    assert "| userspace/aesni-avx | selftest | PWDBASED |" in summary
    report = Path(out["report-path"])
    assert report.read_text() == summary  # the comment and the job summary are the same report

    junit = junitparser.JUnitXml.fromfile(out["junit-path"])
    assert junit.failures + junit.errors == 29

    assert gh.run("gate", "--out", dirs["broken"], "--baseline", dirs["base"],
                  "--policy", FIXED_POLICY).returncode == 1


def test_healthy_run_against_its_noise_passes(dirs: dict[str, Path], tmp_path: Path) -> None:
    gh = Runner(tmp_path)
    proc = gh.run("outputs", "--out", dirs["healthy"], "--baseline", dirs["base"], "--policy", FIXED_POLICY)
    assert proc.returncode == 0, proc.stderr
    out = gh.outputs()
    assert (out["verdict"], out["regressions"], out["failed-tests"]) == ("pass", "0", "0")
    assert not [line for line in proc.stdout.splitlines() if line.startswith("::error")]
    assert proc.stdout.splitlines() == ["::warning title=bsdkm-ci note::userspace: no noasm run to compare "
                                        "aesni-avx with"]
    assert "✅" in gh.summary.read_text()
    assert gh.run("gate", "--out", dirs["healthy"], "--baseline", dirs["base"],
                  "--policy", FIXED_POLICY).returncode == 0


def test_stored_verdict_is_published_as_is(dirs: dict[str, Path], tmp_path: Path) -> None:
    """A run that judged itself (verdict in summary.json) is not re-judged without a new baseline."""
    runs = from_json((dirs["broken"] / "summary.json").read_text())
    verdict = evaluate(runs, load_policy(FIXED_POLICY), from_json(dirs["base"].read_text()))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "summary.json").write_text(to_json(runs, verdict=verdict.to_dict()))
    gh = Runner(tmp_path)
    assert gh.run("outputs", "--out", out_dir).returncode == 0
    assert (gh.outputs()["regressions"], gh.outputs()["failed"]) == ("28", "29")
    # An explicit policy re-judges: with regressions off only the self-test fails.
    policy = tmp_path / "policy.yml"
    policy.write_text("version: 1\nregressions: []\n")
    (tmp_path / "again").mkdir()
    gh2 = Runner(tmp_path / "again")
    assert gh2.run("outputs", "--out", out_dir, "--policy", policy, "--baseline", "").returncode == 0
    again = gh2.outputs()
    assert (again["verdict"], again["regressions"], again["failed-tests"]) == ("fail", "0", "1")


def test_run_that_died_early_is_an_error_not_a_crash(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "run.exit-code").write_text("2\n")
    gh = Runner(tmp_path)
    proc = gh.run("outputs", "--out", out_dir)
    assert proc.returncode == 0, proc.stderr
    assert gh.outputs()["verdict"] == "error"
    assert proc.stdout.startswith(
        "::error title=bsdkm-ci%3A no results::`bsdkm-ci run` exited 2 without writing")
    assert "nothing was measured" in gh.summary.read_text()
    assert gh.run("gate", "--out", out_dir).returncode == 1


def test_merge_joins_jobs_and_judges_them_together(dirs: dict[str, Path], tmp_path: Path) -> None:
    noasm = tmp_path / "job-noasm"
    noasm.mkdir()
    proc = cli("parse", "--json", "--variant", "noasm", "--target", TARGET, FIXTURES / "noise/noasm_r03.txt")
    (noasm / "summary.json").write_text(proc.stdout)
    gh = Runner(tmp_path)
    merged = tmp_path / "merged"
    proc = gh.run("merge", "--out", merged, dirs["healthy"], noasm)
    assert proc.returncode == 0, proc.stderr
    assert [(r.target, r.variant) for r in from_json((merged / "summary.json").read_text())] == [
        (TARGET, VARIANT), (TARGET, "noasm")]
    assert gh.run("outputs", "--out", merged).returncode == 0
    # The speedup gates can now compare the accelerated variant with noasm: AES-GCM ~31x.
    summary = gh.summary.read_text()
    assert "no noasm run to compare" not in summary
    assert gh.outputs()["verdict"] == "pass"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"schema": 1}', "no 'runs' key"),
        ('{"schema": 1, "runs": [], "verdict": {"checks": [{"bogus": 1}]}}', "verdict.checks is malformed"),
        ('{"schema": 1, "runs": [], "verdict": "passed"}', "'verdict' is not a verdict document"),
    ],
)
def test_bad_results_name_the_problem(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "summary.json").write_text(content)
    proc = Runner(tmp_path).run("outputs", "--out", tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_missing_inputs_name_the_file(tmp_path: Path, dirs: dict[str, Path]) -> None:
    gh = Runner(tmp_path)
    proc = gh.run("outputs", "--out", tmp_path / "nowhere")
    assert proc.returncode == 2 and f"{tmp_path / 'nowhere' / 'summary.json'} does not exist" in proc.stderr
    proc = gh.run("outputs", "--out", dirs["healthy"], "--baseline", tmp_path / "nope.json")
    assert proc.returncode == 2 and "nope.json" in proc.stderr
    (tmp_path / "exit").mkdir()
    (tmp_path / "exit" / "run.exit-code").write_text("segfault")
    proc = gh.run("outputs", "--out", tmp_path / "exit")
    assert proc.returncode == 2 and "expected an exit status" in proc.stderr
    proc = gh.run("merge", "--out", tmp_path / "m", tmp_path / "empty-dir")
    assert proc.returncode == 2 and "no summary.json under" in proc.stderr


def test_unwritable_github_output_is_reported(tmp_path: Path, dirs: dict[str, Path]) -> None:
    gh = Runner(tmp_path)
    gh.env["GITHUB_OUTPUT"] = str(tmp_path / "missing-dir" / "out")
    proc = gh.run("outputs", "--out", dirs["healthy"])
    assert proc.returncode == 2
    assert "cannot write GITHUB_OUTPUT file" in proc.stderr


def test_outputs_by_hand_prints_them(dirs: dict[str, Path]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    proc = cli("action", "outputs", "--out", dirs["healthy"], env=env)
    assert proc.returncode == 0
    assert "verdict=pass" in proc.stdout.splitlines()
    assert json.loads((dirs["healthy"] / "summary.json").read_text())["schema"] == 1
