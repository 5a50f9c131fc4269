"""Release-candidate builds on Buildbot: the tag scheduler, the force form, the builders,
and the step that runs ``bsdkm-ci release`` and attaches the report as an HTML log."""

from __future__ import annotations

import json

from buildbot.process import remotetransfer
from buildbot.process.properties import Properties
from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectRemoteRef, ExpectShell, ExpectUploadFile, TestBuildStepMixin
from conftest import ROOT
from twisted.trial import unittest

from buildbot_bsdkm.buildbot import candidate as release
from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.buildbot.worker_config import work_steps
from buildbot_bsdkm.buildbot.worker_files import limit_for
from buildbot_bsdkm.config.bsdkm_yml import parse_config

LOCAL = MasterSettings(www_port=8010, pb_port=9989, local_workers={"local": "pw"}, config_path="/x/bsdkm.yml")


def config(extra: str = "", workers: str = "workers: {}"):
    text = (ROOT / "bsdkm.yml").read_text().replace("workers: {}", workers)
    if extra:  # in place of the repository's own release: section
        text = text.split("\nrelease:\n")[0] + "\n" + extra
    return parse_config(text, "bsdkm.yml", ROOT)


class FakeChange:
    def __init__(self, branch: str) -> None:
        self.branch = branch
        self.project = self.repository = self.codebase = ""
        self.category = None
        self.files: list[str] = []
        self.properties = Properties()
        self.comments = ""
        self.who = "x"


def scheduler(c, name):
    return next(s for s in c["schedulers"] if s.name == name)


def take(sched, branch: str) -> bool:
    """Whether the scheduler's change filter passes a change on ``branch`` (its configured filter)."""
    return bool(sched._config_kwargs["change_filter"].filter_change(FakeChange(branch)))


def test_tag_scheduler_takes_release_tags_only():
    c = buildmaster_config(config(), LOCAL)
    tags = scheduler(c, "release-tags")
    assert tags.builderNames == ["release/linux"]
    assert take(tags, "refs/tags/v5.9.2-stable") and take(tags, "v5.8.4-stable")
    assert not take(tags, "refs/tags/v5.9.2-rc1") and not take(tags, "master")
    assert tags._config_kwargs["properties"] == {"bsdkm_run": "release-candidate"}


def test_tag_pattern_comes_from_bsdkm_yml():
    c = buildmaster_config(config("release: {tag_pattern: 'rc-*'}\n"), LOCAL)
    tags = scheduler(c, "release-tags")
    assert take(tags, "refs/tags/rc-1") and not take(tags, "refs/tags/v5.9.2-stable")


def test_force_form_has_candidate_and_previous_fields():
    c = buildmaster_config(config("release: {previous: 'debian:trixie/5.7.2'}\n"), LOCAL)
    form = scheduler(c, "release-force")
    fields = {p.name: p for p in form._config_kwargs["properties"]}
    assert fields["candidate"].required and fields["previous"].required
    assert fields["previous"].default == "debian:trixie/5.7.2"


def test_one_release_builder_per_freebsd_release_with_a_worker(monkeypatch):
    monkeypatch.setenv("X", "pw")
    cfg = config(workers="workers:\n  fbsd143: {password: {env: X}, tags: [freebsd-14.3-amd64]}\n")
    names = {b.name: b.workernames for b in buildmaster_config(cfg, LOCAL)["builders"]}
    assert names["release/freebsd-14.3"] == ["fbsd143"]
    assert "release/freebsd-13.5" not in names  # no worker: the report lists it "not covered"
    assert names["release/linux"] == ["local"]  # fbsd143 cannot run the Linux module in QEMU
    step = buildmaster_config(cfg, LOCAL)["builders"]
    fb = work_steps(next(b for b in step if b.name == "release/freebsd-14.3").factory)[0]
    assert fb.kwargs["targets"] == ("freebsd-kmod",) and fb.kwargs["freebsd_release"] == "14.3"


def test_candidate_of_a_tag_build_is_the_pushed_tag():
    props = Properties(repository="https://github.com/wolfSSL/wolfssl.git", branch="refs/tags/v5.9.2-stable")
    assert release.candidate_source.getRenderingFor(props).result == (
        "git:https://github.com/wolfSSL/wolfssl.git@v5.9.2-stable")
    props.setProperty("candidate", "debian:sid/5.9.2", "force")
    assert release.candidate_source.getRenderingFor(props).result == "debian:sid/5.9.2"


OUT = release.OUT_DIR
CMD = ["bsdkm-ci", "release", "--candidate", "debian:sid/5.9.2", "--previous", "debian:trixie/5.7.2",
       "--out", OUT, "--config", "/etc/bsdkm.yml", "--target", "userspace"]


# What release.json holds, as far as the report shows it; rendered on the master.
RELEASE_DOC = {"verdict": {"passed": True, "status": "pass", "summary": "40 checks passed", "failures": [],
                           "notes": []},
               "matrix": [], "changes": [], "speedups": [], "repeats": 3, "software_variant": "noasm",
               "sources": {"candidate": {"source": "debian:sid/5.9.2"},
                           "previous": {"source": "debian:trixie"}}}


