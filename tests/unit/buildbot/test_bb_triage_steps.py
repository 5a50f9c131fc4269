"""The steps of a PR build of a target that measures no base, with no base outcome recorded: the
base is built and loaded too, for correctness (Buildbot's TestBuildStepMixin, fake commands)."""

from __future__ import annotations

import json

from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.steps import ExpectRmdir, ExpectShell
from test_bb_steps import StageStepCase, failure_doc, upload

from buildbot_bsdkm.buildbot import steps

OUT = "bsdkm-out"
TARGET, VARIANT = "freebsd-kmod-qemu", "intelasm"
RUN_DIR = f"{OUT}/{TARGET}/{VARIANT}"
BASE, HEAD, CLONE_URL = "b" * 40, "c" * 40, "https://github.com/someone/wolfssl.git"
PANIC = "debug kernel: kernel panic: panic: malloc: called with spinlock or critical section held"


def cmd(stage: str, *extra: str) -> list[str]:
    return ["bsdkm-ci", "stage", stage, "--variant", VARIANT, "--target", TARGET, "--out", OUT, *extra]


class TestCorrectnessBase(StageStepCase):
    def make_kernel(self, cls: type[steps.BsdkmStageStep], *, correctness: bool) -> steps.BsdkmStageStep:
        step = self.setup_step(cls(variant=VARIANT, target=TARGET, out_dir=OUT))
        for name, value in (("github_pr", 7), ("github_head_sha", HEAD), ("repository", CLONE_URL),
                            ("github_base_sha", BASE)):
            self.build.setProperty(name, value, "test")
        if correctness:
            self.build.setProperty("bsdkm_base_correctness", True, "test")
        return step

    def test_fetch_with_no_recorded_outcome_fetches_the_base_too(self):
        self.make_kernel(steps.FetchSource, correctness=False)
        self.expect_commands(
            ExpectRmdir(dir=f"wkdir/{OUT}", log_environ=True).exit(0),
            ExpectShell(workdir="wkdir", command=cmd("fetch", "--source-git", CLONE_URL, "--source-ref",
                                                     "refs/pull/7/head", "--source-commit", HEAD))
            .stdout(f"fetch ok: {TARGET}/{VARIANT}\n").exit(0),
            ExpectShell(workdir="wkdir", command=cmd("fetch", "--side", "base", "--source-git", CLONE_URL,
                                                     "--source-ref", BASE, "--source-commit", BASE))
            .log("base", stdout="fetch ok\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string=f"fetch ok: {TARGET}/{VARIANT}; base too")
        self.expect_property("bsdkm_base_correctness", True)
        return self.run_step()

    def test_load_loads_the_base_after_a_head_that_panicked(self):
        self.make_kernel(steps.LoadModule, correctness=True)
        state = {"target": TARGET, "variant": VARIANT, "stages": {"load": 1.0},
                 "failure": failure_doc("load", "panic", PANIC)}
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=cmd("load")).stdout(f"FAILED load: {PANIC}\n").exit(1),
            upload(f"{RUN_DIR}/state.json").upload_string(json.dumps(state)).exit(0),
            ExpectShell(workdir="wkdir", command=cmd("load", "--side", "base"))  # loaded, not measured
            .log("base", stdout=f"FAILED load: {PANIC}\n").exit(1),
            upload(f"{OUT}/base/{TARGET}/{VARIANT}/state.json").upload_string(json.dumps(state)).exit(0))
        self.expect_outcome(result=FAILURE)
        return self.run_step()

    def test_gate_judges_with_the_base_built_for_correctness(self):
        step = self.make_kernel(steps.Gate, correctness=True)
        assert step.stage_command()[-2:] == ["--base-out", f"{OUT}/base"]
        assert "--base-out" not in self.make_kernel(steps.LoadModule, correctness=True).stage_command()
