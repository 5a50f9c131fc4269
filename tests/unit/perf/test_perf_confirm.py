"""``confirm: true``: a learned regression fails only when a re-measurement of its
(target, variant), base and head interleaved again, agrees. The decision logic in the core
(``perf/confirm.py``) with fake re-measurements: real benchmark logs from the shared noise set, one
item slowed where a side should carry a regression.
"""

from __future__ import annotations

import dataclasses

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import LogResult, RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.perf.confirm import to_confirm
from buildbot_bsdkm.pipeline.gating import confirm
from buildbot_bsdkm.policy import PolicyError, evaluate, parse_policy

ITEM = "AES-128-GCM-enc"
POLICY = """\
perf: {alpha: 0.01, tail: 1.8, reduce: best, min_repeats: 3, confirm: %s}
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
"""


@pytest.fixture(scope="module")
def noise() -> dict[str, list[LogResult]]:
    return {v: [parse_file(p) for p in sorted((FIXTURES / "noise").glob(f"{v}_r*.txt"))]
            for v in ("accel", "noasm")}


def slowed(log: LogResult, factor: float) -> LogResult:
    bench = [dataclasses.replace(b, value=b.value * factor, per_second=b.per_second * factor,
                                 cycles=b.cycles / factor if b.cycles else b.cycles)
             if b.name == ITEM else b for b in log.benchmarks]
    return dataclasses.replace(log, benchmarks=bench)


def run(variant: str, logs: list[LogResult]) -> RunResult:
    return RunResult(variant=variant, target="userspace", logs=logs)


def sides(noise: dict[str, list[LogResult]], factor: float) -> tuple[list[RunResult], list[RunResult]]:
    """(heads, bases), 5 repeats each: accel's head slowed by ``factor`` at ITEM; noasm healthy."""
    a, n = noise["accel"], noise["noasm"]
    heads = [run("accel", [slowed(x, factor) for x in a[5:]]), run("noasm", n[5:])]
    return heads, [run("accel", a[:5]), run("noasm", n[:5])]


class Fake:
    """A re-measurement that hands back prepared runs and records what it was asked for."""

    def __init__(self, heads: list[RunResult], bases: list[RunResult]) -> None:
        self.heads, self.bases, self.asked = heads, bases, []

    def __call__(self, pairs):
        self.asked.append(pairs)
        return ([h for h in self.heads if (h.target, h.variant) in pairs],
                [b for b in self.bases if (b.target, b.variant) in pairs])


def first_verdict(noise, confirm_on: bool = True):
    policy = parse_policy(POLICY % ("true" if confirm_on else "false"))
    heads, bases = sides(noise, 0.6)
    verdict = evaluate(heads, policy, bases)
    assert [c.name for c in to_confirm(verdict)] == [ITEM]  # a 40 % drop of one item is found
    return policy, verdict


def test_a_regression_the_re_run_agrees_with_fails_and_both_are_reported(noise) -> None:
    policy, verdict = first_verdict(noise)
    fake = Fake(*sides(noise, 0.6))
    confirm(verdict, policy, fake)
    assert fake.asked == [[("userspace", "accel")]]  # only the regressed item's variant
    (check,) = verdict.regressions
    assert not verdict.passed and check.name == ITEM
    assert "; confirmed by a re-measurement: " in check.message
    assert check.detail["confirm"]["verdict"] == "regression" and check.detail["confirm"]["n_head"] == 5
    (accel,) = [p for p in verdict.perf if p["variant"] == "accel"]
    assert accel["confirm"]["verdict"] == "regression" and accel["items"]  # first run's items kept
    assert "1 regression(s) confirmed, 0 withdrawn" in verdict.notes[-1]


def test_a_regression_the_re_run_does_not_see_is_withdrawn(noise) -> None:
    policy, verdict = first_verdict(noise)
    heads, bases = sides(noise, 1.0)  # the machine was disturbed the first time: healthy again
    confirm(verdict, policy, Fake(heads, bases))
    assert verdict.passed
    (check,) = [c for c in verdict.checks if c.name == ITEM and c.variant == "accel"]
    assert check.passed and "NOT confirmed by a re-measurement, so not failed" in check.message
    assert check.detail["verdict"] == "regression"  # the first measurement's verdict, as it was
    assert check.detail["confirm"]["verdict"] != "regression"
    assert "0 regression(s) confirmed, 1 withdrawn" in verdict.notes[-1]


def test_without_a_re_measurement_the_regression_stands(noise) -> None:
    policy, verdict = first_verdict(noise)
    confirm(verdict, policy, Fake([], []))  # e.g. the re-run's programs failed
    assert not verdict.passed and "not re-measured: the regression stands" in verdict.regressions[0].message
    assert "not re-measured: userspace/accel" in verdict.notes[-1]
    policy, verdict = first_verdict(noise)
    confirm(verdict, policy, None)  # gated against history: nothing to measure again
    assert not verdict.passed and "stand unconfirmed" in verdict.notes[-1]


def test_confirm_off_or_nothing_regressed_measures_nothing(noise) -> None:
    policy, verdict = first_verdict(noise, confirm_on=False)
    fake = Fake(*sides(noise, 1.0))
    confirm(verdict, policy, fake)
    assert fake.asked == [] and not verdict.passed
    policy = parse_policy(POLICY % "true")
    heads, bases = sides(noise, 1.0)
    healthy = evaluate(heads, policy, bases)
    confirm(healthy, policy, fake)
    assert fake.asked == [] and healthy.passed


def test_confirm_must_be_a_boolean() -> None:
    assert parse_policy(POLICY % "true").perf.confirm is True
    assert parse_policy("perf: {alpha: 0.01}\n").perf.confirm is False
    with pytest.raises(PolicyError, match="perf.confirm.*must be true or false"):
        parse_policy(POLICY % '"yes"')
