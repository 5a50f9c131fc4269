"""Every stage step's success and failure paths, through Buildbot's own TestBuildStepMixin.

The remote commands are Buildbot's fakes (that is what the mixin is for); what the
worker "prints" and the results documents it "uploads" are real: real wolfSSL output
from the shared fixtures, parsed by the real parsers into real ``results.json`` text.
"""

from __future__ import annotations

import json
from pathlib import Path

from buildbot.process import remotetransfer
from buildbot.process.results import FAILURE, RETRY, SKIPPED, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import (
    ExpectRemoteRef,
    ExpectRmdir,
    ExpectShell,
    ExpectUploadFile,
    TestBuildStepMixin,
)
from conftest import FIXTURES, fixture_text
from twisted.trial import unittest

from buildbot_bsdkm.buildbot import steps
from buildbot_bsdkm.buildbot.worker_files import limit_for
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import Check, Verdict

OUT = "bsdkm-out"
RUN_DIR = f"{OUT}/userspace/accel"
FAILING_SELFTEST = FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt"
PASSING_SELFTEST = FIXTURES / "userspace/accel/testwolfcrypt.txt"
BENCH = FIXTURES / "userspace/accel/bench_default.txt"


def stage_cmd(stage: str) -> list[str]:
    return ["bsdkm-ci", "stage", stage, "--variant", "accel", "--target", "userspace", "--out", OUT,
            "--config", "/etc/bsdkm.yml"]


def shell(stage: str) -> ExpectShell:
    return ExpectShell(workdir="wkdir", command=stage_cmd(stage))


def upload(path: str) -> ExpectUploadFile:
    return ExpectUploadFile(workersrc=path, workdir="wkdir", blocksize=32768, maxsize=limit_for(path) + 1,
                            writer=ExpectRemoteRef(remotetransfer.StringFileWriter))


def state_upload(failure: dict | None, *ran: str, run_dir: str = RUN_DIR) -> ExpectUploadFile:
    """The state.json a failed ``bsdkm-ci stage`` leaves: the stages that ran, the failure it recorded."""
    doc = {"target": "userspace", "variant": "accel", "stages": dict.fromkeys(ran, 1.0), "failure": failure}
    return upload(f"{run_dir}/state.json").upload_string(json.dumps(doc)).exit(0)


def failure_doc(stage: str, reason: str, message: str, *evidence: str, category: str = "real") -> dict:
    return {"stage": stage, "message": message, "category": category, "reason": reason,
            "evidence": list(evidence)}


def results_json(*logs: Path) -> str:
    run = RunResult(variant="accel", target="userspace", logs=[parse_file(p) for p in logs])
    return to_json([run])


