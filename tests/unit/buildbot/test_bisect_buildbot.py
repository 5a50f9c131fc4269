"""The master's ``bisect`` builder: its config, the step that runs ``bsdkm-ci bisect`` (Buildbot's
TestBuildStepMixin), and the service that starts it for a new failure signature on the base branch."""

from __future__ import annotations

import json
from typing import Any

from buildbot.process import remotetransfer
from buildbot.process.results import FAILURE, SUCCESS, WARNINGS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectRemoteRef, ExpectShell, ExpectUploadFile, TestBuildStepMixin
from conftest import ROOT
from twisted.internet import defer
from twisted.trial import unittest

from buildbot_bsdkm import contract
from buildbot_bsdkm.bisection.bisect_requests import BisectRequest
from buildbot_bsdkm.buildbot import bisect_builder as bb
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.buildbot.worker_config import work_steps
from buildbot_bsdkm.buildbot.worker_files import limit_for
from buildbot_bsdkm.config.bsdkm_yml import load_config

LOCAL = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"}, config_path="/x/bsdkm.yml")
SIG = "selftest: SHA-256 (-1)"
REQ = BisectRequest("userspace", "noasm", SIG, "a" * 40, "c" * 40)
REPO = "https://github.com/wolfSSL/wolfssl.git"
CMD = ["bsdkm-ci", "bisect", f"--good={'a' * 40}", f"--bad={'c' * 40}", "--target", "userspace",
       "--variant", "noasm", f"--failure={SIG}", f"--source-git={REPO}", "--out", "bsdkm-bisect",
       "--config", "/x/bsdkm.yml"]


def test_the_master_has_a_bisect_builder_its_triggerable_and_the_service() -> None:
    c = buildmaster_config(load_config(ROOT / "bsdkm.yml"), LOCAL)
    [builder] = [b for b in c["builders"] if b.name == bb.BUILDER]
    assert builder.workernames == ["local"]
    assert [s.step_class for s in work_steps(builder.factory)] == [bb.BsdkmBisect]  # no github: no comment
    [sched] = [s for s in c["schedulers"] if s.name == bb.SCHEDULER]
    assert sched.builderNames == [bb.BUILDER]
    assert any(isinstance(s, bb.BisectOnNewSignatures) for s in c["services"])


def upload(path: str) -> ExpectUploadFile:
    return ExpectUploadFile(workersrc=path, workdir="wkdir", blocksize=32768, maxsize=limit_for(path) + 1,
                            writer=ExpectRemoteRef(remotetransfer.StringFileWriter))


def result_doc(decided: bool) -> dict[str, Any]:
    culprit = {"sha": "b" * 40, "subject": "test: sha256 KAT", "author": "A <a@example.org>", "date": "2026"}
    return {"schema": 1, "decided": decided, "culprit": culprit if decided else None,
            "headline": "culprit bbbbbbbbbbbb" if decided
            else "could not decide: the bad end does not show it",
            "steps": [{"purpose": "end"}], "builds": 3}


