"""Worker trust levels: base-branch, release and history builds only on ``trusted`` workers, PRs of
untrusted authors only on ``untrusted`` (or ``vm-reset``) ones, no history from an untrusted worker
or a forced build of a typed revision, and no master secret in a local worker's environment."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from github_fake import payloads
from test_perf import repeats, run
from twisted.internet import defer

from buildbot_bsdkm.buildbot import base_outcomes, control, perf_history
from buildbot_bsdkm.contract import PR_NUMBER_PROPERTY, TAGS_PROPERTY
from buildbot_bsdkm.github.events import parse_pull_request_event
from buildbot_bsdkm.github.trust import ApprovalBook, TrustPolicy, decide_pull_request

PR_AUTHOR_TRUSTED_PROPERTY = "github_author_trusted"  # contract's


class Props:
    def __init__(self, **props: Any) -> None:
        self.props = props

    def getProperty(self, name: str, default: Any = None) -> Any:
        return self.props.get(name, default)


class Step(Props):
    """What the recording code reads of a Buildbot step: its build's properties and the master."""

    def __init__(self, db_url: str, **props: Any) -> None:
        super().__init__(**props)
        self.master = type("Master", (), {"config": type("C", (), {"db": {"db_url": db_url}})(),
                                          "basedir": None})()


def wfb(*tags: str) -> Any:
    worker = type("W", (), {"properties": Props(**{TAGS_PROPERTY: list(tags)})})()
    return type("WFB", (), {"worker": worker})()


def request(**props: Any) -> Any:
    return type("Request", (), {"properties": Props(**props)})()


BASE = request()
TRUSTED_PR = request(**{PR_NUMBER_PROPERTY: 4, PR_AUTHOR_TRUSTED_PROPERTY: True})
UNTRUSTED_PR = request(**{PR_NUMBER_PROPERTY: 5, PR_AUTHOR_TRUSTED_PROPERTY: False})


@pytest.mark.parametrize(("tags", "base", "trusted_pr", "untrusted_pr"), [
    (("freebsd-kmod", "trusted"), True, True, False),
    (("freebsd-kmod", "untrusted"), False, True, True),
    (("freebsd-kmod", "vm-reset"), False, True, True),
    (("freebsd-kmod", "trusted", "vm-reset"), True, True, True),
    (("freebsd-kmod",), True, True, True),  # names no level: as before (the master warns)
])
def test_which_worker_takes_which_build(tags: tuple[str, ...], base: bool, trusted_pr: bool,
                                        untrusted_pr: bool) -> None:
    from buildbot_bsdkm.buildbot.trust_levels import worker_may_take
    from buildbot_bsdkm.config.worker_trust import may_run

    assert worker_may_take(wfb(*tags), BASE) is base
    assert worker_may_take(wfb(*tags), TRUSTED_PR) is trusted_pr
    assert worker_may_take(wfb(*tags), UNTRUSTED_PR) is untrusted_pr
    assert may_run(tags, pr=True, author_trusted=False) is untrusted_pr


def test_an_approved_pr_is_marked_untrusted_and_a_members_trusted() -> None:
    policy = TrustPolicy.build()
    member = parse_pull_request_event(payloads.pull_request(association="MEMBER"))
    assert decide_pull_request(member, policy, ApprovalBook()).author_trusted
    fork = parse_pull_request_event(payloads.pull_request(association="NONE", fork=True))
    approvals = ApprovalBook()
    approvals.approve(fork.pull.repo, fork.pull.number, fork.pull.head_sha)
    decision = decide_pull_request(fork, policy, approvals)
    assert decision.builds and not decision.author_trusted


