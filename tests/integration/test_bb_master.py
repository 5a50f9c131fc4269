"""A real Buildbot master and two real ``buildbot-worker`` processes on loopback, building real
wolfSSL (the ``userspace`` target) through every step; results read back through the REST API.

Fault tests kill a worker for real (SIGKILL to the worker and everything it started, like a
machine losing power) while a chosen stage runs. To hit that stage reliably the workers run
``bsdkm-ci`` through a small wrapper that, only when the test drops a ``pause-<stage>`` file,
waits before starting the stage; nothing else about the stage is changed.

The last test runs the master once against a real PostgreSQL server this module starts.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import ROOT
from pg_server import Postgres, pg_server

from buildbot_bsdkm.buildbot.control import (
    VENV_BIN,
    Layout,
    Rest,
    create,
    kill_tree,
    start_master,
    stop_master,
    worker_process,
)
from buildbot_bsdkm.buildbot.worker_config import CONFIG_DIR, CONFIG_NAME
from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import from_json

pytestmark = pytest.mark.slow

BUILDER = "userspace/noasm"
BUILDER_DIR = "userspace_noasm"  # Buildbot's directory name for the builder
WORKERS = ("local-a", "local-b")
BUILD_TIMEOUT = 2400.0
SUCCESS, FAILURE, RETRY = 0, 2, 5
STAGES = ["fetch", "configure", "build", "load", "collect", "unload", "gate"]

WRAPPER = """#!/bin/sh
# bsdkm-ci as the test's workers run it: pauses before STAGE while CTL/pause-STAGE exists.
if [ -e "{ctl}/pause-$2" ]; then
  echo "$PWD" >> "{ctl}/paused-$2"
  sleep 600
fi
exec "{bsdkm_ci}" "$@"
"""


def write_fault_config(dest: Path) -> Path:
    """The repository's bsdkm.yml with short retry backoff and the policy path made absolute."""
    text = (ROOT / "bsdkm.yml").read_text()
    text = text.replace("backoff_s: [30, 120]", "backoff_s: [1, 2]")
    text = text.replace("policy: policies/default.yml", f"policy: {ROOT / 'policies/default.yml'}")
    assert "backoff_s: [1, 2]" in text
    dest.write_text(text)
    return dest


@dataclass
class Cluster:
    layout: Layout
    rest: Rest
    ctl: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_worker(self, name: str) -> None:
        self.procs[name] = worker_process(self.layout, name)

    def kill_worker(self, name: str) -> None:
        kill_tree(self.procs[name].pid)
        self.procs[name].wait(timeout=30)

    def ensure_workers(self) -> None:
        for name in WORKERS:
            if name not in self.procs or self.procs[name].poll() is not None:
                self.start_worker(name)
        self.rest.wait_workers(list(WORKERS), timeout=120)

    def worker_of(self, path_line: str) -> str:
        for name in WORKERS:
            if str(self.layout.worker(name)) in path_line:
                return name
        raise AssertionError(f"paused stage ran in no known worker: {path_line}")

    def wait_paused(self, stage: str, count: int, timeout: float = BUILD_TIMEOUT) -> list[str]:
        path = self.ctl / f"paused-{stage}"

        def lines() -> list[str] | None:
            got = path.read_text().splitlines() if path.exists() else []
            return got if len(got) >= count else None
        return self.rest.wait(lines, f"{count} paused {stage} stage(s)", timeout, interval=0.5)

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                kill_tree(p.pid)
                p.wait(timeout=30)
        stop_master(self.layout)


