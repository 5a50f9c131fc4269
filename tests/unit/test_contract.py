"""contract.py: the names and shapes that cross a process or shell boundary, and that both ends use them.

The state.json cases are written by the real ``pipeline.stages.run_stage`` (its stage functions
replaced, so nothing is built), so the reader is checked against the writer, not a copy of it.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from conftest import ROOT

from buildbot_bsdkm import contract
from buildbot_bsdkm.buildbot import retrying_build, steps
from buildbot_bsdkm.config.bsdkm_yml import Config, load_config
from buildbot_bsdkm.github.aggregate import BuildFacts, PrReport, runs_of
from buildbot_bsdkm.github.controller import PrBuilder
from buildbot_bsdkm.github.services import pr_builders
from buildbot_bsdkm.github.triggers import Selector
from buildbot_bsdkm.model import FailureCategory, StageFailure
from buildbot_bsdkm.pipeline import stages
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.policy import Check, Verdict, load_policy

SELFTEST = StageFailure("selftest", "self-test failed: ECC (error -216)", FailureCategory.REAL, "selftest",
                        ["bsdkm-out/userspace/noasm/test.log"])
NETWORK = StageFailure("fetch", "fetch failed (network): curl: (6)", FailureCategory.INFRASTRUCTURE,
                       "network")


# --------------------------------------------------------------------------- records as properties


def test_failure_property_round_trip_keeps_every_field():
    for failure in (SELFTEST, NETWORK):
        value = contract.failure_property(failure)
        assert json.loads(json.dumps(value)) == value  # a build property is JSON
        assert contract.failure_from_property(value) == failure


def test_failure_property_that_holds_no_record_is_none():
    for value in (None, "", {}, "text", {"stage": "x", "category": "bogus"}, {"stage": "x"}, [1]):
        assert contract.failure_from_property(value) is None


def test_github_reports_the_failure_with_its_evidence():
    # aggregate._failure used to rebuild the record by hand and dropped its evidence.
    props = {contract.FAILURE_PROPERTY: contract.failure_property(SELFTEST)}
    facts = BuildFacts("userspace", "noasm", 2, None, props)
    assert runs_of(facts)[0].failure == SELFTEST
    status = PrReport(load_policy()).report([facts]).status(facts.context)
    assert status is not None and status.state == "failure"
    # No base outcome here: the failure is not called new (as the comment's heading says).
    assert status.description.startswith("failed — 1 failure with no base to compare with: selftest"), status


def test_verdict_document_round_trip():
    check = Check(variant="noasm", target="userspace", name="AES-128-GCM-enc", kind="regression",
                  passed=False, message="31 % below", value=3127.0, unit="MiB/s", baseline=4545.0,
                  delta_pct=-31.2, threshold=10.0)
    verdict = Verdict(checks=[check], notes=["gated against history"], policy_source="p.yml",
                      perf=[{"name": "AES-128-GCM-enc", "verdict": "regression"}])
    back = Verdict.from_dict(json.loads(json.dumps(verdict.to_dict())))
    assert (back.checks, back.notes, back.policy_source, back.perf) == (
        verdict.checks, verdict.notes, verdict.policy_source, verdict.perf)
    assert back.to_dict() == verdict.to_dict()


# --------------------------------------------------------------------------- names


def test_status_context_is_bsdkm_slash_the_builder_name():
    assert contract.builder_name("userspace", "noasm") == "userspace/noasm"
    assert contract.status_context("userspace", "noasm") == "bsdkm/userspace/noasm"
    prefix = contract.STATUS_CONTEXT_PREFIX
    assert contract.status_context("a", "b") == prefix + contract.builder_name("a", "b")


def test_every_shell_names_builders_and_contexts_the_contract_way():
    config = load_config(ROOT / "bsdkm.yml")
    for b in pr_builders(config):
        assert b.name == contract.builder_name(b.target, b.variant)
        assert b.context == contract.status_context(b.target, b.variant)
    assert PrBuilder("freebsd-kmod", "intelasm", "x").context == "bsdkm/freebsd-kmod/intelasm"
    assert BuildFacts("freebsd-kmod", "intelasm", None).context == "bsdkm/freebsd-kmod/intelasm"
    # A retest selector names the status context it rebuilds.
    assert str(Selector("intelasm", "freebsd-kmod")) == "bsdkm/freebsd-kmod/intelasm"
    assert str(Selector("intelasm")) == "bsdkm/intelasm"


def test_steps_and_the_retrying_build_use_the_contracts_property_names():
    assert steps.FAILURE_PROPERTY is contract.FAILURE_PROPERTY == "bsdkm_failure"
    assert retrying_build.FAILURE_PROPERTY is contract.FAILURE_PROPERTY  # the record the steps set is read
    assert steps.PR_NUMBER_PROPERTY == contract.PR_NUMBER_PROPERTY == "github_pr"
    assert steps.PR_BASE_SHA_PROPERTY == contract.PR_BASE_SHA_PROPERTY == "github_base_sha"
    assert steps.RESULTS_PATH_PROPERTY == contract.RESULTS_PATH_PROPERTY


PROPERTY_LIKE = re.compile(r"(bsdkm|github)_[a-z_]+")
NOT_PROPERTIES = {"bsdkm_ci"}  # the worker's command, a setting and a step argument


def test_no_shell_spells_a_property_name_itself():
    """Every ``bsdkm_*``/``github_*`` name in the Buildbot and GitHub shells comes from contract.py."""
    spelled = []
    for folder in ("buildbot", "github"):
        for path in sorted((ROOT / "buildbot_bsdkm" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and PROPERTY_LIKE.fullmatch(node.value) and node.value not in NOT_PROPERTIES):
                    spelled.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert spelled == []


# --------------------------------------------------------------------------- state.json


def job(tmp_path: Path) -> stages.Job:
    return stages.Job(Config(), "userspace", "noasm", tmp_path, progress=lambda _m: None)


def outcome(j: stages.Job, stage: str) -> contract.StageOutcome:
    path = contract.state_path(str(j.out_root), j.target, j.variant)
    assert Path(path) == j.state_path  # the steps read the file the stage writes
    return contract.stage_outcome(contract.read_state(Path(path).read_text(), path), stage, path)


def failing(failure: StageFailure):
    def run(_job: stages.Job) -> None:
        raise StageError(failure)
    return run


def passing(_job: stages.Job) -> None:
    return None


def test_a_failed_stage_reports_its_own_failure_even_under_another_stage_name(tmp_path, monkeypatch):
    # The userspace load stage names the program that failed: stage "selftest" inside stage "load".
    monkeypatch.setitem(stages.STAGE_FUNCS, "load", failing(SELFTEST))
    j = job(tmp_path)
    assert stages.run_stage(j, "load") == SELFTEST
    assert outcome(j, "load") == contract.StageOutcome(failure=SELFTEST)


def test_later_stages_are_skipped_or_run_as_the_contract_says(tmp_path, monkeypatch):
    for name in stages.STAGE_FUNCS:
        monkeypatch.setitem(stages.STAGE_FUNCS, name, passing)
    monkeypatch.setitem(stages.STAGE_FUNCS, "load", failing(SELFTEST))
    j = job(tmp_path)
    stages.run_stage(j, "load")
    for stage in ("unload", "configure", "build"):
        with pytest.raises(stages.StageSkipped, match=f"stage '{SELFTEST.stage}' failed"):
            stages.run_stage(j, stage)
        assert outcome(j, stage) == contract.StageOutcome(skipped_after=SELFTEST.stage)
    ran = {s for s in stages.STAGE_FUNCS if s != "fetch" and _runs_after_failure(j, s)}
    assert ran == contract.RUNS_AFTER_FAILURE
    for stage in contract.RUNS_AFTER_FAILURE:
        assert outcome(j, stage) == contract.StageOutcome()  # load's failure is not theirs


def _runs_after_failure(j: stages.Job, stage: str) -> bool:
    try:
        stages.run_stage(j, stage)
    except stages.StageSkipped:
        return False
    return True


def test_a_stage_that_runs_after_a_failure_reports_its_own(tmp_path, monkeypatch):
    own = StageFailure("gate", "gate: internal error KeyError: 'x'", FailureCategory.INFRASTRUCTURE,
                       "ci-exception")
    monkeypatch.setitem(stages.STAGE_FUNCS, "load", failing(SELFTEST))
    monkeypatch.setitem(stages.STAGE_FUNCS, "gate", failing(own))
    j = job(tmp_path)
    stages.run_stage(j, "load")
    stages.run_stage(j, "gate")
    assert outcome(j, "gate") == contract.StageOutcome(failure=own)


def test_a_stage_with_no_record_leaves_the_classification_to_the_caller(tmp_path):
    j = job(tmp_path)
    j.save()
    assert outcome(j, "load") == contract.StageOutcome()


@pytest.mark.parametrize(("text", "problem"), [
    ("{truncated", "not JSON"),
    ("[1, 2]", "not a state document"),
])
def test_unreadable_state_is_named(text, problem):
    with pytest.raises(contract.StateError, match=f"run/state.json: {problem}"):
        contract.read_state(text, "run/state.json")


@pytest.mark.parametrize(("doc", "problem"), [
    ({"stages": [], "failure": None}, "'stages' is not a mapping"),
    ({"stages": {"load": 1}, "failure": {"stage": "load"}}, "needs 'stage' and 'message'"),
    ({"stages": {"load": 1}, "failure": {"stage": "load", "message": "m", "category": "odd"}},
     "unknown category"),
])
def test_malformed_records_are_named(doc, problem):
    with pytest.raises(contract.StateError, match=problem):
        contract.stage_outcome(doc, "load", "run/state.json")


# --------------------------------------------------------------------------- live progress


@pytest.mark.parametrize("milestone", list(contract.Milestone))
def test_every_milestone_a_job_announces_is_read_back(milestone, tmp_path):
    from buildbot_bsdkm.pipeline.job import Job

    lines: list[str] = []
    job = Job(load_config(ROOT / "bsdkm.yml"), "userspace", "noasm", tmp_path, progress=lines.append,
              side=contract.BASE_SIDE)
    job.reached(milestone, (2, 5))
    job.side = ""
    job.reached(milestone)
    got = [contract.read_progress(line) for line in lines]
    assert got == [contract.StageProgress(milestone, 2, 5, "base", "userspace/noasm"),
                   contract.StageProgress(milestone, label="userspace/noasm")]
    assert [p.words for p in got if p] == [f"{milestone.value} round 2 of 5 (base)", milestone.value]


def test_only_the_stages_own_progress_lines_are_progress():
    stage = "[   3.2s] userspace/noasm: >> benchmark round 1 of 3"
    assert contract.read_progress(stage) == contract.StageProgress(contract.Milestone.BENCHMARK, 1, 3,
                                                                    label="userspace/noasm")
    fetching = contract.StageProgress(contract.Milestone.FETCHING)
    assert contract.read_progress("[   0.0s] >> fetching") == fetching
    for other in ("[   3.2s] userspace/noasm: load ok (2.0 s)",
                  "[   3.2s] userspace/noasm: round 2 of 3 (base, head)",
                  ">> benchmark",  # not timed: not the stage's
                  "[   3.2s] userspace/noasm: >> benchmark; rm -rf /",
                  "[   3.2s] userspace/noasm: >> benchmarking round 1 of 3",
                  "[   3.2s] userspace/noasm: >> self-test (someone)"):
        assert contract.read_progress(other) is None, other


def test_each_stage_starts_with_its_own_milestone_and_the_ui_says_it():
    assert list(contract.STAGE_MILESTONES) == list(stages.STAGES)
    assert {m.stage for m in contract.Milestone} == set(stages.STAGES)
    assert {s: m.value for s, m in contract.STAGE_MILESTONES.items()} == steps.STAGE_DOING
    for m in (contract.Milestone.BOOTING, contract.Milestone.SELF_TEST, contract.Milestone.BENCHMARK,
              contract.Milestone.COUNTING):
        assert m.stage == "load"