@pytest.mark.parametrize(("props", "recorded"), [
    ({}, True),  # a push to the base branch, on a trusted worker
    ({TAGS_PROPERTY: ["linux-userspace", "trusted"]}, True),
    ({"scheduler": "force", "revision": "", "branch": "", "repository": ""}, True),  # force, nothing typed
    ({PR_NUMBER_PROPERTY: 4}, False),
    ({"scheduler": "force", "revision": "deadbeef"}, False),  # labelled with what the forcer typed
    ({"scheduler": "force", "branch": "evil"}, False),
    ({TAGS_PROPERTY: ["freebsd-kmod", "untrusted"]}, False),
])
def test_what_may_record_history(props: dict[str, Any], recorded: bool, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    step = Step(f"sqlite:///{tmp_path / 'state.sqlite'}", **props)
    assert base_outcomes.may_record(step) is recorded  # the triage's outcomes obey the same rule
    # The perf history stores a healthy run only when the rule allows it.
    monkeypatch.setattr(perf_history.threads, "deferToThread", lambda f, *a: defer.succeed(f(*a)))
    healthy = run(repeats(1, 3), metadata={"fingerprint": {"id": "f00d"}, "source_commit": "c1"})
    stored: list[Any] = []
    defer.ensureDeferred(perf_history.record(step, [healthy])).addBoth(stored.append)
    assert stored == [1 if recorded else 0]
    from buildbot_bsdkm.config.worker_trust import may_record_history

    assert may_record_history(step) is recorded  # the one rule both call


def test_the_master_warns_about_workers_without_a_level() -> None:
    from buildbot_bsdkm.buildbot.trust_levels import warn_without_levels

    text = warn_without_levels([("bsd1", ("freebsd-kmod",)), ("bsd2", ("freebsd-kmod", "trusted"))])
    assert text is not None and "bsd1" in text and "bsd2" not in text
    assert warn_without_levels([("bsd2", ("trusted",))]) is None


def test_local_workers_do_not_inherit_the_masters_secrets(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text("targets: {userspace: null}\nvariants: {noasm: {targets: [userspace]}}\n"
                   "github: {repo: a/b, token_env: BOT_PAT, webhook_secret_env: HOOK_KEY_VALUE}\n")
    env = {"PATH": "/usr/bin", "HOME": "/root", "BSDKM_SHARED": "/work/shared", "BSDKM_CACHE": "/c",
           "GITHUB_TOKEN": "t1", "BSDKM_WEBHOOK_SECRET": "s1", "BOT_PAT": "t2", "HOOK_KEY_VALUE": "s2",
           "BSDKM_OAUTH_SECRET": "s3", "BSDKM_DB_URL": "postgresql://u:p@db/x"}
    got = control.worker_environment(env, also=control.named_secrets(str(cfg)))
    assert got == {"PATH": "/usr/bin", "HOME": "/root", "BSDKM_SHARED": "/work/shared", "BSDKM_CACHE": "/c"}
    # ... and the worker is started with that environment, by either way of starting it.
    monkeypatch.setenv("GITHUB_TOKEN", "from-the-master")
    monkeypatch.setenv("BSDKM_WEBHOOK_SECRET", "from-the-master")
    seen: list[dict[str, str]] = []

    def fake_run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        seen.append(kw["env"])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    class FakePopen:
        def __init__(self, cmd: list[str], **kw: Any) -> None:
            seen.append(kw["env"])

    layout = control.Layout(tmp_path / "m")
    (tmp_path / "m" / "workers" / "local").mkdir(parents=True)
    monkeypatch.setattr(control, "running", lambda path: False)
    monkeypatch.setattr(control.subprocess, "run", fake_run)
    monkeypatch.setattr(control.subprocess, "Popen", FakePopen)
    control.start_worker(layout, "local")
    control.worker_process(layout, "local")
    assert len(seen) == 2
    assert all(e is not None and "GITHUB_TOKEN" not in e and "BSDKM_WEBHOOK_SECRET" not in e for e in seen)
    assert all(e.get("PATH") for e in seen)


def test_the_hook_reads_buildbots_own_worker_and_request_objects() -> None:
    from buildbot.plugins import worker as bb_worker
    from buildbot.process.properties import Properties

    from buildbot_bsdkm.buildbot.trust_levels import worker_may_take

    trusted = bb_worker.Worker("bsd1", "pw", properties={TAGS_PROPERTY: ["freebsd-kmod", "trusted"]})
    slot = type("WFB", (), {"worker": trusted})()
    # A buildset's properties as the controller adds them ({name: (value, source)}).
    untrusted_pr = type("BuildRequest", (), {"properties": Properties.fromDict(
        {PR_NUMBER_PROPERTY: (5, "github"), PR_AUTHOR_TRUSTED_PROPERTY: (False, "github")})})()
    push = type("BuildRequest", (), {"properties": Properties.fromDict({"branch": ("main", "change")})})()
    assert not worker_may_take(slot, untrusted_pr) and worker_may_take(slot, push)
