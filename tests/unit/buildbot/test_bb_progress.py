"""A stage step's summary follows the stage's progress lines while it runs (Buildbot's own log
observer, the core's reading of the line), and ends on what the stage concluded.

The remote command is Buildbot's fake (TestBuildStepMixin); the lines it "prints" are the ones the
real stage prints (``Job.reached``).
"""

from __future__ import annotations

from pathlib import Path

from buildbot.process.results import SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectShell, TestBuildStepMixin
from conftest import ROOT
from twisted.trial import unittest

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.contract import BASE_SIDE, Milestone
from buildbot_bsdkm.pipeline.job import Job

OUT = "bsdkm-out"


def stage_lines(tmp: Path, *said: tuple[Milestone, tuple[int, int] | None, str]) -> str:
    """What ``bsdkm-ci stage`` prints for these milestones (each: milestone, round, side)."""
    lines: list[str] = []
    config = load_config(ROOT / "bsdkm.yml")
    for milestone, rnd, side in said:
        lines.append("[   1.0s] userspace/noasm: a line of the stage's that is no milestone")
        Job(config, "userspace", "noasm", tmp, progress=lines.append, side=side).reached(milestone, rnd)
    return "\n".join(lines) + "\n"


class ProgressCase(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def watched(self, cls: type[steps.BsdkmStageStep]) -> list[str]:
        """The step, set up; the summaries it shows each time it asks for its summary to be updated."""
        step = self.setup_step(cls(variant="noasm", target="userspace", out_dir=OUT))
        shown: list[str] = []
        update = step.updateSummary

        def record() -> None:
            shown.append(step.getCurrentSummary()["step"])
            update()

        step.updateSummary = record
        return shown

    def test_a_load_shows_each_milestone_as_it_comes_then_its_conclusion(self):
        shown = self.watched(steps.LoadModule)
        said = [(Milestone.LOADING, None, BASE_SIDE), (Milestone.SELF_TEST, None, BASE_SIDE),
                (Milestone.BENCHMARK, (1, 3), BASE_SIDE), (Milestone.LOADING, None, ""),
                (Milestone.SELF_TEST, None, ""), (Milestone.BENCHMARK, (1, 3), ""),
                (Milestone.BENCHMARK, (2, 3), BASE_SIDE), (Milestone.BENCHMARK, (2, 3), "")]
        tmp = Path(self.mktemp())
        tmp.mkdir()
        command = ExpectShell(workdir="wkdir", command=["bsdkm-ci", "stage", "load", "--variant", "noasm",
                                                        "--target", "userspace", "--out", OUT])
        for one in said:  # each chunk as the worker sends it
            command = command.stderr(stage_lines(tmp, one))
        command = command.stderr("[   9.0s] userspace/noasm: load ok (9.0 s)\n")
        self.expect_commands(command.stdout("load ok: userspace/noasm (state: x)\n").exit(0))
        # once it is done, the stage's own concluding line (stdout), no milestone
        self.expect_outcome(result=SUCCESS, state_string="load ok: userspace/noasm")
        d = self.run_step()

        def check(_):
            changes = [s for i, s in enumerate(shown) if i == 0 or s != shown[i - 1]]
            # first: the stage's own word, before any line came
            assert changes == ["loading", "loading (base)", "self-test (base)",
                               "benchmark round 1 of 3 (base)", "loading", "self-test",
                               "benchmark round 1 of 3",
                               "benchmark round 2 of 3 (base)", "benchmark round 2 of 3"], shown
        return d.addCallback(check)

    def test_before_its_first_milestone_a_step_shows_what_its_stage_does(self):
        step = self.setup_step(steps.Build(variant="noasm", target="userspace", out_dir=OUT))
        assert step.getCurrentSummary() == {"step": "building"}
