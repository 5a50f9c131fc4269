"""What a Buildbot user sees: the HTML report as an HTML log, small build properties,
step descriptions. Through Buildbot's own TestBuildStepMixin, with real parsed fixtures."""

from __future__ import annotations

import json
import shutil
import tempfile

from buildbot.process.results import FAILURE, SUCCESS
from test_bb_steps import (
    BENCH,
    FAILING_SELFTEST,
    PASSING_SELFTEST,
    REGRESSION,
    RUN_DIR,
    STEADY,
    StageStepCase,
    results_json,
    shell,
    upload,
)

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.github.aggregate import BuildFacts, runs_of
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import Check, Verdict

SPEEDUP = Check(variant="accel", target="userspace", name="AES-128-GCM-enc", kind="speedup", passed=True,
                message="AES-128-GCM-enc accel is 32.48x noasm (minimum 10x)", value=32.48, unit="x",
                threshold=10.0, detail={"software": "noasm"})


class TestHtmlReportLog(StageStepCase):
    def test_gate_attaches_the_cores_html_report_with_its_chart_as_an_html_log(self):
        verdict = Verdict(checks=[REGRESSION, STEADY, SPEEDUP])
        step = self.make(steps.Gate)
        html_logs: list[tuple[str, str]] = []
        fake = step.addHTMLLog  # the mixin's fake keeps no record of HTML logs: spy on the call

        def add_html_log(name: str, html: str):  # type: ignore[no-untyped-def]
            html_logs.append((name, html))
            return fake(name, html)

        step.addHTMLLog = add_html_log
        state = json.dumps({"target": "userspace", "variant": "accel", "verdict": verdict.to_dict()})
        self.expect_commands(
            shell("gate").stdout(verdict.summary() + "\n").exit(1),
            upload(f"{RUN_DIR}/state.json").upload_string(state).exit(0),
            upload(f"{RUN_DIR}/junit.xml").upload_string("<testsuites/>").exit(0),
            upload(f"{RUN_DIR}/results.json").upload_string(results_json(FAILING_SELFTEST, BENCH)).exit(0),
        )
        self.expect_outcome(result=FAILURE, state_string="gate FAILED: AES-128-GCM-enc \u221231 %")
        d = self.run_step()

        def check(_):
            logs = self.get_nth_step(0).logs
            ((name, text),) = html_logs
            self.assertEqual(name, "report.html")
            self.assertIn("<!DOCTYPE html>", text)
            self.assertIn("<svg", text)  # the speedup chart
            self.assertIn("AES-128-GCM-enc", text)
            self.assertIn("report.md", logs)
        return d.addCallback(check)


class TestSmallProperties(StageStepCase):
    def test_results_document_is_a_file_on_the_master_and_the_property_its_path(self):
        doc = results_json(PASSING_SELFTEST)
        # trial's mktemp() is relative to the working directory, which under pytest is the checkout
        self.master.basedir = tempfile.mkdtemp(prefix="bsdkm-bb-ship-")
        self.addCleanup(shutil.rmtree, self.master.basedir, ignore_errors=True)
        self.make(steps.CollectResults)
        self.expect_commands(shell("collect").exit(0),
                             upload(f"{RUN_DIR}/results.json").upload_string(doc).exit(0))
        self.expect_outcome(result=SUCCESS)
        self.expect_test_result_sets([("self-test userspace/accel", "pass_fail", "boolean")])
        self.expect_test_results([(1000, "1", t.name, None, t.line, None)
                                  for t in parse_file(PASSING_SELFTEST).tests])
        d = self.run_step()

        def check(_):
            props = self.build.getProperties().asDict()
            self.assertNotIn("bsdkm_results", props)
            path = props[steps.RESULTS_PATH_PROPERTY][0]
            with open(path, encoding="utf-8") as fh:
                self.assertEqual(fh.read(), doc)
            self.assertGreater(len(doc), 10_000)  # what used to be a property
            self.assertLess(len(json.dumps({k: v[0] for k, v in props.items()})), 2_000)
            # the GitHub reporter still finds the runs for the PR comment
            (run,) = runs_of(BuildFacts("userspace", "accel", SUCCESS,
                                        properties={steps.RESULTS_PATH_PROPERTY: path}))
            self.assertEqual(len(run.tests), len(parse_file(PASSING_SELFTEST).tests))
        return d.addCallback(check)


def test_step_descriptions_are_words() -> None:
    doing = {cls.stage: cls(variant="v", target="t").description for cls in steps.STAGE_STEPS}
    assert doing == {"fetch": ["fetching"], "configure": ["configuring"], "build": ["building"],
                     "load": ["loading"], "collect": ["collecting"], "unload": ["unloading"],
                     "gate": ["gating"]}
