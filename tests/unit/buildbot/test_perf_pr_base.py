"""A PR build gets its base commit from the webhook (``pull_request.base.sha``) and builds it next to
the head: controller → Buildbot's build properties → the steps' command lines; and
the master config hands every step the config's ``benchmark.repeats``.
"""

from __future__ import annotations

from types import SimpleNamespace

from buildbot.process import buildstep
from conftest import ROOT
from test_bb_master_config import LOCAL
from test_gh_pr_source import CLONE_URL, build_properties, pr_buildset

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.buildbot.master_config import buildmaster_config
from buildbot_bsdkm.config.bsdkm_yml import load_config, parse_config
from buildbot_bsdkm.github.events import pull_request_from

BASE = "d" * 40


def webhook_pull(base_sha: object = BASE) -> dict:
    return {"number": 42, "head": {"sha": "c" * 40, "repo": {"full_name": "someone/wolfssl"}},
            "base": {"ref": "master", "sha": base_sha}, "user": {"login": "someone"},
            "author_association": "CONTRIBUTOR", "html_url": "https://github.com/wolfSSL/wolfssl/pull/42"}


def step_for(cls: type[steps.BsdkmStageStep], props) -> steps.BsdkmStageStep:
    step = buildstep.create_step_from_step_or_factory(cls(variant="accel", target="userspace", repeats=4))
    step.setBuild(SimpleNamespace(getProperties=lambda: props, master=None))
    return step


def test_pr_build_builds_and_measures_the_payloads_base_commit() -> None:
    props = build_properties(pr_buildset(pull_request_from(webhook_pull(), "wolfSSL/wolfssl")))
    assert props.getProperty(steps.PR_BASE_SHA_PROPERTY) == BASE
    fetch = step_for(steps.FetchSource, props)
    assert fetch.base_command()[-10:] == ["--out", "bsdkm-out", "--side", "base", "--source-git", CLONE_URL,
                                         "--source-ref", BASE, "--source-commit", BASE]
    assert step_for(steps.Build, props).base_command()[-4:] == ["--out", "bsdkm-out", "--side", "base"]
    assert step_for(steps.LoadModule, props).stage_command()[-4:] == ["--base-out", "bsdkm-out/base",
                                                                       "--repeats", "4"]
    assert step_for(steps.Gate, props).stage_command()[-2:] == ["--base-out", "bsdkm-out/base"]


def test_a_payload_base_that_is_not_a_sha_leaves_the_build_on_history() -> None:
    for bad in (None, "master", "-x" * 20, 12):
        pull = pull_request_from(webhook_pull(bad), "wolfSSL/wolfssl")
        assert pull.base_sha == ""
        props = build_properties(pr_buildset(pull))
        assert step_for(steps.LoadModule, props).base_sha() is None
        assert "--base-out" not in step_for(steps.Gate, props).stage_command()


def test_every_step_gets_the_configs_repeats_and_load_has_time_for_them() -> None:
    text = (ROOT / "bsdkm.yml").read_text()
    assert "  repeats: 5  " in text
    cfg = parse_config(text.replace("  repeats: 5  ", "  repeats: 9  "), "bsdkm.yml", ROOT)
    assert cfg.benchmark.repeats == 9 and load_config(ROOT / "bsdkm.yml").benchmark.repeats == 5
    builders = [b for b in buildmaster_config(cfg, LOCAL)["builders"] if b.name == "userspace/noasm"]
    (load,) = [s for s in builders[0].factory.steps if s.step_class is steps.LoadModule]
    assert load.kwargs["repeats"] == 9
    assert load.kwargs["maxTime"] >= 2 * 15 * cfg.timeout("benchmark")  # room for max_repeats' rounds
    more = parse_config(text.replace("  max_repeats: 15 ", "  max_repeats: 40 "), "bsdkm.yml", ROOT)
    builders = [b for b in buildmaster_config(more, LOCAL)["builders"] if b.name == "userspace/noasm"]
    (load,) = [s for s in builders[0].factory.steps if s.step_class is steps.LoadModule]
    assert load.kwargs["maxTime"] >= 2 * 40 * cfg.timeout("benchmark")
