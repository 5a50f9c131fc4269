"""Through a real master and worker: a PR build builds its base commit beside the head,
measures both interleaved and gates the head against the base (item 1); ``confirm: true`` re-measures
a regression in the gate step (item 4); base-branch builds fill the master's history table, the
next build's gate reads the window from it, and the UI's perf history page shows it (items 5, 7).

PRs arrive as signed webhooks at a master wired to the loopback GitHub (``github_fake``), so the
``github_base_sha`` property comes from ``pull_request.base.sha`` as it does from GitHub. The
repository is a local bare one (the configured ``clone_url``, also the config's ``source``): its
commits are a stand-in source tree whose ``configure`` and ``make`` are tiny scripts making the two
programs; the programs print real wolfSSL output (the shared fixtures: a default benchmark, the noise
set's repeats) and note which commit ran, so the order of the rounds is seen on disk. Everything else
is the real thing: Buildbot, the steps, ``bsdkm-ci stage`` fetch (git, by ref and by sha),
configure, build, load, collect and gate, the learned gate and its confirmation.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml
from conftest import FIXTURES, ROOT, interleaved_rounds
from github_fake import payloads
from github_fake.master import Master, deliver, write_config
from github_fake.server import FakeGitHub

from buildbot_bsdkm.buildbot.www_perf import NAME
from buildbot_bsdkm.contract import read_progress
from buildbot_bsdkm.model import from_json
from buildbot_bsdkm.perf.store import SqlStore

pytestmark = pytest.mark.slow

REPEATS = 3
USER = ("alice", "alice-pw")
ITEM = "AES-128-GCM-enc"
BUILDER = "userspace/noasm"
BUILDER_DIR = "userspace_noasm"
NIGHTLY = "refs/heads/nightly"  # the config's source: what a base-branch (non-PR) build fetches
SELFTEST = FIXTURES / "userspace/noasm/testwolfcrypt.txt"
POLICY = """\
perf: {alpha: 0.01, tail: 1.8, reduce: best, min_repeats: 3, confirm: true}
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
"""
CONFIGURE = """#!/bin/sh
# Stand-in for wolfSSL's configure: a Makefile that makes the two programs from this tree.
src=$(cd "$(dirname "$0")" && pwd)
sed "s|@SRC@|$src|g" "$src/Makefile.in" > Makefile
"""
MAKEFILE = ("all:\n\tmkdir -p wolfcrypt/test wolfcrypt/benchmark\n"
            "\tcp @SRC@/testwolfcrypt.sh wolfcrypt/test/testwolfcrypt\n"
            "\tcp @SRC@/benchmark.sh wolfcrypt/benchmark/benchmark\n"
            "\tchmod +x wolfcrypt/test/testwolfcrypt wolfcrypt/benchmark/benchmark\n")


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def noise() -> list[str]:
    return [p.read_text() for p in sorted((FIXTURES / "noise").glob("noasm_r*.txt"))]


def slowed(text: str, factor: float) -> str:
    """A wolfCrypt benchmark log with ITEM slower by ``factor`` (rate down, cycles per byte up)."""
    def one(m: re.Match[str]) -> str:
        return f"{m[1]}{float(m[2]) * factor:.3f} MiB/s Cycles per byte = {float(m[3]) / factor:6.2f}"
    pattern = rf"^({re.escape(ITEM)}\s.*?)([\d.]+) MiB/s Cycles per byte =\s+([\d.]+)"
    return "\n".join(re.sub(pattern, one, line) for line in text.splitlines()) + "\n"


def held(ctl: Path) -> str:
    """Shell text that numbers each program run (``ctl/waiting-N``) and holds it until the test says
    go (``ctl/go-N``) or lets every run through (``ctl/free``); ten minutes at most."""
    return (f"n=$(( $(cat {ctl}/runs 2>/dev/null || echo 0) + 1 )); echo $n > {ctl}/runs; "
            f"touch {ctl}/waiting-$n\n"
            f"i=0; while [ ! -e {ctl}/go-$n ] && [ ! -e {ctl}/free ] && [ $i -lt 6000 ]; do "
            "sleep 0.1; i=$((i + 1)); done\n")


@dataclass
class Repo:
    """The PR repository: each commit's benchmark prints its own scripted outputs, one per run."""

    tmp: Path
    bare: Path
    work: Path

    def commit(self, name: str, ref: str, outputs: list[str], order: Path | None = None,
               hold: Path | None = None) -> tuple[str, Path]:
        """A commit whose benchmark notes ``name`` in the order file (returned) and prints ``outputs``
        in turn (the last one again after that); pushed to ``ref``. With ``hold``, each program run
        waits for the test's word there first (``held``)."""
        data, order = self.tmp / f"out-{name}", order or self.tmp / f"order-{name}"
        data.mkdir()
        for i, text in enumerate(outputs, 1):
            (data / f"{i}.txt").write_text(text)
        wait = held(hold) if hold else ""
        bench = (f"#!/bin/sh\n{wait}echo {name} >> {order}\n"
                 f"n=$(( $(cat {data}/n 2>/dev/null || echo 0) + 1 ))\necho $n > {data}/n\n"
                 f"[ -f {data}/$n.txt ] || n={len(outputs)}\ncat {data}/$n.txt\n")
        files = {"configure.ac": f"AC_INIT([wolfssl],[5.0.0-{name}])\n", "configure": CONFIGURE,
                 "Makefile.in": MAKEFILE, "testwolfcrypt.sh": f"#!/bin/sh\n{wait}cat {SELFTEST}\n",
                 "benchmark.sh": bench}
        for file, text in files.items():
            (self.work / file).write_text(text)
            (self.work / file).chmod(0o644 if file.endswith((".ac", ".in")) else 0o755)
        _git(self.work, "add", "-A")
        _git(self.work, "commit", "-q", "-m", name)
        _git(self.work, "push", "-q", "-f", str(self.bare), f"HEAD:{ref}")
        return _git(self.work, "rev-parse", "HEAD"), order