class StageStepCase(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        return self.setup_test_build_step()

    def expect_config_source_fetch(self) -> None:
        """fetch empties the output directory, then runs with no source arguments, and succeeds."""
        self.expect_commands(
            ExpectRmdir(dir=f"wkdir/{OUT}", log_environ=True).exit(0),
            shell("fetch").stdout("fetch ok: userspace/accel (state: x)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="fetch ok: userspace/accel")

    def make(self, cls: type[steps.BsdkmStageStep], **kw) -> steps.BsdkmStageStep:
        return self.setup_step(cls(variant="accel", target="userspace", out_dir=OUT,
                                   config_path="/etc/bsdkm.yml", **kw))


class TestSimpleStages(StageStepCase):
    """fetch/configure/build/load/unload: success shows what the stage said; failures are classified."""

    def test_every_simple_stage_succeeds_with_its_last_line_as_summary(self):
        for cls in (steps.Configure, steps.Build, steps.LoadModule, steps.UnloadModule):
            self.make(cls)
            self.expect_commands(
                shell(cls.stage).stdout(f"{cls.stage} ok: userspace/accel (state: {RUN_DIR}/state.json)\n")
                .exit(0))
            self.expect_outcome(result=SUCCESS, state_string=f"{cls.stage} ok: userspace/accel")
        return self.run_step()

    def test_fetch_starts_from_an_empty_output_directory(self):
        self.make(steps.FetchSource)
        self.expect_config_source_fetch()
        return self.run_step()

    def test_the_workers_own_classification_is_used_with_its_evidence(self):
        self.make(steps.LoadModule)
        self.expect_commands(shell("load").stdout(
            "FAILED load category=real reason=selftest: self-test failed: ECC (error -216)\n"
            f"  evidence: {RUN_DIR}/test.log\n").exit(1),
            state_upload(failure_doc("load", "selftest", "self-test failed: ECC (error -216)",
                                     f"{RUN_DIR}/test.log"), "fetch", "configure", "build", "load"))
        self.expect_outcome(result=FAILURE,
                            state_string="load failed (selftest): self-test failed: ECC (error -216)")
        self.expect_property("bsdkm_failure", {"stage": "load", "category": "real", "reason": "selftest",
                                               "message": "self-test failed: ECC (error -216)",
                                               "evidence": [f"{RUN_DIR}/test.log"]})
        return self.run_step()

    def test_stage_skipped_after_an_earlier_failure_is_skipped_not_failed(self):
        self.make(steps.UnloadModule)
        self.expect_commands(shell("unload").stderr(
            "bsdkm-ci stage unload: userspace/accel: skipped, stage 'load' failed: self-test failed\n")
            .exit(1),
            state_upload(failure_doc("load", "selftest", "self-test failed"), "fetch", "configure", "build",
                         "load"))
        self.expect_outcome(result=SKIPPED, state_string="unload: skipped (load failed)")
        self.expect_no_property("bsdkm_failure")
        return self.run_step()

    def test_compile_error_is_a_real_failure_and_halts(self):
        self.make(steps.Build)
        self.expect_commands(
            shell("build").stdout("wolfcrypt/src/aes.c:123:5: error: 'x' undeclared\n"
                                  "make: *** [Makefile:100: all] Error 2\n").exit(1),
            state_upload(failure_doc("build", "compile", "compile failed: wolfcrypt/src/aes.c:123:5: error: "
                                     "'x' undeclared"), "fetch", "configure", "build"))
        self.expect_outcome(result=FAILURE)
        d = self.run_step()

        def check(_):
            f = self.build.getProperty("bsdkm_failure")
            self.assertEqual(f["stage"], "build")
            self.assertEqual(f["category"], "real")
            self.assertTrue(self.get_nth_step(0).haltOnFailure)
        return d.addCallback(check)

    def test_network_failure_during_fetch_is_infrastructure_and_asks_for_retry(self):
        self.make(steps.FetchSource)
        self.expect_commands(
            ExpectRmdir(dir=f"wkdir/{OUT}", log_environ=True).exit(0),
            shell("fetch").stderr("curl: (6) Could not resolve host: deb.debian.org\n"
                                  "bsdkm-ci stage: fetch failed: network error\n").exit(2))
        self.expect_outcome(result=RETRY)
        d = self.run_step()

        def check(_):
            f = self.build.getProperty("bsdkm_failure")
            self.assertEqual((f["stage"], f["category"], f["reason"]), ("fetch", "infrastructure", "network"))
            summary = self.get_nth_step(0).stage_summary
            self.assertIn("fetch infrastructure (network)", summary)
        return d.addCallback(check)

    def test_load_killed_by_the_time_limit_after_complete_output_is_infrastructure(self):
        self.make(steps.LoadModule, maxTime=600)
        bench = fixture_text("userspace/accel/bench_default.txt")
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=stage_cmd("load"), max_time=600)
            .stdout(bench).update("failure_reason", "timeout").exit(-1))
        self.expect_outcome(result=RETRY)
        d = self.run_step()

        def check(_):
            f = self.build.getProperty("bsdkm_failure")
            self.assertEqual((f["category"], f["reason"]), ("infrastructure", "hung-after-complete"))
        return d.addCallback(check)

    def test_load_timing_out_mid_benchmark_is_real(self):
        self.make(steps.LoadModule, maxTime=600)
        cut = fixture_text("userspace/accel/bench_timeout3_KILL.txt")
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=stage_cmd("load"), max_time=600)
            .stdout(cut).update("failure_reason", "timeout").exit(-1))
        self.expect_outcome(result=FAILURE)
        d = self.run_step()

        def check(_):
            f = self.build.getProperty("bsdkm_failure")
            self.assertEqual((f["category"], f["reason"]), ("real", "load-timeout"))
            self.assertIn("load failed (load-timeout)", self.get_nth_step(0).stage_summary)
        return d.addCallback(check)

    def test_unload_runs_even_after_a_failure_and_does_not_halt(self):
        step = self.make(steps.UnloadModule)
        self.assertTrue(step.alwaysRun)
        self.assertFalse(step.haltOnFailure)
        self.expect_commands(shell("unload").stdout("kldunload: can't find file libwolfssl\n").exit(1),
                             state_upload(failure_doc("unload", "unload", "unload failed: kldunload: can't "
                                                      "find file libwolfssl"), "load", "collect", "unload"))
        self.expect_outcome(result=FAILURE)
        return self.run_step()

    def test_command_without_config_omits_the_option(self):
        self.setup_step(steps.Configure(variant="noasm", target="userspace", out_dir=OUT))
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=["bsdkm-ci", "stage", "configure", "--variant", "noasm",
                                                  "--target", "userspace", "--out", OUT]).exit(0))
        self.expect_outcome(result=SUCCESS, state_string="configure: done")
        return self.run_step()


