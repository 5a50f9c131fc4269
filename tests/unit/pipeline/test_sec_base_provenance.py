"""Base measurements made where the PR's code runs are not taken as the base's.

Buildbot: the base outcomes the PR comment and commit status are judged by are the ones the master
read from its database, never the list the worker writes back (it also holds the base built next
to the PR's head, beside the PR's code); instruction counts of a base counted next to the head are
said to be so. The Action: the report job takes the base's outcomes and counts only from the base
branch's artifacts, not from the ``base-runs.json`` the test jobs (which run the PR's code) wrote.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from buildbot_bsdkm.buildbot.steps import Gate
from buildbot_bsdkm.contract import BASE_OUTCOMES_PROPERTY, TRIAGE_PROPERTY
from buildbot_bsdkm.github.aggregate import WARNINGS, BuildFacts, PrReport
from buildbot_bsdkm.model import LogResult, RunResult, SelfTest, to_json
from buildbot_bsdkm.policy import load_policy

SIG = "selftest: AES-GCM (-216)"
RECORDED = {"target": "userspace", "variant": "intelasm", "verdict": "pass", "signatures": [],
            "commit": "b" * 40, "date": "2026-11-30T02:00:00Z", "fingerprint": "fp"}
# What a PR's code on the worker can make the base built next to it show: the PR's own failure.
BESIDE = {"target": "userspace", "variant": "intelasm", "verdict": "fail", "signatures": [SIG],
          "commit": "b" * 40, "date": "2026-12-01T02:00:00Z"}


class FakeGate:
    """The parts of the Gate step ``keep_base_outcomes`` touches."""

    def __init__(self, provided: list[dict[str, Any]]) -> None:
        self.provided_outcomes = provided
        self.properties: dict[str, Any] = {}

    def run_dir(self) -> str:
        return "bsdkm-out/userspace/intelasm"

    async def read_worker_text(self, path: str) -> str | None:
        return json.dumps({"base_outcomes": [RECORDED, BESIDE]})

    def setProperty(self, name: str, value: Any, source: str) -> None:  # noqa: N802 - Buildbot's name
        self.properties[name] = value


def test_the_gate_keeps_the_outcomes_the_master_read_not_the_workers_list() -> None:
    """Fails on the old code: the property was the worker's base-outcomes.used.json, BESIDE included."""
    step = FakeGate([RECORDED])
    verdict = {"triage": {"base_outcomes": 2}}
    asyncio.run(Gate.keep_base_outcomes(step, verdict))  # type: ignore[arg-type]
    assert step.properties[BASE_OUTCOMES_PROPERTY] == [RECORDED]


def _pr_build(triage: dict[str, Any], outcomes: list[dict[str, Any]]) -> BuildFacts:
    run = RunResult("intelasm", "userspace", logs=[LogResult(
        "test.log", tests=[SelfTest("AES-GCM", False, code=-216)], complete=True)])
    return BuildFacts("userspace", "intelasm", WARNINGS, properties={
        "bsdkm_results": to_json([run]), TRIAGE_PROPERTY: triage, BASE_OUTCOMES_PROPERTY: outcomes})


def commit_status(build: BuildFacts) -> tuple[str, str]:
    """The status the reporter posts: the build's part of the PR's one report, judged on the master."""
    status = PrReport(load_policy(None)).report([build]).status(build.context)
    assert status is not None
    return status.state, status.description


def test_a_failure_only_a_base_built_beside_the_pr_had_is_red_in_the_status() -> None:
    """Fails on the old code: the status took the worker's word, green and 'pre-existing'."""
    worker_said = {"counts": {"pre-existing": 1}, "blocking": 0, "since": None, "new": []}
    build = _pr_build(worker_said, [RECORDED])  # the master's database: the base passed
    state, text = commit_status(build)
    assert state == "failure" and "1 new failure" in text, text
    assert len(text) <= 140


def test_a_failure_the_recorded_base_has_too_stays_pre_existing() -> None:
    worker_said = {"counts": {"pre-existing": 1}, "blocking": 0, "since": None, "new": []}
    recorded_fail = dict(BESIDE, fingerprint="fp")
    state, text = commit_status(_pr_build(worker_said, [recorded_fail]))
    assert state == "success" and "1 pre-existing failure" in text, text


