"""Commit-status lines and the aggregated PR comment, from real parsed fixtures: the Buildbot
reporter's builds through the core's one PR report."""

from __future__ import annotations

import json

from conftest import FIXTURES

from buildbot_bsdkm.github.aggregate import (
    CANCELLED,
    EXCEPTION,
    FAILURE,
    GITHUB_COMMENT_LIMIT,
    RESULTS_PROPERTY,
    RETRY,
    SUCCESS,
    BuildFacts,
    PrReport,
    plain_properties,
)
from buildbot_bsdkm.github.publisher import REPORT_MARKER
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers.api import parse_file
from buildbot_bsdkm.policy import load_policy

NETWORK_RETRY = [
    {
        "number": 1,
        "worker": "w1",
        "passed": False,
        "stage": "fetch",
        "category": "infrastructure",
        "reason": "network",
        "message": "Could not resolve host",
    },
    {"number": 2, "worker": "w2", "passed": True, "message": "passed"},
]


def _run(variant: str, *rel: str) -> RunResult:
    return RunResult(variant=variant, target="userspace", logs=[parse_file(FIXTURES / r) for r in rel])


def _facts(run: RunResult, results: int | None, **props: object) -> BuildFacts:
    properties = {RESULTS_PROPERTY: json.loads(to_json([run])), **props}
    return BuildFacts(
        run.target, run.variant, results, f"http://ci/#/builders/1/builds/{run.variant}", properties
    )


def commit_status(build: BuildFacts) -> tuple[str, str]:
    """The build's status as the reporter posts it: its part of the PR's one report."""
    status = PrReport(load_policy()).report([build]).status(build.context)
    assert status is not None
    return status.state, status.description


def test_status_of_a_real_failed_selftest_names_the_algorithm() -> None:
    run = _run("aesni-avx", "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    failure = {"stage": "load", "category": "real", "reason": "selftest", "message": "self-test failed"}
    state, text = commit_status(_facts(run, FAILURE, bsdkm_failure=failure))
    # No base outcome given: the failure is named, not called new.
    assert (state, text) == (
        "failure", "failed — 1 failure with no base to compare with: selftest: PWDBASED (-125)")


def test_status_lines() -> None:
    tested = _run("noasm", "userspace/noasm/testwolfcrypt.txt")
    assert commit_status(_facts(tested, SUCCESS)) == ("success", "passed: self-test: 89/89 passed")
    run = _run("noasm", "noise/noasm_r01.txt")
    two = ["AES-128-GCM-enc −31 %", "AES-256-GCM-enc −29 %"]
    # What its gate found against the base built beside it, which the master does not have.
    assert commit_status(_facts(run, FAILURE, bsdkm_regressions=two)) == (
        "failure",
        "2 regressions: AES-128-GCM-enc −31 %, AES-256-GCM-enc −29 %",
    )
    assert commit_status(_facts(run, SUCCESS, bsdkm_attempts=NETWORK_RETRY)) == (
        "success",
        "passed; retried 1× (network)",
    )
    assert commit_status(_facts(run, None))[0] == "pending"
    assert commit_status(_facts(run, RETRY))[0] == "pending"
    assert commit_status(_facts(run, CANCELLED))[0] == "error"
    lost = {
        "stage": "build",
        "category": "infrastructure",
        "reason": "worker-lost",
        "message": "worker went away",
    }
    assert commit_status(BuildFacts("userspace", "noasm", EXCEPTION, None, {"bsdkm_failure": lost})) == (
        "error",
        "infrastructure: worker-lost: worker went away",
    )


def test_properties_from_buildbot_shape() -> None:
    assert plain_properties({"a": (1, "src"), "b": [2, "src"], "c": 3}) == {"a": 1, "b": 2, "c": 3}


def test_pr_comment_aggregates_variants_and_shows_speedup() -> None:
    accel = _run("aesni-avx", "noise/accel_r01.txt")
    noasm = _run("noasm", "noise/noasm_r01.txt")
    builds = [
        _facts(accel, SUCCESS, bsdkm_attempts=NETWORK_RETRY),
        _facts(noasm, SUCCESS),
        BuildFacts("freebsd-kmod", "aesni-avx", None, "http://ci/#/builders/3/builds/1"),
    ]
    body = PrReport(load_policy()).body(builds, {"JUnit": "http://ci/junit.xml"})
    assert body.startswith(REPORT_MARKER)
    assert "Still running: bsdkm/freebsd-kmod/aesni-avx" in body
    assert "http://ci/#/builders/1/builds/aesni-avx" in body and "http://ci/junit.xml" in body
    assert "Speedup" in body or "speedup" in body
    assert "AES-128-GCM-enc" in body
    assert "network" in body  # the retry and its reason
    assert len(body) <= GITHUB_COMMENT_LIMIT


def test_pr_comment_stays_under_githubs_limit_with_many_builders() -> None:
    builds = []
    for i, name in enumerate(sorted((FIXTURES / "noise").glob("*.txt"))):
        run = RunResult(variant=f"v{i}-{name.stem}", target="userspace", logs=[parse_file(name)])
        for copy in range(4):
            run_copy = RunResult(variant=f"{run.variant}-{copy}", target="userspace", logs=run.logs)
            builds.append(_facts(run_copy, SUCCESS))
    body = PrReport(load_policy()).body(builds)
    assert len(body) <= GITHUB_COMMENT_LIMIT
    assert "trimmed" in body or "cut" in body