class TestWorkerReport(StageStepCase):
    """A failed stage's report is its state.json, not what it printed."""

    def test_the_record_in_state_json_is_used_whatever_the_stage_printed(self):
        # Printed alone, "Connection reset by peer" would read as a network problem.
        self.make(steps.LoadModule)
        self.expect_commands(
            shell("load").stdout("Connection reset by peer\n").exit(1),
            state_upload(failure_doc("selftest", "selftest", "self-test failed: ECC (error -216)",
                                     f"{RUN_DIR}/test.log"), "fetch", "configure", "build", "load"))
        self.expect_outcome(result=FAILURE,
                            state_string="load failed (selftest): self-test failed: ECC (error -216)")
        self.expect_property("bsdkm_failure", failure_doc("selftest", "selftest",
                                                          "self-test failed: ECC (error -216)",
                                                          f"{RUN_DIR}/test.log"))
        return self.run_step()

    def test_state_json_that_never_reaches_the_master_is_logs_lost(self):
        self.make(steps.Build)
        self.expect_commands(
            shell("build").stdout("FAILED build category=real reason=compile: error: x\n").exit(1),
            upload(f"{RUN_DIR}/state.json").exit(1))
        self.expect_outcome(result=RETRY)
        d = self.run_step()

        def check(_):
            f = self.build.getProperty("bsdkm_failure")
            self.assertEqual((f["stage"], f["category"], f["reason"]),
                             ("build", "infrastructure", "logs-lost"))
            self.assertIn(f"{RUN_DIR}/state.json could not be read back",
                          self.get_nth_step(0).logs["state-error"].stdout)
        return d.addCallback(check)

    def test_garbled_state_json_is_logs_lost_and_named(self):
        self.make(steps.Configure)
        bad = json.dumps({"stages": {"configure": 1.0}, "failure": {"stage": "configure", "category": "odd",
                                                                     "message": "m"}})
        self.expect_commands(
            shell("configure").exit(1),
            upload(f"{RUN_DIR}/state.json").upload_string(bad).exit(0))
        self.expect_outcome(result=RETRY)
        d = self.run_step()

        def check(_):
            self.assertEqual(self.build.getProperty("bsdkm_failure")["reason"], "logs-lost")
            self.assertIn("unknown category 'odd'", self.get_nth_step(0).logs["state-error"].stdout)
        return d.addCallback(check)

    def test_a_gate_after_an_earlier_infrastructure_failure_is_not_retried_for_it(self):
        # state.json still holds load's failure: the gate's own failed verdict is the gate's.
        verdict = Verdict(checks=[REGRESSION])
        doc = {"stages": {"load": 1.0, "collect": 1.0, "gate": 1.0}, "verdict": verdict.to_dict(),
               "failure": failure_doc("load", "worker-setup", "no kernel", category="infrastructure")}
        self.make(steps.Gate)
        self.expect_commands(
            shell("gate").stdout(verdict.summary() + "\n").exit(1),
            upload(f"{RUN_DIR}/state.json").upload_string(json.dumps(doc)).exit(0),
            upload(f"{RUN_DIR}/junit.xml").exit(1),
            upload(f"{RUN_DIR}/results.json").exit(1))
        self.expect_outcome(result=FAILURE)
        d = self.run_step()
        d.addCallback(lambda _: self.assertEqual(self.build.getProperty("bsdkm_failure")["stage"], "gate"))
        return d


