"""Results naming a (target, variant) the config or the builder does not declare are refused where
uploaded results are read: the Action, ``bsdkm-ci stage gate`` and the Buildbot master."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from buildbot_bsdkm.commands.action.results import ResultsRequest, load_outcome
from buildbot_bsdkm.commands.exit_codes import UsageError
from buildbot_bsdkm.config.bsdkm_yml import parse_config
from buildbot_bsdkm.github.aggregate import BuildFacts, PrReport, runs_of
from buildbot_bsdkm.model import FailureCategory, RunResult, to_json
from buildbot_bsdkm.pipeline.job import Job
from buildbot_bsdkm.pipeline.stages import run_stage
from buildbot_bsdkm.policy import load_policy

EVIL = "[approve here](https://evil.example/) @wolfssl/security"

CONFIG = """\
source: {local: /nonexistent/wolfssl}
targets:
  userspace: {flags: [--enable-cryptonly]}
variants:
  noasm: {flags: [--disable-asm], targets: [userspace]}
"""


def results(tmp: Path, *pairs: tuple[str, str]) -> Path:
    path = tmp / "summary.json"
    path.write_text(to_json([RunResult(variant, target) for target, variant in pairs]))
    return path


def test_the_action_refuses_results_of_an_undeclared_variant(tmp_path: Path) -> None:
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG)
    path = results(tmp_path, ("userspace", "noasm"), ("userspace", EVIL))
    with pytest.raises(UsageError, match=r"does not declare .*refused") as err:
        load_outcome(ResultsRequest(tmp_path, results=path, config=cfg))
    assert repr(f"userspace/{EVIL}") in str(err.value) and "declared: userspace/noasm" in str(err.value)
    # Without --config the run used the default config, which declares no such variant either.
    with pytest.raises(UsageError, match="does not declare"):
        load_outcome(ResultsRequest(tmp_path, results=path))
    ok = results(tmp_path, ("userspace", "noasm"))
    assert load_outcome(ResultsRequest(tmp_path, results=ok, config=cfg)).runs


def test_the_stage_gate_refuses_a_results_file_of_another_pair(tmp_path: Path) -> None:
    job = Job(parse_config(CONFIG, "test.yml"), "userspace", "noasm", tmp_path, progress=lambda m: None)
    run_stage(job, "fetch")
    run_stage(job, "collect")
    path = tmp_path / "userspace" / "noasm" / "results.json"
    doc = json.loads(path.read_text())
    doc["runs"][0]["variant"] = EVIL
    path.write_text(json.dumps(doc))
    again = Job(parse_config(CONFIG, "test.yml"), "userspace", "noasm", tmp_path, progress=lambda m: None)
    failure = run_stage(again, "gate")
    assert failure is not None and failure.category is FailureCategory.REAL
    assert failure.reason == "integrity" and "does not declare" in failure.message


def test_the_pr_comment_shows_a_builders_results_only_under_its_own_pair() -> None:
    doc = to_json([RunResult(EVIL, "userspace")])
    build = BuildFacts("userspace", "noasm", 0, properties={"bsdkm_results": doc})
    (run,) = runs_of(build)
    assert (run.target, run.variant) == ("userspace", "noasm")
    assert run.failure is not None and run.failure.reason == "integrity"
    body = PrReport(load_policy(None)).body([build])
    assert "[approve here](" not in body and "approve here" in body  # named in the error, escaped