@dataclass
class Setup:
    master: Master
    github: FakeGitHub
    repo: Repo

    def run_dir(self, base: bool = False) -> Path:
        out = self.master.layout.worker(self.master.workers[0]) / BUILDER_DIR / "build" / "bsdkm-out"
        return (out / "base" if base else out) / "userspace/noasm"

    def state(self, base: bool = False) -> dict:
        return json.loads((self.run_dir(base) / "state.json").read_text())

    def pr_build(self, number: int, head: str, base: str) -> tuple[dict, dict, dict]:
        """(build, step name -> (results, summary), properties) of the PR build a webhook starts."""
        payload = payloads.pull_request("opened", number=number, association="MEMBER", head_sha=head)
        payload["pull_request"]["base"]["sha"] = base
        self.github.add_pull(payload)
        response, _ = deliver(None, self.master.hook_url, "pull_request", payload)
        assert response.status_code in (200, 202), response.text
        (buildset,) = self.master.buildsets_for(number)
        return self._finished(buildset["bsid"])

    def forced_build(self) -> tuple[dict, dict, dict]:
        """A base-branch build, forced by a logged-in user (a github: section closes forcing)."""
        body = {"jsonrpc": "2.0", "method": "force", "id": 1,
                "params": {"builderNames": [BUILDER], "reason": "base-branch build"}}
        with requests.Session() as session:
            session.get(self.master.url + "auth/login", auth=USER, timeout=30)
            r = session.post(self.master.url + "api/v2/forceschedulers/force", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return self._finished(int(r.json()["result"][0]))

    def _finished(self, bsid: int) -> tuple[dict, dict, dict]:
        self.master.rest.wait_buildset(bsid, timeout=300)
        (build,) = self.master.rest.builds_of_buildset(bsid)
        steps = {s["name"]: (s["results"], s["state_string"])
                 for s in self.master.rest.get(f"builds/{build['buildid']}/steps")}
        return build, steps, self.master.rest.properties(build["buildid"])


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("bbperfpr")
    bare, work = tmp / "pr.git", tmp / "pr-work"
    _git(tmp, "init", "-q", "--bare", str(bare))
    work.mkdir()
    _git(work, "init", "-q")
    repo = Repo(tmp, bare, work)
    repo.commit("nightly", NIGHTLY, noise()[:1])  # the configured source must exist before the master
    github = FakeGitHub().start()
    master = Master(tmp / "bb", github)
    try:
        config = write_config(tmp / "bsdkm.yml", github.url, variants=("noasm",), clone_url=bare.as_uri())
        (tmp / "policy.yml").write_text(POLICY)
        doc = yaml.safe_load(config.read_text())
        doc["benchmark"]["repeats"] = REPEATS
        # the stand-in programs print a fixed number of logs: no more rounds than those (perf/extend.py)
        doc["benchmark"]["max_repeats"] = REPEATS
        doc["cache_dir"] = str(tmp / "cache")
        doc["policy"] = str(tmp / "policy.yml")
        doc["source"] = {"git": {"url": bare.as_uri(), "ref": NIGHTLY}}
        (tmp / "www.htpasswd").write_text(":".join(USER) + "\n")
        doc["www"] = {"auth": {"type": "htpasswd", "file": str(tmp / "www.htpasswd")}}
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        master.start(config, with_worker=True)
        yield Setup(master, github, repo)
    finally:
        master.stop()
        github.stop()


def test_pr_build_builds_the_base_and_gates_the_head_against_it(setup: Setup) -> None:
    bench = (FIXTURES / "userspace/noasm/bench_default.txt").read_text()
    base, order = setup.repo.commit("base", "refs/heads/master", [bench])
    head, _ = setup.repo.commit("head", "refs/pull/4242/head", [bench], order)
    build, steps, props = setup.pr_build(4242, head, base)
    assert build["results"] == 0, steps
    assert props["github_base_sha"] == base and props["github_head_sha"] == head

    # The base was fetched by its sha, configured and built beside the head (each a "base" log).
    for name in ("fetch", "configure", "build"):
        assert steps[name][1].endswith("; base too"), steps[name]
    head_state, base_state = setup.state(), setup.state(base=True)
    assert head_state["source"]["commit"] == head and base_state["source"]["commit"] == base
    assert head_state["source"]["path"] != base_state["source"]["path"]
    assert base_state["programs"]["benchmark"] != head_state["programs"]["benchmark"]

    # Both sides measured in rounds on the worker, one base and one head each (order drawn per round).
    assert interleaved_rounds(order.read_text().split(), REPEATS) == head_state["round_order"]
    logs = sorted(p.name for p in setup.run_dir().glob("bench*.log"))
    assert logs == ["bench.2.log", "bench.3.log", "bench.log"]

    # The gate judged the head's repeats against the base's, not against history.
    verdict = head_state["verdict"]
    (perf,) = verdict["perf"]
    assert perf["base_from"] == "baseline"
    assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(REPEATS, REPEATS)}
    assert verdict["notes"][0] == f"base measured next to the head, interleaved, {REPEATS} round(s)"
    assert props["bsdkm_verdict"] == "passed"


