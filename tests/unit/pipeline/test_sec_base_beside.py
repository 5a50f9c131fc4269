"""The worker's gate of a Buildbot PR build takes nothing from the base built beside the PR's code
that could excuse the PR: its outcomes are no triage input (only the master's recorded ones are),
and its instruction counts can fail an item but never clear one.

``stage gate --base-out`` runs in process over results documents written as the earlier stages
would: the head failed AES-GCM and grew SHA-256's count by 20 %; the base beside it "failed" the
same way and "counted" the same as the head, as the PR's configure or make could have made it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.contract import BASE_OUTCOMES_FILE, BASE_OUTCOMES_USED_FILE
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult, SelfTest, to_json
from buildbot_bsdkm.perf.instruction_counts import (
    BASE_METADATA_KEY,
    METADATA_KEY,
    InstructionCounts,
    ItemCount,
)
from buildbot_bsdkm.pipeline.stages import Job, run_stage
from buildbot_bsdkm.policy import evaluate, parse_policy

POLICY = ("complete: false\ninstructions:\n  items: {SHA-256: 1000}\nregressions:\n"
          "  - {pattern: '*', max_pct: 0.5, metric: instructions}\n")
FP = {"id": "fp-worker"}
RECORDED_PASS = {"target": "userspace", "variant": "noasm", "verdict": "pass", "signatures": [],
                 "commit": "b" * 40, "date": "2026-11-30T02:00:00Z", "fingerprint": "fp-worker"}


def counts(n: int) -> dict[str, Any]:
    return InstructionCounts([ItemCount("SHA-256", amount=1000, instructions=n)]).to_dict()


def run(ok: bool, n: int | None, **meta: Any) -> RunResult:
    metadata: dict[str, Any] = {"fingerprint": FP, **meta}
    if n is not None:
        metadata[METADATA_KEY] = counts(n)
    return RunResult("noasm", "userspace", metadata=metadata, logs=[
        LogResult("test.log", tests=[SelfTest("AES-GCM", ok, code=None if ok else -216)], complete=True),
        LogResult("bench.log", benchmarks=[Benchmark("SHA-256", 500.0, "MiB/s")], complete=True)])


def lay_out(out: Path, side_run: RunResult) -> Path:
    run_dir = out / "userspace" / "noasm"
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_text(json.dumps(
        {"target": "userspace", "variant": "noasm", "stages": {"load": 1.0, "collect": 0.1}}))
    (run_dir / "results.json").write_text(to_json([side_run]))
    return run_dir


def gate(tmp_path: Path, *, history: RunResult | None = None) -> dict[str, Any]:
    policy = tmp_path / "policy.yml"
    policy.write_text(POLICY)
    config_file = tmp_path / "bsdkm.yml"
    config_file.write_text(f"policy: {policy}\ntargets: {{userspace: null}}\n"
                           "variants:\n  noasm: {targets: [userspace]}\n")
    out = tmp_path / "bsdkm-out"
    head_dir = lay_out(out, run(False, 1200, **{BASE_METADATA_KEY: counts(1200)}))
    lay_out(out / "base", run(False, 1200))  # beside the PR: its failure, the head's count
    # What the master's Gate step writes from its database: the base passed.
    (head_dir / BASE_OUTCOMES_FILE).write_text(json.dumps({"base_outcomes": [RECORDED_PASS]}))
    if history is not None:
        (head_dir / "history.json").write_text(to_json([history]))
    config = load_config(config_file)
    job = Job(config, "userspace", "noasm", out, progress=lambda *_: None, base_out=out / "base")
    assert run_stage(job, "gate") is None
    state = json.loads((head_dir / "state.json").read_text())
    used = head_dir / BASE_OUTCOMES_USED_FILE
    state["used"] = json.loads(used.read_text())["base_outcomes"] if used.is_file() else []
    return state


def test_the_worker_gate_triages_only_against_the_masters_recorded_outcomes(tmp_path: Path) -> None:
    """Fails on the old code: the base built beside the head failed AES-GCM too, so the worker's
    triage called the PR's failure pre-existing (and let it pass)."""
    state = gate(tmp_path)
    verdict = state["verdict"]
    aes = next(c for c in verdict["checks"] if c["name"] == "AES-GCM")
    assert aes["triage"] == "new", aes
    assert verdict["passed"] is False
    assert [o["verdict"] for o in state["used"]] == ["pass"]  # the master's, and nothing else
    assert any("beside the PR's code: not used for triage" in n for n in verdict["notes"]), verdict["notes"]


def test_counts_of_a_base_beside_the_pr_cannot_clear_an_item(tmp_path: Path) -> None:
    """Fails on the old code: SHA-256 passed at +0 % against the base counted beside the PR's code."""
    verdict = gate(tmp_path)["verdict"]
    assert not any(c["name"] == "instructions:SHA-256" and c["passed"] for c in verdict["checks"])
    assert any("SHA-256 (within its limit only against a base measured beside PR code)" in n
               for n in verdict["notes"]), verdict["notes"]


def test_an_item_the_beside_base_would_clear_is_judged_against_the_history(tmp_path: Path) -> None:
    """Fails on the old code: the history's count (1000) was never asked, so +20 % went unseen."""
    verdict = gate(tmp_path, history=run(True, 1000))["verdict"]
    sha = next(c for c in verdict["checks"] if c["name"] == "instructions:SHA-256")
    assert not sha["passed"] and "the newest history run" in sha["message"], sha


def test_counts_of_a_base_beside_the_pr_still_fail_a_regression() -> None:
    policy = parse_policy(POLICY, "policy.yml")
    head = run(True, 1200, **{BASE_METADATA_KEY: counts(1000)})
    sha = next(c for c in evaluate([head], policy).checks if c.name == "instructions:SHA-256")
    assert not sha.passed and "measured beside PR code" in sha.message, sha


def test_the_masters_comment_does_not_clear_an_item_by_carried_counts() -> None:
    """The PR comment is judged on the master from the head's results, which carry the base's counts
    (made beside the PR's code). Fails on the old code: SHA-256 passed there."""
    policy = parse_policy(POLICY, "policy.yml")
    head = run(True, 1200, **{BASE_METADATA_KEY: counts(1200)})
    verdict = evaluate([head], policy)
    assert not any(c.name == "instructions:SHA-256" and c.passed for c in verdict.checks)
    assert any("not judged" in n and "measured beside PR code" in n for n in verdict.notes), verdict.notes


def test_a_base_counted_elsewhere_still_clears_an_item() -> None:
    policy = parse_policy(POLICY, "policy.yml")
    verdict = evaluate([run(True, 1000)], policy, baseline=[run(True, 1000)])
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    assert sha.passed, sha