def start_cluster(base: Path, db_url: str = "sqlite:///state.sqlite") -> Cluster:
    ctl = base / "ctl"
    ctl.mkdir(parents=True)
    wrapper = base / "bsdkm-ci-wrapper"
    wrapper.write_text(WRAPPER.format(ctl=ctl, bsdkm_ci=VENV_BIN / "bsdkm-ci"))
    wrapper.chmod(0o755)
    layout = Layout(base / "bb")
    create(layout, config_path=write_fault_config(base / "bsdkm.yml"), db_url=db_url, workers=WORKERS,
           bsdkm_ci=str(wrapper))
    start_master(layout)
    cluster = Cluster(layout, Rest(layout.www_url()), ctl)
    try:
        cluster.ensure_workers()
    except Exception:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("bbmaster"))
    try:
        yield c
    finally:
        c.stop()


def run_build(c: Cluster) -> tuple[list[dict], dict]:
    bsid = c.rest.force([BUILDER], "integration test")
    c.rest.wait_buildset(bsid, timeout=BUILD_TIMEOUT)
    builds = c.rest.builds_of_buildset(bsid)
    assert builds, "the build request never started a build"
    return builds, c.rest.properties(builds[-1]["buildid"])


def step_summary(c: Cluster, buildid: int) -> list[tuple[str, int | None, str]]:
    return [(s["name"], s["results"], s["state_string"]) for s in c.rest.get(f"builds/{buildid}/steps")]


def log_text(c: Cluster, buildid: int, step: str, name: str) -> str:
    logs = {lg["name"]: lg for lg in c.rest.get(f"builds/{buildid}/steps/{step}/logs")}
    assert name in logs, f"step {step} has logs {sorted(logs)}, not {name}"
    return "".join(chunk["content"] for chunk in c.rest.get(f"logs/{logs[name]['logid']}/contents"))


# --------------------------------------------------------------------------- a real build


