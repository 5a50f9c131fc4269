"""More rounds while too noisy to decide (policy ``perf.resolve_pct``, config ``benchmark.max_repeats``).

On the third own recording (``bench/data/noise-2026-12-01-third``, a noisy hour of the shared worker)
five rounds a side caught a 12 % drop of one item in 0-2 % of pairs: the items ended ``inconclusive``.
The decision (``perf/extend.py``) is pure; the rounds are measured by the pipeline
(``pipeline/rounds.extend_while_undecided``) in ``run`` and in the Buildbot load stage.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import ROOT, interleaved_rounds
from test_perf_stage_base import scripted, slowed_text

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, load_config
from buildbot_bsdkm.model import from_json
from buildbot_bsdkm.perf import extend
from buildbot_bsdkm.perf.gate import Settings
from buildbot_bsdkm.pipeline.job import EXTENDED_KEY, Job
from buildbot_bsdkm.pipeline.jobs.pair import load_interleaved
from buildbot_bsdkm.pipeline.stages import run_stage
from buildbot_bsdkm.policy import PolicyError, Verdict, load_policy, parse_policy

THIRD = ROOT / "bench" / "data" / "noise-2026-12-01-third"
ITEM = "AES-128-GCM-enc"


def item(verdict: str = "unchanged", mdc: float | None = 0.04, n: int = 5) -> dict:
    return {"name": "x", "verdict": verdict, "min_detectable": mdc, "n_base": n, "n_head": n}


def verdict_with(*items: dict, base_from: str = "baseline", geomean: dict | None = None) -> Verdict:
    return Verdict(perf=[{"target": "userspace", "variant": "noasm", "base_from": base_from,
                          "items": list(items), "geomean": geomean}])


ON = Settings(resolve_pct=10.0)


def test_an_item_that_cannot_resolve_the_aim_asks_for_more_rounds() -> None:
    assert extend.undecided(verdict_with(item(mdc=0.04), item(mdc=0.18)), ON) == [("userspace", "noasm")]
    assert extend.undecided(verdict_with(item(mdc=0.04)), ON) == []
    # too few repeats or no spread yet: no min detectable change at all
    assert extend.undecided(verdict_with(item("inconclusive", None)), ON) == [("userspace", "noasm")]
    assert extend.undecided(verdict_with(item(), geomean=item(mdc=0.3)), ON) == [("userspace", "noasm")]


def test_decided_items_missing_items_and_history_gates_ask_for_nothing() -> None:
    assert extend.undecided(verdict_with(item("regression", 0.3), item("improvement", 0.3)), ON) == []
    assert extend.undecided(verdict_with(item("inconclusive", None, n=0)), ON) == []  # missing on a side
    # against a history window there is no base to measure again
    assert extend.undecided(verdict_with(item(mdc=0.3), base_from="history"), ON) == []


def test_rounds_double_up_to_the_cap_and_the_first_count_means_never() -> None:
    assert [extend.next_rounds(n, 15) for n in (5, 10, 15, 20)] == [10, 15, 15, 20]
    assert extend.next_rounds(3, 8) == 6 and extend.next_rounds(6, 8) == 8
    assert extend.next_rounds(5, 5) == 5
    assert load_config(ROOT / "bsdkm.yml").benchmark.max_repeats == 15  # the shipped config extends
    assert load_policy(None).perf.resolve_pct == 10


@pytest.mark.parametrize(("text", "problem"), [
    ("perf: {resolve_pct: 0}", "resolve_pct: must be"),
    ("perf: {resolve_pct: ten}", "resolve_pct: must be"),
])
def test_bad_extension_settings_are_refused_naming_the_key(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        parse_policy(text + "\nregressions: []\n")


@pytest.mark.parametrize(("value", "problem"), [
    ("0", "max_repeats: must be a positive whole number"), ("7.5", "max_repeats: must be a whole number")])
def test_a_bad_max_repeats_is_refused_naming_the_key(tmp_path: Path, value: str, problem: str) -> None:
    config = tmp_path / "bsdkm.yml"
    text = (ROOT / "bsdkm.yml").read_text()
    config.write_text(text.replace("  max_repeats: 15 ", f"  max_repeats: {value} "))
    with pytest.raises(ConfigError, match=problem):
        load_config(config)


def third_recording(variant: str) -> list[str]:
    runs = [json.loads(line) for line in (THIRD / "runs.jsonl").read_text().splitlines()]
    return [gzip.decompress((THIRD / r["file"]).read_bytes()).decode()
            for r in runs if r["variant"] == variant]


def noisy_pair(tmp_path: Path, max_repeats: int, slow: float) -> tuple[Job, Job, Path]:
    """Base and head stand-ins printing the third recording's runs (head's ``ITEM`` times ``slow``),
    under the shipped policy and config with ``benchmark.max_repeats`` set."""
    logs = third_recording("intelasm")
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    # runs 27-56 of that hour: at 5 rounds a side its min detectable change is ~22 %
    scripted(out, "head", [slowed_text(t, ITEM, slow) for t in logs[27:56:2]], order)
    scripted(out / "base", "base", logs[26:56:2], order)
    text = (ROOT / "bsdkm.yml").read_text()
    assert "  max_repeats: 15 " in text
    config = tmp_path / "bsdkm.yml"
    config.write_text(text.replace("  max_repeats: 15 ", f"  max_repeats: {max_repeats} ")
                      .replace("policy: policies/default.yml", f"policy: {ROOT / 'policies/default.yml'}"))
    cfg = load_config(config)
    head = Job(cfg, "userspace", "noasm", out, progress=lambda _: None, base_out=out / "base")
    base = Job(cfg, "userspace", "noasm", out / "base", progress=lambda _: None)
    return head, base, order


def gate_item(head: Job, base: Job) -> dict:
    from buildbot_bsdkm.pipeline.jobs.pair import gate_against_base
    gate_against_base(head, base)
    verdict = json.loads(head.state_path.read_text())["verdict"]
    (check,) = [c for c in verdict["checks"] if c["kind"] == "regression" and c["name"] == ITEM]
    return {"verdict": check["detail"]["verdict"], "n": check["detail"]["n_head"], "notes": verdict["notes"]}


def test_a_12_percent_drop_on_a_noisy_worker_is_caught_with_more_rounds(tmp_path: Path) -> None:
    """Five rounds of the noisy hour cannot tell a 12 % drop (it passed as ``unchanged``, able to
    detect only ~22 %); the shipped policy measures on to 15 rounds, catches it, and says so."""
    head, base, order = noisy_pair(tmp_path / "five", 5, 0.88)
    assert load_interleaved(head, base, 5) is None
    first = gate_item(head, base)
    assert first["verdict"] != "regression" and first["n"] == 5  # what the gate said before extending

    head, base, order = noisy_pair(tmp_path / "more", 15, 0.88)
    assert load_interleaved(head, base, 5) is None
    assert head.state[EXTENDED_KEY] == [5, 15]
    assert interleaved_rounds(order.read_text().split(), 15) == head.state["round_order"]
    (run,) = from_json((head.dir / "results.json").read_text())
    assert sum(1 for lg in run.logs if lg.benchmarks) == 15  # every round reaches the master's results
    after = gate_item(head, base)
    assert after["verdict"] == "regression" and after["n"] == 15
    assert after["notes"][0] == ("base measured next to the head, interleaved, 15 round(s) "
                                 "(the first 5, then more while too noisy to decide)")


def test_a_healthy_head_on_the_noisy_worker_passes_after_more_rounds(tmp_path: Path) -> None:
    head, base, _ = noisy_pair(tmp_path, 15, 1.0)
    assert load_interleaved(head, base, 5) is None
    after = gate_item(head, base)
    assert after["verdict"] == "unchanged" and after["n"] == 15
    assert run_stage(head, "gate") is None  # judged again from the files: the same pass


def test_a_quiet_pair_is_not_measured_again(tmp_path: Path) -> None:
    """The stand-in printing one log every round has no noise: five rounds decide."""
    head, base, order = noisy_pair(tmp_path, 15, 1.0)
    one = third_recording("intelasm")[0]
    for side in (head.dir.parents[1], base.dir.parents[1]):
        for f in (side / "logs").glob("*.txt"):
            f.write_text(one)
    assert load_interleaved(head, base, 5) is None
    assert EXTENDED_KEY not in head.state
    assert len(order.read_text().split()) == 10