def upload(path: str) -> ExpectUploadFile:
    return ExpectUploadFile(workersrc=path, workdir="wkdir", blocksize=32768, maxsize=limit_for(path) + 1,
                            writer=ExpectRemoteRef(remotetransfer.StringFileWriter))


class TestReleaseStep(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def make(self):
        step = self.setup_step(release.ReleaseCandidate(
            candidate="debian:sid/5.9.2", previous="debian:trixie/5.7.2", config_path="/etc/bsdkm.yml",
            targets=("userspace",)))
        self.html_logs: dict[str, str] = {}
        fake = step.addHTMLLog  # the mixin's fake keeps no record of HTML logs: keep one here

        def record(name, html):
            self.html_logs[name] = html
            return fake(name, html)

        step.addHTMLLog = record
        return step

    def test_report_is_attached_as_an_html_log(self):
        self.make()
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stdout("PASS: 40 checks passed\n").exit(0),
            upload(f"{OUT}/release.md").upload_string("## Release candidate: PASS\n").exit(0),
            upload(f"{OUT}/release.json").upload_string(json.dumps(RELEASE_DOC)).exit(0),
        )
        self.expect_outcome(result=SUCCESS, state_string="release: PASS: 40 checks passed")
        self.expect_log_file("release.md", "## Release candidate: PASS\n")
        self.expect_property("bsdkm_release_verdict", "passed")
        d = self.run_step()
        return d.addCallback(lambda _: self.assertEqual(list(self.html_logs), ["release report"]))

    def test_unjudged_items_are_inconclusive_not_passed(self):
        self.make()
        line = "INCONCLUSIVE: 28 gated item(s) not judged, 12 of 40 checks passed"
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stdout(line + "\n").exit(0),
            upload(f"{OUT}/release.md").upload_string("md").exit(0),
            upload(f"{OUT}/release.json").upload_string(json.dumps(RELEASE_DOC)).exit(0),
        )
        self.expect_outcome(result=SUCCESS, state_string=f"release: {line}")
        self.expect_property("bsdkm_release_verdict", "inconclusive")
        return self.run_step()

    def test_a_regression_fails_the_build_with_the_report_still_attached(self):
        self.make()
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stdout("FAIL: 1 of 40 checks failed (regression)\n")
            .exit(1),
            upload(f"{OUT}/release.md").upload_string("md").exit(0),
            upload(f"{OUT}/release.json").upload_string(json.dumps(RELEASE_DOC)).exit(0),
        )
        self.expect_outcome(result=FAILURE, state_string="release: FAIL: 1 of 40 checks failed (regression)")
        self.expect_property("bsdkm_release_verdict", "failed")
        d = self.run_step()
        return d.addCallback(lambda _: self.assertIn("Release candidate", self.html_logs["release report"]))

    def test_unknown_source_says_which(self):
        self.make()
        msg = "bsdkm-ci release: --previous: unknown source 'v5.7.2' (accepted: ...)\n"
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stderr(msg).exit(2),
            upload(f"{OUT}/release.md").exit(1),
            upload(f"{OUT}/release.json").exit(1),
        )
        self.expect_outcome(result=FAILURE, state_string=f"release: {msg.strip()}")
        self.expect_property("bsdkm_release_verdict", "error")
        return self.run_step()

    def test_the_candidates_outcomes_are_recorded_as_base_outcomes(self):
        import json
        import tempfile

        from twisted.internet import defer

        from buildbot_bsdkm.buildbot import base_outcomes
        from buildbot_bsdkm.triage.outcomes import BaseOutcome

        url = f"sqlite:///{tempfile.mkdtemp()}/state.sqlite"
        self.patch(base_outcomes, "_db_url", lambda master: url)
        self.patch(base_outcomes.threads, "deferToThread", lambda f, *a: defer.succeed(f(*a)))
        panic = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
        rec = BaseOutcome("freebsd-kmod-qemu", "intelasm", "debug", "fail", [panic], None, "5.9.3-rc1",
                          "2026-12-01T00:00:00Z", "fp1", ["complete", "kernel"]).to_dict()
        self.make()
        self.build.setProperty("scheduler", "release-tags", "test")  # a pushed release tag
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=CMD).stdout("PASS: 40 checks passed\n").exit(0),
            upload(f"{OUT}/release.md").upload_string("md").exit(0),
            upload(f"{OUT}/release.json").upload_string(json.dumps(RELEASE_DOC)).exit(0),
            upload(f"{OUT}/release-outcomes.json").upload_string(json.dumps({"base_outcomes": [rec]}))
            .exit(0),
        )
        self.expect_outcome(result=SUCCESS, state_string="release: PASS: 40 checks passed")
        d = self.run_step()

        def stored(_):
            (got,) = base_outcomes.store_for(url).window("freebsd-kmod-qemu", "intelasm", 10)
            self.assertEqual((got["version"], got["signatures"]), ("5.9.3-rc1", [panic]))
        return d.addCallback(stored)
