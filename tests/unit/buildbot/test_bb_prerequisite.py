"""A Buildbot build whose worker lacks a prerequisite: the configure step shows the prerequisite's line
(name, what was found, the fix) as an infrastructure failure, and the bounded retry treats it as any
infrastructure failure (retried on another worker with backoff, then given up on, never green).

The worker's side is real: ``bsdkm-ci stage configure`` runs here with a PATH that has no ``make``,
and what it printed and the ``state.json`` it left are what the step reads back (Buildbot's own
TestBuildStepMixin stands in for the remote command)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from buildbot.process.results import RETRY
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectShell, TestBuildStepMixin
from test_bb_steps import upload
from twisted.trial import unittest

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.contract import failure_from_property
from buildbot_bsdkm.retry.decision import Attempt, AttemptVerdict, RetrySettings, decide

LINE = "make: not found on PATH; fix: install make"
OUT = "bsdkm-out"


def worker_without_make(base: Path) -> tuple[str, str]:
    """``bsdkm-ci stage configure`` of a userspace run on a worker with no make: (its output, state.json)."""
    source = base / "wolfssl"
    source.mkdir(parents=True)
    for name in ("autogen.sh", "configure"):
        (source / name).write_text("#!/bin/sh\nexit 1\n")
        (source / name).chmod(0o755)
    config = base / "bsdkm.yml"
    config.write_text(f"source: {{local: {source}}}\ntargets: {{userspace: null}}\n"
                      f"variants: {{accel: {{targets: [userspace]}}}}\ncache_dir: {base / 'cache'}\n")
    out = base / OUT
    cli = [sys.executable, "-m", "buildbot_bsdkm.cli", "stage"]
    common = ["--variant", "accel", "--target", "userspace", "--out", str(out), "--config", str(config)]
    subprocess.run([*cli, "fetch", *common], capture_output=True, text=True, timeout=300, check=True)
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcc").symlink_to(shutil.which("gcc") or "/usr/bin/gcc")
    env = {k: v for k, v in os.environ.items() if k != "CC"} | {"PATH": str(bin_dir)}
    proc = subprocess.run([*cli, "configure", *common], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr, (out / "userspace" / "accel" / "state.json").read_text()


class TestMissingPrerequisite(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def test_the_step_shows_the_prerequisites_line_as_infrastructure_and_retries_boundedly(self):
        base = Path(tempfile.mkdtemp(prefix="bsdkm-prereq-"))
        self.addCleanup(shutil.rmtree, base, True)
        output, state = worker_without_make(base)
        assert LINE in output
        self.setup_step(steps.Configure(variant="accel", target="userspace", out_dir=OUT))
        command = ["bsdkm-ci", "stage", "configure", "--variant", "accel", "--target", "userspace",
                   "--out", OUT]
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=command).stdout(output).exit(1),
            upload(f"{OUT}/userspace/accel/state.json").upload_string(state).exit(0))
        summary = f"configure infrastructure (worker-setup): {LINE}"
        self.expect_outcome(result=RETRY, state_string=summary)
        d = self.run_step()

        def check(_):
            step = self.get_nth_step(0)
            self.assertEqual(step.getResultSummary(), {"step": summary, "build": summary})
            failure = failure_from_property(self.build.getProperty("bsdkm_failure"))
            self.assertEqual((failure.stage, failure.category.value, failure.reason, failure.message),
                             ("configure", "infrastructure", "worker-setup", LINE))
            # Each worker that lacks it fails the same way: retried like any infrastructure failure, on
            # another worker with backoff, then given up on as infrastructure, never passed.
            settings = RetrySettings(max_infra_retries=2, backoff_s=(30.0, 120.0))
            history = [Attempt.failing(1, "w1", failure)]
            first = decide(history, settings)
            self.assertEqual((first.retry, first.delay_s, first.avoid_workers), (True, 30.0, ("w1",)))
            history += [Attempt.failing(2, "w2", failure), Attempt.failing(3, "w1", failure)]
            last = decide(history, settings)
            self.assertEqual((last.retry, last.verdict), (False, AttemptVerdict.INFRASTRUCTURE))
            self.assertIn(LINE, last.history[-1].describe())
        return d.addCallback(check)