def test_base_counts_carried_by_a_pr_head_are_marked_measured_beside_pr_code() -> None:
    """Fails on the old code: the note said only 'counted next to it'."""
    from buildbot_bsdkm.perf.instruction_counts import (
        BASE_METADATA_KEY,
        METADATA_KEY,
        InstructionCounts,
        ItemCount,
    )
    from buildbot_bsdkm.policy import evaluate, parse_policy

    def counts(n: int) -> dict[str, Any]:
        return InstructionCounts([ItemCount("SHA-256", amount=1000, instructions=n)]).to_dict()

    policy = parse_policy("complete: false\ninstructions:\n  items: {SHA-256: 1000}\nregressions:\n"
                          "  - {pattern: '*', max_pct: 0.5, metric: instructions}\n", "policy.yml")
    head = RunResult("noasm", "userspace", metadata={METADATA_KEY: counts(100),
                                                    BASE_METADATA_KEY: counts(100)})
    notes = evaluate([head], policy).notes
    assert any("counted next to it, measured beside PR code" in n for n in notes), notes


def _selftest_run(variant: str, ok: bool, counts: int | None = None,
                  carried: int | None = None) -> RunResult:
    from buildbot_bsdkm.perf.instruction_counts import (
        BASE_METADATA_KEY,
        METADATA_KEY,
        InstructionCounts,
        ItemCount,
    )

    def rec(n: int) -> dict[str, Any]:
        return InstructionCounts([ItemCount("SHA-256", amount=1000, instructions=n)]).to_dict()

    meta: dict[str, Any] = {}
    if counts is not None:
        meta[METADATA_KEY] = rec(counts)
    if carried is not None:
        meta[BASE_METADATA_KEY] = rec(carried)
    return RunResult(variant, "userspace", metadata=meta, logs=[LogResult(
        "test.log", tests=[SelfTest("AES-GCM", ok, code=None if ok else -216)], complete=True)])


def test_the_actions_report_takes_no_outcome_or_count_from_the_base_the_test_job_built(tmp_path: Any) -> None:
    """Fails on the old code: the base-runs.json of the test job (where the PR's code ran) made the
    PR's failure pre-existing, and its counts (and those the head carried) were the ones compared."""
    from buildbot_bsdkm.commands.action import results as action_cmd
    from buildbot_bsdkm.contract import BASE_RUNS_JSON
    from buildbot_bsdkm.report.pull_request import BASE_COUNTS_NOTE as NIGHTLY_COUNTS_NOTE

    merged = tmp_path / "merged"
    merged.mkdir()
    # The head regressed SHA-256 by 20 %; beside it, its base "has" the failure and "the same" count.
    (merged / "summary.json").write_text(to_json([_selftest_run("noasm", False, 1200, carried=1200)]))
    (merged / BASE_RUNS_JSON).write_text(to_json([_selftest_run("noasm", False, 1200)]))
    nightly = tmp_path / "nightly.json"
    nightly.write_text(to_json([_selftest_run("noasm", True, 1000)]))
    policy = tmp_path / "policy.yml"
    policy.write_text("complete: false\ninstructions:\n  items: {SHA-256: 1000}\nregressions:\n"
                      "  - {pattern: '*', max_pct: 0.5, metric: instructions}\n")
    config = tmp_path / "bsdkm.yml"
    config.write_text(f"policy: {policy}\ntargets: {{userspace: null}}\n"
                      "variants:\n  noasm: {targets: [userspace]}\n")
    req = action_cmd.ResultsRequest(out=merged, baseline=nightly, config=config)
    verdict = action_cmd.load_outcome(req).verdict
    selftest = next(c for c in verdict.checks if c.name == "AES-GCM")
    assert selftest.triage == "new" and selftest.blocking, selftest
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    assert not sha.passed and "20" in sha.message, sha
    assert NIGHTLY_COUNTS_NOTE in verdict.notes
