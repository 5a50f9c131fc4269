"""What the Action publishes from a judged run: a status per (target, variant), the check counts,
``fail-on``, ``comment-mode`` and which earlier comment is ours (without being told our login)."""

from __future__ import annotations

import argparse
import json

import pytest

from buildbot_bsdkm.commands.action.comment import comment_mode, is_ours, should_write
from buildbot_bsdkm.commands.action.states import counts, fail_on_choice, job_fails, json_output
from buildbot_bsdkm.github.publisher import REPORT_MARKER
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure
from buildbot_bsdkm.policy import Check, CheckKind, Verdict
from buildbot_bsdkm.report.pull_request import statuses as run_states

REGRESSION_INCONCLUSIVE = {"verdict": "inconclusive"}


def check(target: str, variant: str, passed: bool, *, kind: CheckKind = CheckKind.SELFTEST,
          triage: str | None = None, blocking: bool = True, detail: dict | None = None) -> Check:
    return Check(variant=variant, target=target, name="AES", kind=kind, passed=passed, message="m",
                 triage=triage, blocking=blocking, detail=detail or {})


def test_a_status_per_run_named_as_buildbot_names_them() -> None:
    runs = [RunResult("intelasm", "userspace"), RunResult("noasm", "userspace"),
            RunResult("noasm", "linux-kmod-qemu", failure=StageFailure(
                stage="load", message="qemu did not boot", category=FailureCategory.INFRASTRUCTURE))]
    verdict = Verdict(checks=[check("userspace", "intelasm", True), check("userspace", "noasm", False)],
                      not_run=[{"target": "freebsd-kmod", "variant": "noasm",
                                "reason": "not a FreeBSD host"}])
    states = {s.context: (s.state, s.description) for s in run_states(runs, verdict)}
    assert set(states) == {"bsdkm/userspace/intelasm", "bsdkm/userspace/noasm",
                           "bsdkm/linux-kmod-qemu/noasm", "bsdkm/freebsd-kmod/noasm"}
    assert states["bsdkm/userspace/intelasm"][0] == "success"
    assert states["bsdkm/userspace/noasm"][0] == "failure"
    assert states["bsdkm/linux-kmod-qemu/noasm"] == ("error", "infrastructure: load: qemu did not boot")
    assert states["bsdkm/freebsd-kmod/noasm"] == ("error", "not run: not a FreeBSD host")
    assert all(len(d) <= 140 for _, d in states.values())


def test_counts_and_json_output() -> None:
    verdict = Verdict(checks=[check("userspace", "intelasm", True), check("userspace", "intelasm", False),
                              check("userspace", "intelasm", True, kind=CheckKind.REGRESSION,
                                    detail=REGRESSION_INCONCLUSIVE)],
                      not_run=[{"target": "freebsd-kmod", "variant": "intelasm", "reason": "r"}])
    assert counts(verdict, True) == {"passed": 1, "failed": 1, "skipped": 1, "inconclusive": 1}
    states = run_states([RunResult("intelasm", "userspace")], verdict)
    doc = json.loads(json_output("fail", verdict, True, states))
    assert doc["verdict"] == "fail" and doc["failed"] == 1
    assert [r["context"] for r in doc["runs"]] == ["bsdkm/userspace/intelasm", "bsdkm/freebsd-kmod/intelasm"]


def test_fail_on_is_applied_on_top_of_the_policy() -> None:
    pre_existing = Verdict(checks=[check("userspace", "noasm", False, triage="pre-existing")])
    new = Verdict(checks=[check("userspace", "noasm", False, triage="new")])
    unjudged = Verdict(checks=[check("userspace", "noasm", True, kind=CheckKind.REGRESSION,
                                     detail=REGRESSION_INCONCLUSIVE)])
    clean = Verdict(checks=[check("userspace", "noasm", True)])
    assert job_fails(pre_existing, True, "regression") and not job_fails(pre_existing, True, "new")
    assert job_fails(new, True, "new")
    assert not job_fails(unjudged, True, "regression") and job_fails(unjudged, True, "inconclusive")
    assert not job_fails(new, True, "never") and not job_fails(clean, False, "never")
    assert job_fails(clean, False, "regression")  # no usable results
    assert fail_on_choice("") == "regression"
    with pytest.raises(argparse.ArgumentTypeError, match="expected one of new, regression"):
        fail_on_choice("sometimes")


def comment(body: str, login: str, kind: str = "User", app: str | None = None) -> dict:
    return {"id": 1, "body": body, "user": {"login": login, "type": kind},
            "performed_via_github_app": {"slug": app} if app else None}


def test_our_comment_is_found_without_being_told_our_login() -> None:
    marked = f"{REPORT_MARKER}\nreport"
    # GITHUB_TOKEN's and an App installation token's comments: the App's own bot user.
    assert is_ours(comment(marked, "github-actions[bot]", "Bot", "github-actions"), set())
    assert is_ours(comment(marked, "bsdkm-ci[bot]", "Bot", "bsdkm-ci"), set())
    # A person pasting the marker, or a bot name typed by a person, is not us.
    assert not is_ours(comment(marked, "mallory"), set())
    assert not is_ours(comment(marked, "bsdkm-ci[bot]", "User"), set())
    assert not is_ours(comment(marked, "other[bot]", "Bot", "bsdkm-ci"), set())
    # A personal token's user (GET /user) or a login named by hand.
    assert is_ours(comment(marked, "ci-user"), {"ci-user"})
    assert not is_ours(comment("report without the marker", "ci-user"), {"ci-user"})


def test_comment_mode() -> None:
    assert comment_mode("true") == "always" and comment_mode("false") == "off"
    with pytest.raises(argparse.ArgumentTypeError):
        comment_mode("sometimes")
    assert should_write("always", "pass", None, "b")
    assert not should_write("off", "fail", None, "b")
    assert not should_write("failures", "pass", None, "b") and should_write("failures", "fail", None, "b")
    assert should_write("failures", "pass", "old", "b")  # a failure's comment is not left standing
    assert not should_write("changes", "pass", None, "b") and should_write("changes", "fail", None, "b")
    assert not should_write("changes", "fail", "b", "b") and should_write("changes", "pass", "a", "b")


def test_a_pair_that_never_ran_is_an_error_with_its_reason() -> None:
    """A not-run pair has no checks; it is never a success, whatever else passed."""
    runs = [RunResult("intelasm", "userspace"),
            RunResult("noasm", "freebsd-kmod", not_run="no FreeBSD kernel")]
    verdict = Verdict(checks=[check("userspace", "intelasm", False)],
                      not_run=[{"target": "freebsd-kmod", "variant": "noasm", "reason": "no FreeBSD kernel"}])
    states = {s.context: (s.state, s.description) for s in run_states(runs, verdict)}
    assert states["bsdkm/freebsd-kmod/noasm"] == ("error", "not run: no FreeBSD kernel")
    assert states["bsdkm/userspace/intelasm"][0] == "failure"
    # Alone in the job, with no check anywhere, the pair is still an error.
    alone = Verdict(not_run=[{"target": "freebsd-kmod", "variant": "noasm", "reason": "r"}])
    assert [s.state for s in run_states(runs[1:], alone)] == ["error"]
