"""A target from outside the repository: its file, its row and its line in ``BSDKM_TARGETS``, run by
``bsdkm-ci run`` to a verdict with no file of the package touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, ROOT

ROW = '''\
from buildbot_bsdkm.targets import TargetFacts

FACTS = TargetFacts("toy", None, perf_measurement=False, bench_repeats=False,
                    perf_note="a toy target: a recorded self-test, nothing built")
'''
TARGET = '''\
import shutil
from pathlib import Path

from buildbot_bsdkm.model import LogFormat
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.job import CONFIGURE_ARGS
from buildbot_bsdkm.pipeline.targets.base import Target

from . import FACTS

RECORDED = Path({recorded!r})


class ToyTarget(Target):
    facts = FACTS

    def configure(self, job):
        job.put(CONFIGURE_ARGS, job.config.configure_flags(job.target, job.variant))

    def make(self, job):
        pass

    def measure(self, job):
        shutil.copyfile(RECORDED, job.dir / "test.log")

    def collect(self, job):
        log = job.dir / "test.log"
        return ([parse_file(log, LogFormat.WOLFCRYPT_TEST)] if log.is_file() else []), None


TARGET = ToyTarget()
'''
CONFIG = """\
source: {{local: {source}}}
targets:
  toy: {{flags: []}}
variants:
  plain: {{flags: [], targets: [toy]}}
cache_dir: {cache}
"""


def test_a_target_from_a_package_outside_the_repository_runs_to_a_verdict(tmp_path: Path) -> None:
    plugin = tmp_path / "plugins" / "toy_target"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(ROW)
    (plugin / "target.py").write_text(TARGET.format(recorded=str(FIXTURES / "userspace" / "noasm" /
                                                                 "testwolfcrypt.txt")))
    source = tmp_path / "wolfssl"
    source.mkdir()
    (source / "configure").write_text("#!/bin/sh\nexit 1\n")
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache"))
    env = {**os.environ, "BSDKM_TARGETS": "toy_target",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "plugins"), str(ROOT)])}
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg), "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True
    assert [(r["target"], r["variant"]) for r in summary["runs"]] == [("toy", "plain")]
    assert "toy/plain" in proc.stdout


def test_a_package_without_a_row_is_named(tmp_path: Path) -> None:
    (tmp_path / "norow").mkdir()
    (tmp_path / "norow" / "__init__.py").write_text("")
    env = {**os.environ, "BSDKM_TARGETS": "norow", "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-c", "import buildbot_bsdkm.targets"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode != 0 and "BSDKM_TARGETS: norow: no target row" in proc.stderr
