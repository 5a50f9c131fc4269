"""What the master takes from a worker: files bounded per kind, HTML rendered on the master, a
culprit only inside the range asked for, trusted workers for release and bisect builds, and base
outcomes only from a release of the configured repository."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from buildbot.process import remotetransfer
from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectRemoteRef, ExpectShell, ExpectUploadFile, TestBuildStepMixin
from conftest import ROOT
from twisted.trial import unittest

from buildbot_bsdkm import contract
from buildbot_bsdkm.bisection.bisect_requests import BisectRequest
from buildbot_bsdkm.bisection.search import BisectResult, Commit, Outcome, Probe, Purpose, Step
from buildbot_bsdkm.buildbot import bisect_builder as bb
from buildbot_bsdkm.buildbot import candidate as release
from buildbot_bsdkm.buildbot import steps, worker_files
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.buildbot.retrying_build import can_start_build
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.github.bisect_comment import checked_culprit, comment_body
from buildbot_bsdkm.github.client import ApiResponse
from buildbot_bsdkm.report.bisection_report import result_json

OUT = "bsdkm-out"
RUN_DIR = f"{OUT}/userspace/accel"
XSS = "<img src=x onerror=alert(document.cookie)>"


def upload(path: str) -> ExpectUploadFile:
    return ExpectUploadFile(workersrc=path, workdir="wkdir", blocksize=32768,
                            maxsize=worker_files.limit_for(path) + 1,
                            writer=ExpectRemoteRef(remotetransfer.StringFileWriter))


# -- item: worker files are read bounded, linear, and refused past their limit


def test_the_writer_keeps_pieces_and_notes_a_file_over_its_limit() -> None:
    w = worker_files.BoundedStringWriter(10)
    for piece in (b"12345", "678", b"9\xc3"):
        w.remote_write(piece)
    assert not w.over and w.buffer == "123456789\ufffd"
    w.remote_write(b"x")
    assert w.over and w.buffer == ""


class TestBoundedResults(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):  # noqa: ANN201 - trial's signature
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def test_results_over_their_limit_are_a_real_integrity_failure_naming_file_and_limit(self):
        self.patch(worker_files, "LIMITS", {**worker_files.LIMITS, "results.json": 4 * worker_files.MIB})
        self.setup_step(steps.CollectResults(variant="accel", target="userspace", out_dir=OUT,
                                             config_path="/etc/bsdkm.yml"))
        big = "x" * (4 * worker_files.MIB + 1)
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=["bsdkm-ci", "stage", "collect", "--variant", "accel",
                                                  "--target", "userspace", "--out", OUT, "--config",
                                                  "/etc/bsdkm.yml"]).stdout("results\n").exit(0),
            upload(f"{RUN_DIR}/results.json").upload_string(big).exit(1),
        )
        self.expect_outcome(result=FAILURE)
        d = self.run_step()

        def check(_: Any) -> None:
            failure = self.get_nth_step(0).getProperty(contract.FAILURE_PROPERTY)
            assert failure["category"] == "real" and failure["reason"] == "integrity", failure
            assert f"{RUN_DIR}/results.json" in failure["message"] and "4 MiB" in failure["message"]
        return d.addCallback(check)


# -- item: the bisect and release builders take trusted workers only; their HTML is the master's


class Worker:
    def __init__(self, tags: list[str]) -> None:
        from buildbot.process.properties import Properties

        self.properties = Properties()
        self.properties.setProperty(contract.TAGS_PROPERTY, tags, "test")


class Wfb:
    def __init__(self, tags: list[str]) -> None:
        self.worker = Worker(tags)


class Request:
    id = 1

    def __init__(self) -> None:
        from buildbot.process.properties import Properties

        self.properties = Properties()


class Builder:
    class master:  # noqa: N801 - what can_start_build reads
        class reactor:  # noqa: N801
            @staticmethod
            def seconds() -> float:
                return 0.0


def test_bisect_and_release_builders_refuse_untrusted_workers() -> None:
    settings = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"},
                              config_path="/x/bsdkm.yml")
    c = buildmaster_config(load_config(ROOT / "bsdkm.yml"), settings)
    chosen = [b for b in c["builders"] if b.name == bb.BUILDER or b.name.startswith("release/")]
    assert {b.name for b in chosen} >= {bb.BUILDER, release.LINUX_BUILDER}
    for b in chosen:
        assert b.canStartBuild is can_start_build, b.name
        assert b.canStartBuild(Builder, Wfb(["trusted"]), Request()) is True
        assert b.canStartBuild(Builder, Wfb(["untrusted"]), Request()) is False, b.name


def _result() -> BisectResult:
    good, bad = Commit("a" * 40, "good"), Commit("c" * 40, f"evil {XSS}", XSS, "2026")
    steps_ = [Step(bad, 2, Purpose.END, Probe(Outcome.BAD, XSS)),
              Step(good, 0, Purpose.END, Probe(Outcome.GOOD, "passes"))]
    return BisectResult(True, bad, good, f"why {XSS}", [], "high", steps_, 2)


def test_the_bisect_report_is_rendered_on_the_master_from_the_json() -> None:
    from buildbot_bsdkm.report.bisection_report import html_page, result_from_json

    doc = result_json(_result(), {"target": "userspace", "variant": "noasm", "good": "a" * 40})
    html = html_page(*result_from_json(json.loads(json.dumps(doc))))
    assert XSS not in html and "&lt;img src=x" in html and "Culprit" in html


class TestBisectStepHtml(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):  # noqa: ANN201
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def test_worker_html_never_reaches_the_ui(self):
        req = BisectRequest("userspace", "noasm", "selftest: SHA-256 (-1)", "a" * 40, "c" * 40)
        step = self.setup_step(bb.BsdkmBisect(config_path="/x/bsdkm.yml"))
        self.build.setProperty(contract.BISECT_REQUEST_PROPERTY, req.to_dict(), "test")
        self.build.setProperty(contract.REPOSITORY_PROPERTY, "https://github.com/wolfSSL/wolfssl.git", "test")
        html_logs: dict[str, str] = {}
        fake = step.addHTMLLog

        def record(name: str, html: str) -> Any:
            html_logs[name] = html
            return fake(name, html)

        step.addHTMLLog = record
        doc = result_json(_result(), {"target": "userspace", "variant": "noasm"})
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=step.bisect_command(req, "https://github.com/wolfSSL/wolfssl.git"))
            .exit(0),
            upload("bsdkm-bisect/bisect.md").upload_string("# bisect\n").exit(0),
            upload("bsdkm-bisect/bisect.json").upload_string(json.dumps(doc)).exit(0),
        )
        self.expect_outcome(result=SUCCESS)
        d = self.run_step()

        def check(_: Any) -> None:
            assert list(html_logs) == ["bisect report"]
            assert XSS not in html_logs["bisect report"] and "&lt;img" in html_logs["bisect report"]
        return d.addCallback(check)


# -- item: the culprit of the commit comment is checked; its numbers are numbers


class CompareClient:
    """GitHub's compare answers of a history a..b..c (b is c's parent)."""

    order = {"a" * 40: 0, "b" * 40: 1, "c" * 40: 2}

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> ApiResponse:
        self.calls.append(f"{method} {path}")
        base, head = path.rsplit("/", 1)[-1].split("...")
        if base not in self.order or head not in self.order:
            return ApiResponse(200, {"status": "diverged"}, {})
        d = self.order[head] - self.order[base]
        return ApiResponse(200, {"status": "ahead" if d > 0 else "identical" if d == 0 else "behind"}, {})


REQ = SimpleNamespace(good="a" * 40, bad="c" * 40)  # what the check reads of the bisection request


def _doc(sha: str, **kw: Any) -> dict[str, Any]:
    return {"decided": True, "culprit": {"sha": sha}, "failure": "selftest: SHA-256 (-1)", **kw}


def test_a_culprit_outside_the_range_or_no_commit_id_is_refused() -> None:
    client = CompareClient()
    assert asyncio.run(checked_culprit(client, "wolfSSL/wolfssl", _doc("b" * 40), REQ)) == "b" * 40
    assert asyncio.run(checked_culprit(client, "wolfSSL/wolfssl", _doc("c" * 40), REQ)) == "c" * 40
    for sha in ("../../issues/1", "B" * 40, "b" * 39, "a" * 40, "d" * 40):
        try:
            asyncio.run(checked_culprit(client, "wolfSSL/wolfssl", _doc(sha), REQ))
        except ValueError as e:
            assert "culprit" in str(e)
        else:
            raise AssertionError(f"{sha} was taken")
    assert not any("issues" in c for c in client.calls)  # a path never reaches the request


def test_the_comment_formats_numbers_as_numbers() -> None:
    body = comment_body(_doc("b" * 40, builds="[x](https://evil.example/) ![i](https://e/i.png)",
                             commits="@wolfSSL/ci-admins", build_limit="\n# heading", build_seconds="1e999",
                             evidence={"change_pct": 3.0, "interval_pct": ["<b>x</b>", "[y](z)"]}))
    for bad in ("evil.example", "i.png", "@wolfSSL", "\n# heading", "<b>", "[y]"):
        assert bad not in body, bad
    assert "? build(s) for ? commit(s) (limit ?)" in body


# -- item: a forced release of a typed candidate records no base outcomes


def _step(source: str, **props: Any) -> release.ReleaseCandidate:
    class WithProperties(release.ReleaseCandidate):
        def getProperty(self, name: str, default: Any = None) -> Any:  # noqa: N802 - Buildbot's name
            return props.get(name, default)

    return WithProperties(candidate=source, previous="debian:trixie/5.7.2",
                          repository="https://github.com/wolfSSL/wolfssl.git")


def test_only_a_release_of_the_configured_repository_records_base_outcomes() -> None:
    tagged = _step("git:https://github.com/wolfSSL/wolfssl.git@v5.9.3-stable", scheduler="release-tags")
    assert tagged.candidate_is_the_base()
    typed = _step("git:https://github.com/attacker/wolfssl.git@evil", scheduler="release-force",
                  candidate="git:https://github.com/attacker/wolfssl.git@evil")
    assert not typed.candidate_is_the_base()
    ours = _step("git:https://github.com/wolfSSL/wolfssl@v5.9.3-rc1", scheduler="release-force",
                 candidate="git:https://github.com/wolfSSL/wolfssl@v5.9.3-rc1")
    assert ours.candidate_is_the_base()
    assert not _step("debian:sid/5.9.2", scheduler="release-force", candidate="debian:sid/5.9.2") \
        .candidate_is_the_base()