class TestBisectStep(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):  # noqa: ANN201 - trial's signature
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def make(self) -> None:
        self.setup_step(bb.BsdkmBisect(config_path="/x/bsdkm.yml"))
        self.build.setProperty(contract.BISECT_REQUEST_PROPERTY, REQ.to_dict(), "test")
        self.build.setProperty(contract.REPOSITORY_PROPERTY, REPO, "test")

    def expect_reports(self, doc: dict[str, Any]) -> None:
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stdout("Report: bsdkm-bisect/bisect.md\n").exit(
                0 if doc["decided"] else 1),
            upload("bsdkm-bisect/bisect.md").upload_string("# bsdkm-ci bisect\n").exit(0),
            upload("bsdkm-bisect/bisect.json").upload_string(json.dumps(doc)).exit(0),
        )

    def test_a_named_culprit_is_success_with_the_result_as_a_property(self) -> defer.Deferred:
        self.make()
        doc = result_doc(True)
        self.expect_reports(doc)
        self.expect_outcome(result=SUCCESS, state_string="bisect: culprit bbbbbbbbbbbb")
        self.expect_log_file("bisect.md", "# bsdkm-ci bisect\n")
        self.expect_property(contract.BISECT_RESULT_PROPERTY, {k: v for k, v in doc.items() if k != "steps"})
        return self.run_step()

    def test_could_not_decide_is_a_warning_not_a_failure(self) -> defer.Deferred:
        self.make()
        self.expect_reports(result_doc(False))
        self.expect_outcome(result=WARNINGS,
                            state_string="bisect: could not decide: the bad end does not show it")
        return self.run_step()

    def test_no_request_fails_naming_what_is_missing(self) -> defer.Deferred:
        self.setup_step(bb.BsdkmBisect(config_path="/x/bsdkm.yml"))
        self.expect_outcome(result=FAILURE,
                            state_string="bisect: no usable request (bsdkm_bisect_request and repository)")
        return self.run_step()


class FakeState:
    def __init__(self) -> None:
        self.values: dict[tuple[int, str], Any] = {}

    async def getObjectId(self, name: str, cls: str) -> int:  # noqa: N802 - Buildbot's API
        return 7

    async def getState(self, oid: int, name: str, default: Any = None) -> Any:  # noqa: N802
        return self.values.get((oid, name), default)

    async def setState(self, oid: int, name: str, value: Any) -> None:  # noqa: N802
        self.values[(oid, name)] = value


class FakeScheduler:
    def __init__(self) -> None:
        self.triggered: list[dict[str, Any]] = []

    def trigger(self, waited_for: bool, sourcestamps: list[dict[str, Any]], set_props: Any) -> None:
        self.triggered.append({"sourcestamps": sourcestamps,
                               "request": set_props.getProperty(contract.BISECT_REQUEST_PROPERTY),
                               "repository": set_props.getProperty(contract.REPOSITORY_PROPERTY)})


class FakeMaster:
    def __init__(self, props: dict[str, Any]) -> None:
        self.props = props
        self.db = type("db", (), {"state": FakeState()})()
        self.scheduler = FakeScheduler()
        self.scheduler_manager = type("sm", (), {"namedServices": {bb.SCHEDULER: self.scheduler}})()
        outer = self

        class Data:
            async def get(self, path: tuple) -> dict[str, Any]:
                return {k: (v, "test") for k, v in outer.props.items()}

        self.data = Data()


def outcome(commit: str, *signatures: str) -> dict[str, Any]:
    return {"target": "userspace", "variant": "noasm", "kernel": "", "commit": commit,
            "verdict": "fail" if signatures else "pass", "signatures": list(signatures)}


