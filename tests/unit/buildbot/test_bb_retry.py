"""The bounded retry policy, the failure classification it relies on, and the 50-build fault simulation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import FIXTURES, fixture_text
from hypothesis import given, settings
from hypothesis import strategies as st
from retry_simulation import simulate

from buildbot_bsdkm.buildbot import retrying_build
from buildbot_bsdkm.buildbot.classification import classify_stage
from buildbot_bsdkm.buildbot.retrying_build import RetryHolds
from buildbot_bsdkm.config.bsdkm_yml import RetryConfig, parse_config
from buildbot_bsdkm.contract import failure_from_property as failure_from_dict
from buildbot_bsdkm.contract import failure_property as failure_to_dict
from buildbot_bsdkm.model import FailureCategory, StageFailure
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.retry.decision import (
    Attempt,
    AttemptVerdict,
    RetryConfigError,
    RetrySettings,
    decide,
    pick_worker,
    worker_lost_failure,
)

DEFAULT = RetrySettings()
NET = StageFailure("fetch", "fetch failed (network): curl: (6) Could not resolve host",
                   FailureCategory.INFRASTRUCTURE, "network")
SELFTEST = StageFailure("load", "self-test failed: PWDBASED (error -125)", FailureCategory.REAL, "selftest")
PANIC = worker_lost_failure("load")


def fail(n: int, worker: str, f: StageFailure) -> Attempt:
    return Attempt.failing(n, worker, f)


# --------------------------------------------------------------------------- classification evidence


def test_network_error_from_curl_is_infrastructure():
    f = classify_stage("fetch", exit_code=2, output="curl: (6) Could not resolve host: deb.debian.org\n",
                       timed_out=False)
    assert (f.category, f.reason) == (FailureCategory.INFRASTRUCTURE, "network")


def test_run_that_hung_after_the_benchmark_completed_is_infrastructure():
    # The real benchmark output, complete ("Benchmark complete"), then Buildbot killed the step.
    out = fixture_text("userspace/accel/bench_default.txt")
    f = classify_stage("load", exit_code=-1, output=out, timed_out=True, timeout_s=600)
    assert (f.category, f.reason) == (FailureCategory.INFRASTRUCTURE, "hung-after-complete")
    assert "600" in f.message


def test_hang_before_the_benchmark_completed_is_a_real_load_timeout():
    out = fixture_text("userspace/accel/bench_timeout3_KILL.txt")
    f = classify_stage("load", exit_code=-1, output=out, timed_out=True, timeout_s=600)
    assert (f.category, f.reason) == (FailureCategory.REAL, "load-timeout")


def test_null_pointer_exception_in_the_ci_server_is_infrastructure():
    out = "FATAL: java.lang.NullPointerException\n\tat hudson.model.Run.execute(Run.java:1894)\n"
    f = classify_stage("build", exit_code=1, output=out, timed_out=False)
    assert (f.category, f.reason) == (FailureCategory.INFRASTRUCTURE, "ci-exception")


def test_real_selftest_failure_in_the_log_beats_any_pattern():
    out = fixture_text("userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt") + "\nConnection reset by peer\n"
    f = classify_stage("load", exit_code=1, output=out, timed_out=False)
    assert (f.category, f.reason) == (FailureCategory.REAL, "selftest")
    assert "PWDBASED" in f.message


def test_config_patterns_extend_the_defaults():
    cfg = RetryConfig(infra_patterns=(r"runner \S+ lost communication",))
    out = "The self-hosted runner fbsd-3 lost communication with the server.\n"
    assert classify_stage("build", exit_code=1, output=out, timed_out=False).category == FailureCategory.REAL
    f = classify_stage("build", exit_code=1, output=out, timed_out=False, patterns=cfg)
    assert f.category == FailureCategory.INFRASTRUCTURE


def test_worker_lost_is_infrastructure_except_while_loading():
    assert worker_lost_failure("fetch").category == FailureCategory.INFRASTRUCTURE
    assert worker_lost_failure("fetch").reason == "worker-lost"
    assert (PANIC.category, PANIC.reason) == (FailureCategory.REAL, "panic")


def test_failure_property_round_trip_and_rejects_garbage():
    assert failure_from_dict(failure_to_dict(NET)) == NET
    assert failure_from_dict({"stage": "x", "category": "bogus"}) is None
    assert failure_from_dict("text") is None


# --------------------------------------------------------------------------- decide()


def test_infrastructure_is_retried_with_backoff_on_another_worker_then_given_up():
    d1 = decide([fail(1, "w1", NET)], DEFAULT)
    assert d1.retry and d1.delay_s == 30 and d1.avoid_workers == ("w1",)
    d2 = decide([fail(1, "w1", NET), fail(2, "w2", NET)], DEFAULT)
    assert d2.retry and d2.delay_s == 120 and d2.avoid_workers == ("w1", "w2")
    d3 = decide([fail(1, "w1", NET), fail(2, "w2", NET), fail(3, "w1", NET)], DEFAULT)
    assert not d3.retry and d3.verdict == AttemptVerdict.INFRASTRUCTURE
    assert d3.summary == "infrastructure failure, gave up after 3 attempts (network, network, network)"


def test_pass_after_infrastructure_retries_says_so():
    d = decide([fail(1, "w1", NET), Attempt.passing(2, "w2")], DEFAULT)
    assert (d.retry, d.verdict) == (False, AttemptVerdict.PASSED)
    assert d.summary == "passed after 1 infrastructure retry (network)"
    assert [a["worker"] for a in d.history_dicts()] == ["w1", "w2"]


def test_real_failure_is_never_retried():
    d = decide([fail(1, "w1", SELFTEST)], DEFAULT)
    assert (d.retry, d.verdict) == (False, AttemptVerdict.FAILED)
    assert d.summary.startswith("failed: selftest at load")


def test_panic_is_retried_once_and_failing_twice_is_reported():
    d1 = decide([fail(1, "w1", PANIC)], DEFAULT)
    assert d1.retry and d1.avoid_workers == ("w1",)
    d2 = decide([fail(1, "w1", PANIC), fail(2, "w2", PANIC)], DEFAULT)
    assert (d2.retry, d2.verdict) == (False, AttemptVerdict.FAILED)
    assert d2.summary.startswith("failed twice: panic at load")


def test_panic_then_pass_is_flaky_and_still_a_failure():
    d = decide([fail(1, "w1", PANIC), Attempt.passing(2, "w2")], DEFAULT)
    assert (d.retry, d.verdict) == (False, AttemptVerdict.FLAKY)
    assert d.summary.startswith("failed once, passed once: flaky, see logs")


def test_zero_retries_allowed_gives_up_at_once():
    d = decide([fail(1, "w1", NET)], RetrySettings(max_infra_retries=0))
    assert (d.retry, d.verdict) == (False, AttemptVerdict.INFRASTRUCTURE)


def test_decide_needs_history():
    with pytest.raises(ValueError, match="at least one attempt"):
        decide([], DEFAULT)


outcomes = st.sampled_from(["pass", "net", "selftest", "panic", "timeout"])
FAILURES = {"net": NET, "selftest": SELFTEST, "panic": PANIC,
            "timeout": StageFailure("load", "module load timed out", FailureCategory.REAL, "load-timeout")}


@settings(max_examples=300, deadline=None)
@given(st.lists(outcomes, min_size=1, max_size=12), st.integers(min_value=0, max_value=4))
def test_any_sequence_of_outcomes_stops_within_the_bounds(seq, max_retries):
    """Whatever the workers do, the loop ends; real failures are retried at most once."""
    s = RetrySettings(max_infra_retries=max_retries)
    history: list[Attempt] = []
    for i, o in enumerate(seq):
        history.append(Attempt.passing(i + 1, "w") if o == "pass" else fail(i + 1, "w", FAILURES[o]))
        d = decide(history, s)
        if not d.retry:
            break
    assert not d.retry or len(history) == len(seq)
    assert len(history) <= max_retries + 2
    assert sum(1 for a in history[:-1] if a.is_real) <= 1
    if any(a.is_real for a in history) and not d.retry:
        assert d.verdict in (AttemptVerdict.FAILED, AttemptVerdict.FLAKY)


# --------------------------------------------------------------------------- settings and holds


def test_settings_from_bsdkm_yml_retry_block():
    text = ("targets: {userspace: {}}\n"
            "variants: {noasm: {flags: --disable-asm, targets: [userspace]}}\n"
            "retry: {max_infra_retries: 3, backoff_s: [5, 10]}\n")
    cfg = parse_config(text, "t.yml")
    s = RetrySettings.from_config(cfg.retry)
    assert (s.max_infra_retries, s.backoff(1), s.backoff(2), s.backoff(7)) == (3, 5.0, 10.0, 10.0)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_infra_retries": -1}, "retry.max_infra_retries: must be at least 0"),
    ({"max_infra_retries": "2"}, "retry.max_infra_retries: expected an integer"),
    ({"backoff_s": (1.0, -5.0)}, "retry.backoff_s: expected non-negative numbers"),
])
def test_bad_settings_name_the_key(kwargs, message):
    with pytest.raises(RetryConfigError, match=message):
        RetrySettings(**kwargs)


def test_malformed_attempt_record_is_named():
    with pytest.raises(RetryConfigError, match="malformed"):
        Attempt.from_dict({"worker": "w1"})


def test_pick_worker_prefers_fresh_ones():
    assert pick_worker(["w1", "w2"], ["w1"]) == "w2"
    assert pick_worker(["w1", "w2"], ["w2", "w1"]) == "w2"  # both failed: the one that failed longest ago
    assert pick_worker(["w1"], ["w1"]) == "w1"
    assert pick_worker([], []) is None


def test_holds_delay_and_release():
    h = RetryHolds()
    h.hold([7], not_before=100.0, avoid=["w1"])
    assert not h.ready(7, 99.0) and h.ready(7, 100.0) and h.ready(8, 0.0)
    assert h.avoid(7) == ("w1",)
    h.release([7])
    assert h.ready(7, 0.0) and h.avoid(7) == ()


# --------------------------------------------------------------------------- the 50-build fault test


def test_fifty_builds_with_thirty_percent_network_failures_reach_the_right_verdict():
    log = parse_file(FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    report = simulate(50, 0.3, DEFAULT, selftest_failure_log=log, seed=1)
    print("\n".join(report.lines()))
    assert len(report.builds) == 50
    assert report.wrong == 0
    assert report.max_real_retries == 1  # panics get their one reproducibility run, no more
    assert report.infra_failures > 0  # the injection really happened
    assert report.verdicts()["failed"] == 10  # 5 self-test + 5 panic builds, none hidden by a retry
    assert report.right + report.gave_up == 50
    # Over many seeds: wrong is always 0; only the "gave up" count depends on luck (0.3^3 per build).
    for seed in range(40):
        r = simulate(50, 0.3, DEFAULT, selftest_failure_log=log, seed=seed)
        assert r.wrong == 0 and r.max_real_retries <= 1


# --------------------------------------------------------------------------- builder hooks


def _wfb(name: str) -> SimpleNamespace:
    return SimpleNamespace(worker=SimpleNamespace(workername=name))


def test_builder_hooks_apply_backoff_and_prefer_another_worker(monkeypatch):
    holds = RetryHolds()
    monkeypatch.setattr(retrying_build, "HOLDS", holds)
    clock = SimpleNamespace(now=100.0)
    builder = SimpleNamespace(master=SimpleNamespace(reactor=SimpleNamespace(seconds=lambda: clock.now)))
    request = SimpleNamespace(id=42)
    a, b = _wfb("w1"), _wfb("w2")
    assert retrying_build.can_start_build(builder, a, request)
    holds.hold([42], not_before=130.0, avoid=["w1"])
    assert not retrying_build.can_start_build(builder, a, request)
    clock.now = 130.0
    assert retrying_build.can_start_build(builder, a, request)
    assert retrying_build.next_worker(builder, [a, b], request) is b
    assert retrying_build.next_worker(builder, [a], request) is a  # the only one left: still runs
    assert retrying_build.next_worker(builder, [], request) is None
    # No history: the first by name.
    assert retrying_build.next_worker(builder, [b, a], SimpleNamespace(id=7)) is a
