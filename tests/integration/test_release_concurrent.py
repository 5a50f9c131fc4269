"""Two release runs at once on one empty cache, as two release builders on one worker: both finish
with their report, and what they share (the download, the unpacked tree, the side's build) is made
once.

The candidate and the previous release are one real wolfSSL 5.9.2 tree (Debian's, autogen'd), served
as a tarball by a loopback mirror that holds the first request until the second arrives
(``tests/held_mirror.py``), so the two downloads overlap on any machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from held_mirror import HeldMirror

from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source

pytestmark = pytest.mark.slow

CONFIG = """\
targets:
  userspace:
    flags: [--enable-cryptonly, --enable-crypttests]
variants:
  noasm:
    flags: [--disable-asm]
    targets: [userspace]
benchmark:
  min_runtime_s: 0.01
  embedded: true
  ntimes: 1
  agreetimes: 1
  userspace_args: [-aes-cbc, -sha256]
release:
  repeats: 1
  software_variant: noasm
jobs: 2
parallel: 1
policy: policy.yml
"""
# The comparison is made and reported; no measured drop fails it (a 10 ms window under load can lose 99 %).
POLICY = "version: 1\nselftests: true\ncomplete: true\nregressions:\n  - {pattern: '*', max_pct: 100}\n"


def test_two_release_runs_at_once_on_one_empty_cache(tmp_path: Path) -> None:
    tree = wolfssl_source()  # autogen'd in the suite's own cache: the mirror serves it as it is
    www = tmp_path / "www"
    www.mkdir()
    tarball = www / "wolfssl-5.9.2-autogen.tar"
    subprocess.run(["tar", "-C", str(tree.parent), "--sort=name", "-cf", str(tarball), tree.name], check=True,
                   timeout=300)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    (tmp_path / "bsdkm.yml").write_text(CONFIG)
    (tmp_path / "policy.yml").write_text(POLICY)
    env = {**os.environ, "BSDKM_CACHE": str(tmp_path / "cache")}
    bsdkm_ci = [sys.executable, "-m", "buildbot_bsdkm.cli"]
    mirror = HeldMirror(www, hold_s=5.0, chunk=4 << 20, pause_s=0.01)
    with mirror.serving() as url:
        source = f"tarball:{url}/{tarball.name}#{sha}"
        argv = [*bsdkm_ci, "release", "--candidate", source, "--previous", source,
                "--config", str(tmp_path / "bsdkm.yml")]
        runs = [subprocess.Popen([*argv, "--out", str(tmp_path / f"out{i}")], env=env, cwd=tmp_path,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for i in (1, 2)]
        said = [run.communicate(timeout=1500)[0] for run in runs]
    for i, (run, out) in enumerate(zip(runs, said, strict=True), start=1):
        # The old code: "bsdkm-release: cannot write results: No such file or directory", no release.json.
        assert run.returncode == 0, f"run {i}:\n{out[-4000:]}"
        doc = json.loads((tmp_path / f"out{i}" / "release.json").read_text())
        assert doc["verdict"]["passed"] is True, doc["verdict"]
    assert mirror.requests[f"/{tarball.name}"] == 1  # one download, the other run waited for it
    release = tmp_path / "cache" / "release"
    builds = sorted(p.name for p in release.glob("*/build/userspace-*") if p.is_dir())
    assert len(builds) == 2, builds  # one build per side, the second run reused them
    assert not list((tmp_path / "cache").rglob("*.part"))