class TestCollectResults(StageStepCase):
    def test_failed_selftest_reaches_the_test_result_api_and_the_summary(self):
        doc = results_json(FAILING_SELFTEST, BENCH)
        self.make(steps.CollectResults)
        self.expect_commands(
            shell("collect").stdout("results: userspace/accel\n").exit(1),
            upload(f"{RUN_DIR}/results.json").upload_string(doc).exit(0),
            state_upload(failure_doc("load", "selftest", "self-test failed: PWDBASED (error -125)"),
                         "load", "collect"),
        )
        self.expect_outcome(result=FAILURE)
        parsed_tests = parse_file(FAILING_SELFTEST).tests
        bench = parse_file(BENCH)
        units = sorted({b.unit for b in bench.benchmarks if not b.failed})
        sets = [("self-test userspace/accel", "pass_fail", "boolean")]
        sets += [("benchmark userspace/accel", "performance", u) for u in dict.fromkeys(
            b.unit for b in bench.benchmarks if not b.failed)]
        self.expect_test_result_sets(sets)
        results = [(1000, "1" if t.passed else "0", t.name, None, t.line, None) for t in parsed_tests]
        for i, unit in enumerate(dict.fromkeys(b.unit for b in bench.benchmarks if not b.failed)):
            results += [(1001 + i, f"{b.value:g}", b.name, None, b.line, None)
                        for b in bench.benchmarks if b.unit == unit and not b.failed]
        self.expect_test_results(results)
        d = self.run_step()

        def check(_):
            step = self.get_nth_step(0)
            # 71 self-test lines in the real log, PWDBASED failed with code -125.
            self.assertEqual(len(parsed_tests), 71)
            self.assertIn("self-test: 70/71 passed (PWDBASED failed -125)", step.stage_summary)
            self.assertEqual(self.build.getProperty("bsdkm_selftest"),
                             "self-test: 70/71 passed (PWDBASED failed -125)")
            self.assertEqual(self.build.getProperty("bsdkm_benchmarks"), len(bench.benchmarks))
            self.assertEqual(self.build.getProperty("bsdkm_failure")["category"], "real")
            self.assertIn("MiB/s", units)
        return d.addCallback(check)

    def test_passing_run_is_success_with_counts(self):
        doc = results_json(PASSING_SELFTEST)
        n = len(parse_file(PASSING_SELFTEST).tests)
        self.make(steps.CollectResults)
        self.expect_commands(
            shell("collect").exit(0),
            upload(f"{RUN_DIR}/results.json").upload_string(doc).exit(0),
        )
        self.expect_outcome(result=SUCCESS, state_string=f"self-test: {n}/{n} passed")
        self.expect_test_result_sets([("self-test userspace/accel", "pass_fail", "boolean")])
        self.expect_test_results([(1000, "1", t.name, None, t.line, None)
                                  for t in parse_file(PASSING_SELFTEST).tests])
        return self.run_step()

    def test_results_missing_on_the_worker_is_logs_lost_infrastructure(self):
        self.make(steps.CollectResults)
        self.expect_commands(shell("collect").exit(0), upload(f"{RUN_DIR}/results.json").exit(1))
        self.expect_outcome(result=RETRY)
        d = self.run_step()
        d.addCallback(lambda _: self.assertEqual(self.build.getProperty("bsdkm_failure")["reason"],
                                                 "logs-lost"))
        return d

    def test_garbage_results_document_is_named_and_not_an_exception(self):
        self.make(steps.CollectResults)
        self.expect_commands(
            shell("collect").exit(0),
            upload(f"{RUN_DIR}/results.json").upload_string(fixture_text("userspace/accel/bench_default.txt")[:300])
            .exit(0),
        )
        self.expect_outcome(result=RETRY)
        d = self.run_step()

        def check(_):
            err = self.get_nth_step(0).logs["results-error"].stdout
            self.assertIn(f"{RUN_DIR}/results.json: not JSON", err)
        return d.addCallback(check)