def test_userspace_build_through_every_step_reads_back_through_rest(cluster: Cluster):
    builds, props = run_build(cluster)
    assert len(builds) == 1, [b["state_string"] for b in builds]
    build = builds[0]
    steps = step_summary(cluster, build["buildid"])
    # the master's bsdkm.yml goes to the worker first: the stages read that copy
    sent = [s[0] for s in steps if s[0].startswith("config ")]
    assert sent and "config bsdkm.yml" in sent and all(s[1] == SUCCESS for s in steps if s[0] in sent)
    assert [s[0] for s in steps if s[0] not in sent] == ["worker_preparation", *STAGES], steps
    build_dir = cluster.layout.worker(props["workername"]) / BUILDER_DIR / "build"
    worker_copy = build_dir / CONFIG_DIR / CONFIG_NAME
    master_config = load_config(cluster.layout.settings()["config_path"])
    assert load_config(worker_copy).variants == master_config.variants
    assert build["results"] == SUCCESS, steps

    # What the worker wrote, read straight from its disk, is what Buildbot's test-result API holds.
    worker = props["workername"]
    results = cluster.layout.worker(worker) / BUILDER_DIR / "build/bsdkm-out/userspace/noasm/results.json"
    run = from_json(results.read_text(), str(results))[0]
    sets = {s["description"] + "|" + s["value_unit"]: s
            for s in cluster.rest.get(f"builds/{build['buildid']}/test_result_sets")}
    selftest = sets["self-test userspace/noasm|boolean"]
    assert selftest["category"] == "pass_fail" and selftest["complete"]
    assert selftest["tests_passed"] == len(run.tests) > 50 and selftest["tests_failed"] == 0
    rows = cluster.rest.get(f"test_result_sets/{selftest['test_result_setid']}/results")
    assert sorted(r["test_name"] for r in rows) == sorted(t.name for t in run.tests)
    assert {r["value"] for r in rows} == {"1"}
    units = {b.unit for b in run.benchmarks}
    assert {k.split("|")[1] for k in sets if k.startswith("benchmark")} == units
    unit = Counter(b.unit for b in run.benchmarks if not b.failed).most_common(1)[0][0]
    perf = sets[f"benchmark userspace/noasm|{unit}"]
    assert perf["category"] == "performance"
    perf_rows = {r["test_name"]: r["value"]
                 for r in cluster.rest.get(f"test_result_sets/{perf['test_result_setid']}/results")}
    expected = {b.name: f"{b.value:g}" for b in run.benchmarks if b.unit == unit and not b.failed}
    assert perf_rows == expected and len(expected) > 3

    # Properties: verdict, regressions, retry history; summaries say what happened.
    assert props["bsdkm_verdict"] == "passed"
    assert props["bsdkm_regressions"] == []
    assert props["bsdkm_selftest"] == f"self-test: {len(run.tests)}/{len(run.tests)} passed"
    assert [a["passed"] for a in props["bsdkm_attempts"]] == [True]
    assert props["bsdkm_retry"] == "passed"
    collect = next(s for s in steps if s[0] == "collect")
    assert collect[2].startswith(f"self-test: {len(run.tests)}/{len(run.tests)} passed")
    assert "<testsuite" in log_text(cluster, build["buildid"], "gate", "junit.xml")
    assert "noasm" in log_text(cluster, build["buildid"], "gate", "report.md")


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    profile = tempfile.mkdtemp(prefix="bsdkm-chromium-")
    try:
        return subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
             "--virtual-time-budget=30000", "--window-size=1200,1600", *args],
            capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def report_pixels(png: Path) -> tuple[int, tuple[int, int, int]]:
    """(table rule lines in the content area, the sidebar's colour) of a UI screenshot.

    The report's tables are drawn with 1 px #ccc borders (report/html_page.py's CSS): long rows of that grey
    right of the sidebar mean the report itself was rendered inside Buildbot's page.
    """
    from PIL import Image

    image = Image.open(png).convert("RGB")
    width, height = image.size
    px = image.load()
    rules = sum(1 for y in range(height)
                if sum(1 for x in range(width // 4, width) if all(195 <= c <= 215 for c in px[x, y])) > 300)
    return rules, px[20, height // 2]


def test_buildbot_ui_shows_the_builds_html_report(cluster: Cluster, tmp_path: Path):
    """The gate step's HTML report is an HTML log, and the web UI renders it."""
    builds = cluster.rest.get("builds", order="-buildid", complete="true")
    build = next((b for b in builds if b["results"] == SUCCESS), None) or run_build(cluster)[0][-1]
    gate = next(s for s in cluster.rest.get(f"builds/{build['buildid']}/steps") if s["name"] == "gate")
    logs = {lg["name"]: lg for lg in cluster.rest.get(f"steps/{gate['stepid']}/logs")}
    assert logs["report.html"]["type"] == "h", logs  # an HTML log, not text
    html = log_text(cluster, build["buildid"], "gate", "report.html")
    assert "<!DOCTYPE html>" in html and "bsdkm-ci results" in html and "Benchmarks: userspace/noasm" in html
    # The UI's own page for that log (the React app fetches and renders it), as a person opens it.
    url = (f"{cluster.layout.www_url()}#/builders/{build['builderid']}/builds/{build['number']}"
           f"/steps/{gate['number']}/logs/{logs['report.html']['slug']}")
    shot = tmp_path / "report-log.png"
    # Headless Chromium shoots when its (virtual) time budget is spent; on a loaded machine the
    # app may not have fetched the log yet. A few tries, each judged by the pixels.
    for attempt in range(4):
        taken = chromium(f"--screenshot={shot}", url.replace("#/", f"?try={attempt}#/"))
        assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
        rules, sidebar = report_pixels(shot)
        if rules >= 20:
            break
        time.sleep(2)
    keep = ROOT / "out" / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "buildbot-html-report-log.png")  # for people to look at (out/ is ignored)
    assert sidebar[2] > sidebar[0] + 30, sidebar  # Buildbot's dark blue navigation: the UI, not a bare page
    assert rules >= 20, f"{rules} table rules: the report is not rendered in {shot}"


# --------------------------------------------------------------------------- faults


def test_worker_killed_during_fetch_is_retried_on_the_other_worker_and_goes_green(cluster: Cluster):
    cluster.ensure_workers()
    (cluster.ctl / "pause-fetch").touch()
    bsid = cluster.rest.force([BUILDER], "fault: kill during fetch")
    paused = cluster.wait_paused("fetch", 1)
    (cluster.ctl / "pause-fetch").unlink()  # the retry must not pause
    victim = cluster.worker_of(paused[0])
    cluster.kill_worker(victim)
    cluster.rest.wait_buildset(bsid, timeout=BUILD_TIMEOUT)
    builds = cluster.rest.builds_of_buildset(bsid)
    first = cluster.rest.properties(builds[0]["buildid"])
    last = cluster.rest.properties(builds[-1]["buildid"])
    assert [b["results"] for b in builds] == [RETRY, SUCCESS], [b["state_string"] for b in builds]
    assert first["bsdkm_attempt_record"]["reason"] == "worker-lost"
    assert first["bsdkm_attempt_record"]["stage"] == "fetch"
    assert last["workername"] != victim  # retried on the other worker
    assert last["bsdkm_retry"] == "passed after 1 infrastructure retry (worker-lost)"
    assert [a["passed"] for a in last["bsdkm_attempts"]] == [False, True]
    assert builds[-1]["state_string"] == "passed after 1 infrastructure retry (worker-lost)"
    (cluster.ctl / "paused-fetch").unlink()


def test_worker_killed_during_module_load_is_a_failure_with_evidence_not_a_loop(cluster: Cluster):
    cluster.ensure_workers()
    (cluster.ctl / "pause-load").touch()
    bsid = cluster.rest.force([BUILDER], "fault: kill during load")
    try:
        first = cluster.wait_paused("load", 1)
        cluster.kill_worker(cluster.worker_of(first[0]))
        # One reproducibility run on the other worker: it goes down while loading too.
        second = cluster.wait_paused("load", 2)
        cluster.kill_worker(cluster.worker_of(second[1]))
        cluster.rest.wait_buildset(bsid, timeout=600)
    finally:
        (cluster.ctl / "pause-load").unlink()
    time.sleep(5)  # a looping request would have started a third build by now
    builds = cluster.rest.builds_of_buildset(bsid)
    assert [b["results"] for b in builds] == [RETRY, FAILURE], [b["state_string"] for b in builds]
    props = cluster.rest.properties(builds[-1]["buildid"])
    assert props["bsdkm_verdict"] == "failed"
    assert props["bsdkm_retry"].startswith("failed twice: panic at load")
    history = props["bsdkm_attempts"]
    assert [(a["stage"], a["category"], a["reason"]) for a in history] == [("load", "real", "panic")] * 2
    assert len({a["worker"] for a in history}) == 2
    assert builds[-1]["state_string"].startswith("failed twice")
    request = cluster.rest.get("buildrequests", buildsetid=bsid)[0]
    assert request["complete"] and request["results"] == FAILURE
    cluster.ensure_workers()


# --------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with pg_server() as pg:
        yield pg


def test_master_on_postgresql_runs_the_build_and_stores_results(postgres: Postgres, cluster: Cluster,
                                                                tmp_path: Path):
    cluster.stop()  # one master at a time on this shared machine
    c = start_cluster(tmp_path, db_url=postgres.url)
    try:
        builds, props = run_build(c)
        assert builds[-1]["results"] == SUCCESS, step_summary(c, builds[-1]["buildid"])
        sets = c.rest.get(f"builds/{builds[-1]['buildid']}/test_result_sets")
        assert any(s["description"] == "self-test userspace/noasm" and s["tests_passed"] > 50 for s in sets)
        assert props["bsdkm_verdict"] == "passed"
    finally:
        c.stop()
    # The rows really are in PostgreSQL, not in a stray sqlite file.
    out = postgres.pg("psql", "-h", "127.0.0.1", "-p", str(postgres.port), "-d", "bsdkm", "-Atc",
                      "select count(*) from test_results")
    assert int(out.strip()) > 50
    assert not (c.layout.master / "state.sqlite").exists()