def _gcm(verdict: dict) -> dict:
    (check,) = [c for c in verdict["checks"] if c["kind"] == "regression" and c["name"] == ITEM]
    return check


def test_gate_step_confirms_a_regression_by_measuring_again_and_withdraws_a_fluke(setup: Setup) -> None:
    n = noise()
    base, order = setup.repo.commit("base2", "refs/heads/base2", n[0:3])
    # The head is 30 % slower on ITEM in the load's rounds only: a disturbed stretch, not the code.
    fluke, _ = setup.repo.commit("fluke", "refs/pull/4243/head", [slowed(t, 0.7) for t in n[3:6]] + n[6:9],
                                 order)
    build, steps, props = setup.pr_build(4243, fluke, base)
    assert build["results"] == 0, steps
    sides = {"base2": "base", "fluke": "head"}
    interleaved_rounds([sides[s] for s in order.read_text().split()], 2 * REPEATS)  # load's, then confirm's
    verdict = setup.state()["verdict"]
    check = _gcm(verdict)
    assert check["passed"] and "NOT confirmed by a re-measurement" in check["message"], check["message"]
    said = "0 regression(s) confirmed, 1 withdrawn"
    assert any(x.startswith("confirm: re-measured userspace/noasm") and said in x for x in verdict["notes"])
    assert props["bsdkm_verdict"] == "passed" and props["bsdkm_regressions"] == []

    # Slow in every round: the re-measurement agrees and the build fails on it.
    slow, _ = setup.repo.commit("slow", "refs/pull/4244/head", [slowed(t, 0.7) for t in n[3:9]])
    build, steps, props = setup.pr_build(4244, slow, base)
    assert build["results"] == 2, steps
    check = _gcm(setup.state()["verdict"])
    assert not check["passed"] and "confirmed by a re-measurement" in check["message"]
    assert props["bsdkm_verdict"] == "failed" and any(ITEM in r for r in props["bsdkm_regressions"])


def test_base_branch_builds_fill_the_history_the_next_gate_and_the_perf_page_read(setup: Setup) -> None:
    for _ in range(2):
        build, steps, props = setup.forced_build()
        assert build["results"] == 0, steps
    # The second build's gate got the first build's run from the master's table, as history.
    (history,) = from_json((setup.run_dir() / "history.json").read_text())
    assert (history.target, history.variant) == ("userspace", "noasm") and history.benchmarks
    (perf,) = setup.state()["verdict"]["perf"]
    assert perf["base_from"] == "history"
    store = SqlStore(f"sqlite:///{setup.master.layout.master / 'state.sqlite'}")
    assert [k[1:] for k in store.series()] == [("userspace", "noasm", 2)]  # PR builds are never stored
    store.close()
    page = requests.get(setup.master.url + f"plugins/wsgi_dashboards/{NAME}/index.html", timeout=30)
    assert page.status_code == 200  # anonymous: read (a github: section's default)
    assert page.text.count('<tr class="commit">') == 2 and page.text.count('<tr class="item">') > 5