def state_doc(verdict: Verdict) -> str:
    return json.dumps({"target": "userspace", "variant": "accel", "verdict": verdict.to_dict()})


REGRESSION = Check(
    variant="accel", target="userspace", name="AES-128-GCM-enc", kind="regression", passed=False,
    message="AES-128-GCM-enc: 3127 MiB/s is 31.2 % below the baseline 4545 MiB/s", value=3127.0,
    unit="MiB/s", baseline=4545.0, delta_pct=-31.2, threshold=10.0)
STEADY = Check(variant="accel", target="userspace", name="SHA-256", kind="regression", passed=True,
               message="SHA-256 within 10 %", delta_pct=-1.0, threshold=10.0)


class TestGate(StageStepCase):
    def expect_reports(self, verdict: Verdict, results: str | None):
        return [
            upload(f"{RUN_DIR}/state.json").upload_string(state_doc(verdict)).exit(0),
            upload(f"{RUN_DIR}/junit.xml").upload_string("<testsuites/>").exit(0),
            upload(f"{RUN_DIR}/results.json").upload_string(results).exit(0) if results
            else upload(f"{RUN_DIR}/results.json").exit(1),
        ]

    def test_regression_sets_verdict_and_regressions_properties_and_attaches_reports(self):
        verdict = Verdict(checks=[REGRESSION, STEADY])
        self.make(steps.Gate)
        self.expect_commands(shell("gate").stdout(verdict.summary() + "\n").exit(1),
                             *self.expect_reports(verdict, results_json(FAILING_SELFTEST, BENCH)))
        self.expect_outcome(result=FAILURE, state_string="gate FAILED: AES-128-GCM-enc \u221231 %")
        self.expect_property("bsdkm_verdict", "failed")
        self.expect_property("bsdkm_regressions", ["AES-128-GCM-enc \u221231 %"])
        self.expect_log_file("junit.xml", "<testsuites/>")
        d = self.run_step()

        def check(_):
            report = self.get_nth_step(0).logs["report.md"].stdout
            self.assertIn("AES-128-GCM-enc", report)  # the core's Markdown report names the regression
            self.assertEqual(self.build.getProperty("bsdkm_failure")["stage"], "gate")
        return d.addCallback(check)

    def test_pass(self):
        verdict = Verdict(checks=[STEADY])
        self.make(steps.Gate)
        self.expect_commands(shell("gate").stdout(verdict.summary() + "\n").exit(0),
                             *self.expect_reports(verdict, None))
        self.expect_outcome(result=SUCCESS, state_string="gate passed (PASS: 1 check passed)")
        self.expect_property("bsdkm_verdict", "passed")
        self.expect_property("bsdkm_regressions", [])
        return self.run_step()

    def test_unusable_state_file_is_logged(self):
        self.make(steps.Gate)
        self.expect_commands(
            shell("gate").exit(0),
            upload(f"{RUN_DIR}/state.json").upload_string("{truncated").exit(0),
        )
        self.expect_outcome(result=SUCCESS, state_string="gate passed")
        self.expect_no_property("bsdkm_verdict")
        d = self.run_step()
        d.addCallback(lambda _: self.assertIn("state.json: not JSON",
                                              self.get_nth_step(0).logs["verdict-error"].stdout))
        return d


