"""The perf gate: one verdict per item from repeats, learned limits, clock consistency.

Synthetic repeats with one-sided noise (a disturbed run is slow, never fast), seeded, so every
number here is reproducible; the statistics are measured on real repeats in bench/perf_gate.py.
"""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from buildbot_bsdkm.model import BenchKind, Benchmark, LogFormat, LogResult, RunResult
from buildbot_bsdkm.perf import clock, gate, stats
from buildbot_bsdkm.policy import evaluate, load_policy, parse_policy

MIB = 1024.0**2
ITEMS = {"AES-128-CBC-enc": (1300.0, 1.90), "AES-128-GCM-enc": (4900.0, 0.50), "SHA-256": (1700.0, 1.46),
         "SHA-512": (812.0, 3.05), "GMAC Table 4-bit": (2060.0, 1.20), "AES-256-GCM-enc": (4370.0, 0.57)}
LEARNED = """
perf: {min_repeats: 3}
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
  - {pattern: "*", max_pct: 1, aggregate: geomean, limit: learned}
"""


def sym(name: str, mib_s: float, cpb: float | None) -> Benchmark:
    return Benchmark(name, mib_s, "MiB/s", BenchKind.SYMMETRIC, mib_s * MIB, cpb, block_size=1024)


def log(benches: list[Benchmark], source: str = "bench.log") -> LogResult:
    return LogResult(source, LogFormat.WOLFCRYPT_BENCH, complete=True, benchmarks=benches,
                     benchmark_complete=True)