def test_the_load_steps_summary_follows_the_stage_while_it_runs(setup: Setup, tmp_path: Path) -> None:
    """Live progress, as a person watching the build sees it: the REST API's state_string of the load
    step, polled while the stage runs, and the web UI's build page at one of those moments.

    Each program run waits until the test has seen the milestone announced just before it, so
    every state is there to be seen however fast or loaded the machine is.
    """
    ctl = tmp_path / "ctl"
    ctl.mkdir()
    bench = (FIXTURES / "userspace/noasm/bench_default.txt").read_text()
    base, order = setup.repo.commit("base-live", "refs/heads/base-live", [bench], hold=ctl)
    head, _ = setup.repo.commit("head-live", "refs/pull/4245/head", [bench], order, hold=ctl)
    payload = payloads.pull_request("opened", number=4245, association="MEMBER", head_sha=head)
    payload["pull_request"]["base"]["sha"] = base
    setup.github.add_pull(payload)
    response, _ = deliver(None, setup.master.hook_url, "pull_request", payload)
    assert response.status_code in (200, 202), response.text
    rest = setup.master.rest
    (buildset,) = setup.master.buildsets_for(4245)
    build = rest.wait(lambda: next(iter(rest.builds_of_buildset(buildset["bsid"])), None), "the PR build",
                      300)
    page = f"{setup.master.url}#/builders/{build['builderid']}/builds/{build['number']}"

    seen: list[str] = []  # the load step's summary each time it changed, while the step ran
    released: set[str] = set()  # the milestones whose program run was let go
    shown_in_ui = ""
    deadline = time.monotonic() + 900
    try:
        while True:
            assert time.monotonic() < deadline, f"the load step did not finish; seen {seen}"
            steps = rest.get(f"builds/{build['buildid']}/steps")
            load = next((s for s in steps if s["name"] == "load"), None)
            if load is not None and load["complete"]:
                break
            if load is not None and load["started_at"]:
                state = load["state_string"]
                if not seen or seen[-1] != state:
                    seen.append(state)
                waiting = (ctl / f"waiting-{len(released) + 1}").exists()
                # a program runs right after its own milestone: self-test or benchmark round i of N
                if waiting and state.startswith(("self-test", "benchmark")) and state not in released:
                    if state == "benchmark round 2 of 3 (base)" and not shown_in_ui:
                        shown_in_ui = ui_shows(page, state)
                    (ctl / f"go-{len(released) + 1}").touch()
                    released.add(state)
            time.sleep(0.3)
    finally:
        (ctl / "free").touch()  # whatever happened, nothing stays held
    rest.wait_buildset(buildset["bsid"], timeout=300)
    final = next(s for s in rest.get(f"builds/{build['buildid']}/steps") if s["name"] == "load")

    # At least three states before the end, every one of them the stage's own words, in its order
    # (Buildbot's "pending", then the step's own description until the first line arrives).
    said = [s for s in seen if s not in ("pending", "loading")]
    assert all(read_progress(f"[ 1.0s] userspace/noasm: >> {s}") for s in said), seen
    assert {"self-test", "self-test (base)", "benchmark round 1 of 3", "benchmark round 1 of 3 (base)",
            "benchmark round 2 of 3", "benchmark round 2 of 3 (base)", "benchmark round 3 of 3",
            "benchmark round 3 of 3 (base)"} <= set(seen), seen
    rounds = [s for s in seen if s.startswith("benchmark round")]
    assert [s.split(" of ")[0] for s in rounds] == sorted(s.split(" of ")[0] for s in rounds), seen
    assert final["results"] == 0 and final["state_string"] == "load ok: userspace/noasm", final  # the end
    assert shown_in_ui == "benchmark round 2 of 3 (base)", "the build page showed the held milestone"


def ui_shows(page: str, words: str) -> str:
    """``words`` when the web UI's build page, rendered by headless Chromium, shows them; a
    screenshot of the page is kept in out/screenshots for people to look at."""
    profile = tempfile.mkdtemp(prefix="bsdkm-chromium-")
    keep = ROOT / "out" / "screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    try:
        for attempt in range(4):  # the app may not have fetched the steps when the time budget ends
            url = page.replace("#/", f"?try={attempt}#/")
            dom = chromium(profile, "--dump-dom", url)
            if words in dom.stdout:
                shot = chromium(profile, f"--screenshot={keep / 'buildbot-live-progress.png'}", url)
                assert shot.returncode == 0, shot.stderr[-2000:]
                return words
            time.sleep(2)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return ""


def chromium(profile: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--virtual-time-budget=20000", "--window-size=1200,1000", *args],
        capture_output=True, text=True, timeout=180, check=False)