class TestFetchSourceOfPullRequests(StageStepCase):
    """A PR build fetches the PR's head; any other build the config's source."""

    CLONE_URL = "https://github.com/wolfSSL/wolfssl.git"

    def pr_properties(self) -> None:
        # What github/controller.py's buildset gives a PR build (repository via its sourcestamp).
        for name, value in (("github_pr", 42), ("github_head_sha", "a" * 40),
                            ("branch", "refs/pull/42/head"), ("revision", "a" * 40),
                            ("repository", self.CLONE_URL)):
            self.build.setProperty(name, value, "test")

    def test_pr_build_fetches_the_pr_head_ref_of_its_repository(self):
        self.make(steps.FetchSource)
        self.pr_properties()
        self.expect_commands(
            ExpectRmdir(dir=f"wkdir/{OUT}", log_environ=True).exit(0),
            ExpectShell(workdir="wkdir", command=[
                *stage_cmd("fetch"), "--source-git", self.CLONE_URL, "--source-ref", "refs/pull/42/head",
                "--source-commit", "a" * 40,
            ]).stdout("fetch ok: userspace/accel (state: x)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="fetch ok: userspace/accel")
        return self.run_step()

    def test_build_without_pr_properties_keeps_the_config_source(self):
        self.make(steps.FetchSource)
        # A branch build has a repository too: without a PR number it is not a PR build.
        self.build.setProperty("repository", self.CLONE_URL, "test")
        self.expect_config_source_fetch()
        return self.run_step()

    def test_later_stages_of_a_pr_build_take_no_source_arguments(self):
        self.make(steps.Build)
        self.pr_properties()
        self.expect_commands(shell("build").stdout("build ok: userspace/accel (state: x)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="build ok: userspace/accel")
        return self.run_step()


class TestPullRequestBase(StageStepCase):
    """A PR build with its base commit builds the base beside the head and measures them interleaved."""

    CLONE_URL = "https://github.com/wolfSSL/wolfssl.git"
    BASE = "b" * 40
    BASE_OUT = f"{OUT}/base"

    def pr_properties(self, base: str | None = BASE) -> None:
        for name, value in (("github_pr", 42), ("github_head_sha", "a" * 40), ("repository", self.CLONE_URL),
                            ("github_base_sha", base)):
            if value is not None:
                self.build.setProperty(name, value, "test")

    def base_cmd(self, stage: str) -> list[str]:
        return [*stage_cmd(stage), "--side", "base"]

    def test_fetch_fetches_the_base_commit_after_the_head_into_its_own_directory(self):
        self.make(steps.FetchSource)
        self.pr_properties()
        self.expect_commands(
            ExpectRmdir(dir=f"wkdir/{OUT}", log_environ=True).exit(0),
            ExpectShell(workdir="wkdir", command=[
                *stage_cmd("fetch"), "--source-git", self.CLONE_URL, "--source-ref", "refs/pull/42/head",
                "--source-commit", "a" * 40]).stdout("fetch ok: userspace/accel (state: x)\n").exit(0),
            ExpectShell(workdir="wkdir", command=[
                *self.base_cmd("fetch"), "--source-git", self.CLONE_URL, "--source-ref", self.BASE,
                "--source-commit", self.BASE])
            .log("base", stdout="fetch ok: userspace/accel (state: y)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="fetch ok: userspace/accel; base too")
        return self.run_step()

    def test_a_failed_base_build_does_not_fail_the_pr_build_and_is_named(self):
        self.make(steps.Build)
        self.pr_properties()
        self.expect_commands(
            shell("build").stdout("build ok: userspace/accel (state: x)\n").exit(0),
            ExpectShell(workdir="wkdir", command=self.base_cmd("build"))
            .log("base", stdout="FAILED build category=real reason=compile: error: x\n").exit(1),
            state_upload(failure_doc("build", "compile", "compile failed: error: x"), "fetch", "configure",
                         "build", run_dir=f"{self.BASE_OUT}/userspace/accel"))
        self.expect_outcome(result=SUCCESS,
                            state_string="build ok: userspace/accel; base build failed (compile)")
        d = self.run_step()
        d.addCallback(lambda _: self.assertIn('"reason": "compile"',
                                              self.get_nth_step(0).logs["base-failure"].stdout))
        return d

    def test_a_base_stage_skipped_after_its_failed_fetch_says_so(self):
        self.make(steps.Configure)
        self.pr_properties()
        self.expect_commands(
            shell("configure").stdout("configure ok: userspace/accel (state: x)\n").exit(0),
            ExpectShell(workdir="wkdir", command=self.base_cmd("configure")).log("base", stderr=(
                "bsdkm-ci stage configure: userspace/accel: skipped, stage 'fetch' failed: no such commit\n"))
            .exit(1),
            state_upload(failure_doc("fetch", "integrity", "no such commit"), "fetch",
                         run_dir=f"{self.BASE_OUT}/userspace/accel"))
        self.expect_outcome(result=SUCCESS,
                            state_string="configure ok: userspace/accel; base skipped (fetch failed)")
        return self.run_step()

    def test_a_failed_head_stage_does_not_build_the_base(self):
        self.make(steps.Configure)
        self.pr_properties()
        self.expect_commands(shell("configure").stdout("FAILED configure category=real reason=configure: "
                                                       "bad flag\n").exit(1),
                             state_upload(failure_doc("configure", "configure", "configure failed: bad flag"),
                                          "fetch", "configure"))
        self.expect_outcome(result=FAILURE)
        return self.run_step()

    def test_load_measures_base_and_head_interleaved_with_the_configured_repeats(self):
        self.make(steps.LoadModule, repeats=7)
        self.pr_properties()
        self.expect_commands(ExpectShell(workdir="wkdir", command=[
            *stage_cmd("load"), "--base-out", self.BASE_OUT, "--repeats", "7"])
            .stdout("load ok: userspace/accel (state: x)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="load ok: userspace/accel")
        return self.run_step()

    def test_gate_judges_against_the_base(self):
        self.make(steps.Gate)
        self.pr_properties()
        self.expect_commands(
            ExpectShell(workdir="wkdir", command=[*stage_cmd("gate"), "--base-out", self.BASE_OUT]).exit(0),
            upload(f"{RUN_DIR}/state.json").upload_string(state_doc(Verdict())).exit(0),
            upload(f"{RUN_DIR}/junit.xml").exit(1),
            upload(f"{RUN_DIR}/results.json").exit(1))
        self.expect_outcome(result=SUCCESS)
        return self.run_step()

    def test_pr_without_a_base_and_kernel_targets_keep_one_side(self):
        self.make(steps.LoadModule)
        self.pr_properties(base=None)
        self.expect_commands(shell("load").stdout("load ok: userspace/accel (state: x)\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="load ok: userspace/accel")
        return self.run_step()

    def test_base_sha_that_is_not_a_sha_is_refused(self):
        step = self.make(steps.LoadModule)
        self.pr_properties(base="main; rm -rf /")
        with self.assertRaisesRegex(ValueError, "is not a commit sha"):
            step.stage_command()

    def test_kernel_targets_build_no_base(self):
        # One load cycle a side: too few repeats for the learned gate, so no base is built.
        step = self.setup_step(steps.Build(variant="accel", target="linux-kmod-qemu", out_dir=OUT))
        self.pr_properties()
        self.assertIsNone(step.base_sha())