def repeats(n: int, seed: int, *, scale: dict[str, float] | None = None, noise: float = 0.01,
            items: dict[str, tuple[float, float]] = ITEMS) -> list[LogResult]:
    """n benchmark logs: each item is its base speed, minus one-sided noise of about ``noise``."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        benches = []
        for name, (mib, cpb) in items.items():
            f = math.exp(-rng.expovariate(1 / noise)) * (scale or {}).get(name, 1.0)
            benches.append(sym(name, mib * f, cpb / f))
        out.append(log(benches, f"bench.{i}.log"))
    return out


def run(logs: list[LogResult], variant: str = "intelasm", metadata: dict | None = None) -> RunResult:
    return RunResult(variant, "userspace", logs=logs, metadata=dict(metadata or {}))


def learned(v) -> dict[str, dict]:
    return {i["name"]: i for p in v.perf for i in [*p["items"], *([p["geomean"]] if p["geomean"] else [])]}


# --------------------------------------------------------------------------- statistics


def test_limit_grows_with_the_number_of_items_tested_together() -> None:
    # the false-alarm budget is for the whole run: more items, each one's limit is wider
    assert stats.z_two_sided(0.01 / 90) > stats.z_two_sided(0.01 / 10) > stats.z_two_sided(0.01)
    base, head = repeats(5, 1), repeats(5, 2)
    few = evaluate([run(head)], parse_policy(LEARNED), [run(base)])
    many_items = {f"item-{i}": (1000.0 + i, 2.0) for i in range(80)}
    many = evaluate([run(repeats(5, 2, items=many_items))], parse_policy(LEARNED),
                    [run(repeats(5, 1, items=many_items))])
    assert few.perf[0]["family"] == len(ITEMS) + 1 and many.perf[0]["family"] == 81
    assert many.perf[0]["z"] > few.perf[0]["z"] + 0.5


def test_hodges_lehmann_and_spread() -> None:
    assert stats.hodges_lehmann([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]) == 1.0
    sigma, dof = stats.spread([0.0, 0.1, -0.1, 0.2, -0.2])
    assert dof == 4 and sigma == pytest.approx(math.sqrt(0.1 / 4))


# --------------------------------------------------------------------------- verdicts


def test_healthy_repeats_pass_and_every_item_gets_a_verdict_interval_and_limit() -> None:
    v = evaluate([run(repeats(5, 2))], parse_policy(LEARNED), [run(repeats(5, 1))])
    assert v.passed, [c.message for c in v.failures]
    items = learned(v)
    assert set(items) == {*ITEMS, "geomean"}
    for item in items.values():
        assert item["verdict"] == "unchanged"
        assert item["ci_low"] < item["change"] < item["ci_high"]
        assert 0 < item["limit"] < item["min_detectable"] < 0.25
        assert (item["n_base"], item["n_head"]) == (5, 5)
    assert v.perf[0]["verdict"] == "pass"


def test_a_clear_drop_of_one_item_is_one_regression() -> None:
    head = repeats(5, 2, scale={"AES-128-GCM-enc": 0.85})
    v = evaluate([run(head)], parse_policy(LEARNED), [run(repeats(5, 1))])
    assert [c.name for c in v.regressions if not c.name.startswith("geomean")] == ["AES-128-GCM-enc"]
    item = learned(v)["AES-128-GCM-enc"]
    assert item["verdict"] == "regression" and item["ci_high"] < 0
    assert item["change"] == pytest.approx(-0.15, abs=0.03)
    assert "interval" in v.regressions[0].message and "min detectable" in v.regressions[0].message


def test_a_small_drop_of_every_item_fails_the_geomean() -> None:
    head = repeats(5, 2, scale=dict.fromkeys(ITEMS, 0.95))
    v = evaluate([run(head)], parse_policy(LEARNED), [run(repeats(5, 1))])
    assert "geomean:*" in [c.name for c in v.regressions]
    assert learned(v)["geomean"]["verdict"] == "regression"


def test_fewer_repeats_than_required_is_inconclusive_not_a_pass() -> None:
    # a 30 % drop seen once per side: not judged (one run is one sample of a one-sided noise)
    head = repeats(1, 2, scale={"SHA-256": 0.7})
    v = evaluate([run(head)], parse_policy(LEARNED), [run(repeats(1, 1))])
    items = learned(v)
    assert items["SHA-256"]["verdict"] == "inconclusive"
    assert "fewer than the 3 required" in items["SHA-256"]["reason"]
    assert v.perf[0]["verdict"] == "inconclusive"
    assert any("inconclusive (not judged, not passed)" in n for n in v.notes)


def test_a_too_noisy_item_is_inconclusive_and_reported() -> None:
    noisy = dict(ITEMS)
    base = repeats(5, 1)
    head = repeats(5, 2)
    rng = random.Random(5)
    for logs in (base, head):
        for lg in logs:  # SHA-256 swings by up to a half in both directions
            f = rng.uniform(0.5, 1.5)
            lg.benchmarks = [sym(b.name, b.value * f, b.cycles / f) if b.name == "SHA-256" else b
                             for b in lg.benchmarks]
    v = evaluate([run(head)], parse_policy(LEARNED), [run(base)])
    item = learned(v)["SHA-256"]
    assert item["verdict"] == "inconclusive" and "too noisy" in item["reason"]
    assert item["min_detectable"] > 0.25
    assert v.passed and v.perf[0]["verdict"] == "inconclusive" and noisy


def test_history_lends_spread_and_replaces_a_missing_base() -> None:
    history = [run([lg]) for lg in repeats(20, 7)]
    # three head repeats against history only: history is the base and lends the spread
    v = evaluate([run(repeats(3, 2, scale={"SHA-256": 0.6}))], parse_policy(LEARNED), None, history)
    items = learned(v)
    assert items["SHA-256"]["verdict"] == "regression"
    assert items["AES-128-CBC-enc"]["verdict"] == "unchanged"
    assert v.perf[0]["base_from"] == "history" and items["SHA-256"]["n_base"] == 20
    assert any("compared with a window of 20 history repeat(s)" in n for n in v.notes)


def test_max_pct_is_a_floor_for_a_learned_limit() -> None:
    text = LEARNED.replace("max_pct: 2, limit", "max_pct: 20, limit")
    head = repeats(5, 2, scale={"SHA-256": 0.88})
    v = evaluate([run(head)], parse_policy(text), [run(repeats(5, 1))])
    item = learned(v)["SHA-256"]
    assert item["limit"] == pytest.approx(0.20, abs=1e-4) and item["verdict"] == "unchanged"


def test_gate_refuses_non_finite_numbers() -> None:
    with pytest.raises(gate.PerfInputError, match="unusable value nan"):
        gate.compare([{("x", None): float("nan")}], [{("x", None): 1.0}], rule_for=lambda n: gate.ItemRule())


# --------------------------------------------------------------------------- clock self-consistency

# PR #9714-style FreeBSD table: every row's rate x cycles reads 3.4 GHz, the RNG row 1.3 GHz.
HZ = 3.4e9
PR9714 = {"AES-128-CBC-enc": 1700.0, "AES-128-GCM-enc": 4100.0, "SHA-256": 1500.0, "SHA-512": 780.0,
          "HMAC-SHA256": 1450.0}


def pr9714_log(seed: int, rng_factor: float = 1.0) -> LogResult:
    r = random.Random(seed)
    benches = []
    for name, mib in PR9714.items():
        f = math.exp(-r.expovariate(100))
        benches.append(sym(name, mib * f, round(HZ / (mib * f * MIB), 2)))
    rng_mib = 65.0 * math.exp(-r.expovariate(100))
    # the timer mis-measured the RNG row: its cycles say 3.4 GHz would give 170 MiB/s
    benches.append(sym("RNG SHA256 DRBG", rng_mib, round(1.3e9 / (rng_mib * MIB), 2) * rng_factor))
    return log(benches)


def test_pr9714_rng_row_is_flagged_as_mis_timed() -> None:
    lg = pr9714_log(1)
    report = clock.check_log([clock.Timed(b.name, b.per_second, b.cycles) for b in lg.benchmarks])
    assert report.clock_hz == pytest.approx(HZ, rel=0.02)
    assert list(report.mis_timed) == ["RNG SHA256 DRBG"]
    assert report.mis_timed["RNG SHA256 DRBG"] == pytest.approx(1.3e9, rel=0.02)
    assert report.deviation("RNG SHA256 DRBG") == pytest.approx(1.3 / 3.4 - 1, abs=0.02)


def test_a_mis_timed_item_is_gated_on_cycles() -> None:
    base = [pr9714_log(i) for i in range(5)]
    # head: the RNG really got 20 % slower (its cycles grew) while its broken MiB/s did not move
    head = [pr9714_log(10 + i, rng_factor=1.25) for i in range(5)]
    v = evaluate([run(head, "crypto-register")], parse_policy(LEARNED), [run(base, "crypto-register")])
    assert any("RNG SHA256 DRBG is mis-timed" in n and "gated on cycles" in n for n in v.notes), v.notes
    (bad,) = [c for c in v.regressions if not c.name.startswith("geomean")]
    assert bad.name == "RNG SHA256 DRBG" and bad.metric == "cycles"
    assert learned(v)["RNG SHA256 DRBG"]["mis_timed"] is True
    assert v.perf[0]["clock"]["mis_timed"] == ["RNG SHA256 DRBG"]
    assert v.perf[0]["clock"]["head_hz"] == pytest.approx(HZ, rel=0.02)


def test_base_and_head_at_different_implied_clocks_are_flagged() -> None:
    base = [pr9714_log(i) for i in range(5)]
    head = [pr9714_log(10 + i) for i in range(5)]
    for lg in head:  # the cycle counter ran 10 % faster on the head side: cycles/byte grew, rate did not
        lg.benchmarks = [sym(b.name, b.value, b.cycles * 1.1) for b in lg.benchmarks]
    v = evaluate([run(head)], parse_policy(LEARNED), [run(base)])
    assert any("implied clocks differ by +10" in n for n in v.notes), v.notes
    assert v.perf[0]["clock"]["mismatch"] == pytest.approx(0.10, abs=0.02)


# --------------------------------------------------------------------------- policy and fingerprints


def test_default_policy_uses_learned_limits() -> None:
    p = load_policy()
    timed = [r for r in p.regressions if r.metric != "instructions"]
    assert [(r.limit, r.aggregate) for r in timed] == [("learned", "item"), ("learned", "geomean")]
    assert {r.limit for r in p.regressions if r.metric == "instructions"} == {"fixed"}
    assert p.perf.min_repeats >= 3 and p.perf.alpha <= 0.01


@pytest.mark.parametrize(("text", "problem"), [
    ("perf: {alpha: 1.5}\n", "perf.alpha: must be below 1"),
    ("perf: {reduce: mean}\n", "perf.reduce: must be one of median, best, second"),
    ("perf: {center: mean}\n", "perf.center: must be one of auto, median, best, second"),
    ("perf: {min_repeats: 0}\n", "perf.min_repeats: must be a positive whole number"),
    ("regressions:\n  - {pattern: '*', max_pct: 5, detect_pct: 9}\n", "only goes with 'limit: learned'"),
    ("regressions:\n  - {pattern: '*', max_pct: 5, limit: guessed}\n", "must be one of fixed, learned"),
])
def test_bad_perf_settings_are_named(text: str, problem: str) -> None:
    from buildbot_bsdkm.policy import PolicyError

    with pytest.raises(PolicyError, match=problem):
        parse_policy(text)


def test_the_deviation_centre_is_read_from_the_policy() -> None:
    assert parse_policy("perf: {center: median}\n").perf.center == "median"
    assert parse_policy("perf: {alpha: 0.01}\n").perf.center == "auto"


def test_history_of_another_machine_is_left_out_with_a_note() -> None:
    here, there = {"fingerprint": {"id": "aaaa"}}, {"fingerprint": {"id": "bbbb", "source_commit": "x"}}
    history = [run([lg], metadata=there) for lg in repeats(20, 7)]
    policy = parse_policy(LEARNED.replace("min_repeats: 3", "min_repeats: 1"))
    v = evaluate([run(repeats(1, 2), metadata=here)], policy, None, history)
    assert not v.perf and "userspace/intelasm: 20 history run(s) left out: machine fingerprint bbbb is not " \
        "this run's aaaa" in v.notes
    assert any("no baseline and no history" in n for n in v.notes)


def test_baseline_of_another_machine_is_an_error_not_a_comparison() -> None:
    head = run(repeats(5, 2), metadata={"fingerprint": {"id": "aaaa", "cpu_model": "A"}})
    base = run(repeats(5, 1), metadata={"fingerprint": {"id": "bbbb", "cpu_model": "B"}})
    v = evaluate([head], parse_policy(LEARNED), [base])
    (err,) = v.failures
    assert err.error and err.name == "fingerprint" and "differs in cpu_model" in err.message


def test_machine_fingerprint_names_what_makes_numbers_comparable() -> None:
    from buildbot_bsdkm.perf import fingerprint

    a = fingerprint.machine_fingerprint("userspace", "noasm", ["--disable-asm"])
    assert set(fingerprint.FIELDS) <= set(a) and a["cpu_model"] and a["kernel"]
    assert a["id"] == fingerprint.fingerprint_id(a) == fingerprint.machine_fingerprint(
        "userspace", "noasm", ["--disable-asm"])["id"]
    b = fingerprint.machine_fingerprint("userspace", "noasm", ["--disable-asm", "--enable-sp"])
    assert b["id"] != a["id"] and fingerprint.differences(a, b) == ["configure_args"]
    assert fingerprint.of_run({"fingerprint": a}) == a["id"] and fingerprint.of_run({}) is None


# --------------------------------------------------------------------------- where the noise is measured from


def _gate(base: list[float], head: list[float], history: list[float],
          settings: gate.Settings) -> gate.ItemResult:
    """One item through perf.gate, values given as % off a nominal speed."""
    def reps(pcts: list[float]) -> list[dict[gate.Key, float]]:
        return [{("x", None): 1000.0 * (1 + p / 100)} for p in pcts]
    rule = gate.ItemRule(floor_pct=2, detect_pct=25)
    return gate.compare(reps(base), reps(head), reps(history), rule_for=lambda _: rule,
                        settings=settings).items[0]


# A real pattern (bench/data): most repeats within 1 % of the best, a fifth of them hit by a stall.
HISTORY = [0, -0.5, -15, -0.3, -1, -0.2, -16, -0.4, 0, -0.8, -14, -0.6, -0.1, -0.9, -15, -0.3,
           -0.5, -0.2, -0.7, -17, 0, -0.4, -0.6, -0.3, -15, -0.1, -0.8, -0.5, -0.2, -0.6]
BEST = gate.Settings(reduce="best", tail=2.0)


def test_a_drop_is_caught_when_most_head_repeats_are_also_disturbed() -> None:
    # -12 % with three of five head repeats hit by a stall: the head's best still shows the drop.
    # Measured from the head's median (-27 %), its two clean repeats looked like +15 % fast outliers
    # and the limit grew past the drop (the old gate: unchanged).
    base = [0, -0.5, -0.3, -1, -0.2]
    head = [p - 12 for p in (0, -0.5, -15, -15, -15)]
    new = _gate(base, head, HISTORY, BEST)
    assert new.verdict == gate.REGRESSION and new.limit < 0.08
    old = _gate(base, head, HISTORY, dataclasses.replace(BEST, center="median"))
    assert old.verdict != gate.REGRESSION and old.limit > 0.12


def test_disturbed_repeats_on_one_side_alone_are_no_false_alarm() -> None:
    # the same stalls without a drop: the best of each side agree
    v = _gate([0, -0.5, -0.3, -1, -0.2], [0, -0.5, -15, -15, -15], HISTORY, BEST)
    assert v.verdict == gate.UNCHANGED
    # unequal repeat counts: three head repeats, two stalled. The best of three is often a stalled
    # one at this stall rate, so the item cannot resolve 25 %: inconclusive, never a false alarm.
    v = _gate([0, -0.5, -0.3, -1, -0.2], [-0.4, -15, -16], HISTORY, BEST)
    assert (v.verdict, v.n_base, v.n_head) == (gate.INCONCLUSIVE, 5, 3) and "too noisy" in v.reason


def _stalled(rng: random.Random, n: int, drop: float = 0.0) -> list[float]:
    return [drop - (rng.uniform(10, 20) if rng.random() < 0.2 else rng.expovariate(2.0)) for _ in range(n)]


def test_one_sided_null_data_false_alarms_at_most_the_stated_rate_and_a_12pct_drop_is_caught() -> None:
    # 200 healthy pairs of 5 vs 5 with 20 % stalled repeats, history of 30: the run-wide alpha is 1 %
    rng = random.Random(9)
    alarms = caught = 0
    for _ in range(200):
        hist = _stalled(rng, 30)
        base = _stalled(rng, 5)
        alarms += _gate(base, _stalled(rng, 5), hist, BEST).verdict == gate.REGRESSION
        caught += _gate(base, _stalled(rng, 5, -12), hist, BEST).verdict == gate.REGRESSION
    assert alarms <= 2 and caught >= 190