class TestTrigger(TestReactorMixin, unittest.TestCase):
    def setUp(self) -> None:
        self.setup_test_reactor()

    def service(self, props: dict[str, Any], rows: list[dict[str, Any]]) -> bb.BisectOnNewSignatures:
        class Service(bb.BisectOnNewSignatures):
            fake = FakeMaster(props)

            @property
            def master(self) -> Any:  # the service's parent is the master; here a fake one
                return self.fake

        svc = Service()
        svc.repository = REPO

        async def window(master: Any, target: str, variant: str, n: int = 10) -> list[dict[str, Any]]:
            return rows

        self.patch(bb.base_outcomes, "window", window)
        return svc

    @defer.inlineCallbacks
    def test_new_signature_starts_one_bisection_once(self):  # noqa: ANN201
        rows = [outcome("a" * 40), outcome("c" * 40, SIG)]
        svc = self.service({"bsdkm_target": "userspace", "bsdkm_variant": "noasm"}, rows)
        got = yield defer.ensureDeferred(svc.consider({"buildid": 1}))
        self.assertEqual(got, [REQ])
        again = yield defer.ensureDeferred(svc.consider({"buildid": 2}))
        self.assertEqual(again, [])  # once per signature
        [t] = svc.master.scheduler.triggered
        self.assertEqual(t["request"], REQ.to_dict())
        self.assertEqual(t["repository"], REPO)
        self.assertEqual(t["sourcestamps"][0]["revision"], "c" * 40)

    @defer.inlineCallbacks
    def test_a_pull_request_build_never_starts_one(self):  # noqa: ANN201
        rows = [outcome("a" * 40), outcome("c" * 40, SIG)]
        svc = self.service({"bsdkm_target": "userspace", "bsdkm_variant": "noasm", "github_pr": 12}, rows)
        got = yield defer.ensureDeferred(svc.consider({"buildid": 1}))
        self.assertEqual(got, [])
        self.assertEqual(svc.master.scheduler.triggered, [])

    @defer.inlineCallbacks
    def test_the_message_queue_gets_a_deferred_that_does_the_work(self):  # noqa: ANN201
        """Buildbot's mq waits on what the callback returns: a coroutine would never run."""
        rows = [outcome("a" * 40), outcome("c" * 40, SIG)]
        svc = self.service({"bsdkm_target": "userspace", "bsdkm_variant": "noasm"}, rows)
        d = svc._finished(("builds", "1", "finished"), {"buildid": 1})
        self.assertIsInstance(d, defer.Deferred)
        yield d
        self.assertEqual(len(svc.master.scheduler.triggered), 1)


def test_with_a_github_section_the_culprit_gets_a_commit_comment_step(monkeypatch: Any) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setenv("BSDKM_WEBHOOK_SECRET", "s3cret")
    from buildbot_bsdkm.config.bsdkm_yml import parse_config

    text = (ROOT / "bsdkm.yml").read_text().replace("github: {}", "github: {repo: wolfSSL/wolfssl}")
    c = buildmaster_config(parse_config(text, "bsdkm.yml", ROOT), LOCAL)
    [builder] = [b for b in c["builders"] if b.name == bb.BUILDER]
    assert [s.step_class for s in work_steps(builder.factory)] == [bb.BsdkmBisect, bb.BsdkmBisectComment]
    assert work_steps(builder.factory)[1].kwargs["repo"] == "wolfSSL/wolfssl"


class TestRegressionTrigger(TestReactorMixin, unittest.TestCase):
    def setUp(self) -> None:
        self.setup_test_reactor()

    @defer.inlineCallbacks
    def test_a_drop_in_the_perf_history_starts_a_regression_bisection(self):  # noqa: ANN201
        rows = [{**outcome("a" * 40), "fingerprint": "fp1"}, {**outcome("c" * 40), "fingerprint": "fp1"}]
        commits = [f"{i:040x}" for i in range(12)]
        series = {"SHA-256": [(c, 100.0 if i < 6 else 89.0) for i, c in enumerate(commits)]}

        async def window(master: Any, target: str, variant: str, n: int = 10) -> list[dict[str, Any]]:
            return rows

        async def perf_series(master: Any, fp: str, target: str, variant: str, n: int = 30) -> dict:
            assert fp == "fp1"
            return series

        self.patch(bb.base_outcomes, "window", window)
        self.patch(bb, "perf_series", perf_series)

        class Service(bb.BisectOnNewSignatures):
            fake = FakeMaster({"bsdkm_target": "userspace", "bsdkm_variant": "noasm"})

            @property
            def master(self) -> Any:
                return self.fake

        svc = Service()
        svc.repository = REPO
        [req] = yield defer.ensureDeferred(svc.consider({"buildid": 3}))
        self.assertEqual((req.regression, req.good, req.bad), ("SHA-256", commits[5], commits[6]))
        cmd = bb.BsdkmBisect(config_path="/x/bsdkm.yml").bisect_command(req, REPO)
        self.assertIn("--regression=SHA-256", cmd)
        self.assertIn("--pct=11", cmd)
        self.assertNotIn("--failure", " ".join(cmd))
