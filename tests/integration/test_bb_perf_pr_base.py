"""Issue 9 item 1 through a real master and worker: a PR build builds its base commit beside the head,
measures both interleaved and gates the head against the base.

The PR arrives as a signed webhook at the loopback GitHub's master (``github_fake``), so the
``github_base_sha`` property comes from ``pull_request.base.sha`` as it does from GitHub. The PR
lives in a local bare repository (the configured ``clone_url``): its base commit and its head are two
commits of a stand-in source tree whose ``configure`` and ``make`` are tiny scripts that make the two
programs; the programs print real wolfSSL output from the shared fixtures and note which commit ran,
so the order of the rounds is seen on disk. Everything else is the real thing: Buildbot, the steps,
``bsdkm-ci stage`` fetch (git, by ref and by sha), configure, build, load, collect and gate.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURES
from github_fake import payloads
from github_fake.master import Master, deliver, write_config
from github_fake.server import FakeGitHub

pytestmark = pytest.mark.slow

PR = 4242
REPEATS = 3
BUILDER_DIR = "userspace_noasm"
SELFTEST = FIXTURES / "userspace/noasm/testwolfcrypt.txt"
BENCH = FIXTURES / "userspace/noasm/bench_default.txt"
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


def _commit(work: Path, side: str, version: str, order: Path) -> str:
    files = {"configure.ac": f"AC_INIT([wolfssl],[{version}])\n", "configure": CONFIGURE,
             "Makefile.in": MAKEFILE, "testwolfcrypt.sh": f"#!/bin/sh\ncat {SELFTEST}\n",
             "benchmark.sh": f"#!/bin/sh\necho {side} >> {order}\ncat {BENCH}\n"}
    for name, text in files.items():
        (work / name).write_text(text)
        if not name.endswith((".ac", ".in")):
            (work / name).chmod(0o755)
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", side)
    return _git(work, "rev-parse", "HEAD")


def pr_repository(tmp: Path, order: Path) -> tuple[Path, str, str]:
    """A bare repository: the base commit on master, the PR's head on refs/pull/PR/head."""
    bare, work = tmp / "pr.git", tmp / "pr-work"
    _git(tmp, "init", "-q", "--bare", str(bare))
    work.mkdir()
    _git(work, "init", "-q")
    base = _commit(work, "base", "5.0.0", order)
    _git(work, "push", "-q", str(bare), "HEAD:refs/heads/master")
    head = _commit(work, "head", "5.0.1-pr", order)
    _git(work, "push", "-q", str(bare), f"HEAD:refs/pull/{PR}/head")
    return bare, base, head


def test_pr_build_on_a_real_master_builds_the_base_and_gates_the_head_against_it(tmp_path: Path) -> None:
    order = tmp_path / "order"
    bare, base, head = pr_repository(tmp_path, order)
    github = FakeGitHub().start()
    master = Master(tmp_path / "bb", github)
    try:
        config = write_config(tmp_path / "bsdkm.yml", github.url, variants=("noasm",),
                              clone_url=bare.as_uri())
        doc = yaml.safe_load(config.read_text())
        doc["benchmark"]["repeats"] = REPEATS
        doc["cache_dir"] = str(tmp_path / "cache")
        config.write_text(yaml.safe_dump(doc, sort_keys=False))
        master.start(config, with_worker=True)
        payload = payloads.pull_request("opened", number=PR, association="MEMBER", head_sha=head)
        payload["pull_request"]["base"]["sha"] = base
        github.add_pull(payload)
        response, _ = deliver(None, master.hook_url, "pull_request", payload)
        assert response.status_code in (200, 202), response.text
        (buildset,) = master.buildsets_for(PR)
        master.rest.wait_buildset(buildset["bsid"], timeout=300)
        (build,) = master.rest.builds_of_buildset(buildset["bsid"])
        steps = {s["name"]: s for s in master.rest.get(f"builds/{build['buildid']}/steps")}
        summary = {name: (s["results"], s["state_string"]) for name, s in steps.items()}
        assert build["results"] == 0, summary
        props = master.rest.properties(build["buildid"])
        assert props["github_base_sha"] == base and props["github_head_sha"] == head

        # The base was fetched by its sha, configured and built beside the head (each a "base" log).
        for name in ("fetch", "configure", "build"):
            assert summary[name][1].endswith("; base too"), summary[name]
            logs = {lg["name"] for lg in master.rest.get(f"steps/{steps[name]['stepid']}/logs")}
            assert "base" in logs, (name, logs)
        out = master.layout.worker(master.workers[0]) / BUILDER_DIR / "build" / "bsdkm-out"
        head_state = json.loads((out / "userspace/noasm/state.json").read_text())
        base_state = json.loads((out / "base/userspace/noasm/state.json").read_text())
        assert head_state["source"]["commit"] == head and base_state["source"]["commit"] == base
        assert head_state["source"]["path"] != base_state["source"]["path"]
        assert base_state["programs"]["benchmark"] != head_state["programs"]["benchmark"]

        # Both sides measured in alternating rounds, on the worker: A B A B A B.
        assert order.read_text().split() == ["base", "head"] * REPEATS

        # The gate judged the head's repeats against the base's, not against history.
        verdict = head_state["verdict"]
        (perf,) = verdict["perf"]
        assert perf["base_from"] == "baseline"
        assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(REPEATS, REPEATS)}
        assert verdict["notes"][0] == f"base measured next to the head, interleaved, {REPEATS} round(s)"
        assert props["bsdkm_verdict"] == "passed"
    finally:
        master.stop()
        github.stop()
