"""A FreeBSD self-test failure already on the base stays "pre-existing" through a PR that only adds lines
to test.c (its return code changes, its name does not), through a real Buildbot master and worker with
the loopback GitHub.

REAL: the base's console (``../shared/freebsd/logs/planted_debug-kernel_noasm_sha256-kat-selftest-fail.log``),
wolfSSL 5.9.2's test sources (Debian's tarball, from the shared cache), the master, worker, steps, state
files, judging, gate and triage, GitHub's statuses (the loopback fake).
SIMULATED: fetch, cross-build and QEMU (``tests/triage_double/replay.py``), and the collect stage's naming
from the fetched tree, which the double applies as the pipeline's one added line would. CONSTRUCTED: the
PR's test.c (three comment lines added at its top) and its console (the code the real FreeBSD kernel
printed for that change, -1610718634).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from github_fake.master import Master
from github_fake.server import FakeGitHub
from test_triage_master import final_comment, force_base_build, kernel_config, outcome_rows, run_pr
from test_triage_selftest_names import ADDED, PLANTED, _shifted, _tree

from buildbot_bsdkm.buildbot import control

pytestmark = pytest.mark.slow
BASE, HEAD = "b" * 40, "e" * 40


def test_pre_existing_freebsd_selftest_failure_stays_so_when_a_pr_adds_lines_to_test_c(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base_tree = _tree("sid", "5.9.2", tmp_path / "src")
    head_tree = _shifted(base_tree, tmp_path / "src-pr", ADDED)
    head_console = tmp_path / "pr.console.log"
    head_console.write_text(PLANTED.read_text(errors="replace").replace("-1610718631", "-1610718634"))
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({
        "base_commit": BASE, "name_selftests": True,
        "consoles": {BASE: {"debug": str(PLANTED)}, HEAD: {"debug": str(head_console)}},
        "sources": {BASE: str(base_tree), HEAD: str(head_tree)}}))
    cmd = tmp_path / "bsdkm-ci-replay"
    cmd.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'triage_double' / 'replay.py'} "
                   f"{scenario} \"$@\"\n")
    cmd.chmod(0o755)
    monkeypatch.setattr(control, "create", functools.partial(control.create, bsdkm_ci=str(cmd)))
    monkeypatch.setenv("BSDKM_CACHE", str(tmp_path / "cache"))
    github = FakeGitHub().start()
    master = Master(tmp_path, github)
    started = time.monotonic()
    try:
        master.start(kernel_config(tmp_path / "bsdkm.yml", github.url), with_worker=True)
        # A build of the base branch records its outcome: the SHA-256 failure, by its name.
        bsid = force_base_build(master)
        master.rest.wait_buildset(bsid, timeout=600)
        rows = outcome_rows(master)
        assert rows and {r[:3] for r in rows} == {("freebsd-kmod-qemu", "intelasm", "fail")}
        assert json.loads(rows[-1][3])["signatures"] == ["selftest: SHA-256"], rows[-1][3]
        # The PR moves the failing line down three lines: another code, the same failure.
        status, props = run_pr(master, github, 201, HEAD)
        assert status["state"] == "success", (status["description"], props.get("bsdkm_triage"))
        assert "pre-existing" in status["description"], status
        triage = props["bsdkm_triage"]
        assert triage["counts"] == {"pre-existing": 1} and triage["blocking"] == 0, triage
        comment = final_comment(github, 201)
        assert "Pre-existing" in comment and "SHA-256" in comment, comment[:3000]
        assert "wolfcrypt_test (" not in comment
        assert github.invalid == [], github.invalid
        print(f"a base build and a PR build through the master in {time.monotonic() - started:.0f} s: "
              f"{status['description']}")
    finally:
        master.stop()
        github.stop()
