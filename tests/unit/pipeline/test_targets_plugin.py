"""A target from outside the repository: a package holding its class, its row and its options, and one
entry point of the group ``bsdkm_ci.targets``, run by ``bsdkm-ci run`` to a verdict with no file of
the package touched.

The package is a directory on ``PYTHONPATH`` with a ``*.dist-info`` beside it holding ``METADATA``
and ``entry_points.txt``: what an installed distribution is to ``importlib.metadata``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, ROOT

TARGET = '''\
import shutil
from dataclasses import dataclass
from pathlib import Path

from buildbot_bsdkm.model import LogFormat
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline.job import CONFIGURE_ARGS
from buildbot_bsdkm.pipeline.targets.base import Target
from buildbot_bsdkm.support.yaml_schema import STRING, option
from buildbot_bsdkm.targets import TargetFacts

RECORDED = Path({recorded!r})


@dataclass(frozen=True)
class ToyOptions:
    log_name: str = option(STRING, "test.log")


class ToyTarget(Target):
    facts = TargetFacts("toy", None, perf_measurement=False, bench_repeats=False,
                        perf_note="a toy target: a recorded self-test, nothing built")
    options_type = ToyOptions

    def configure(self, job):
        job.put(CONFIGURE_ARGS, job.config.configure_flags(job.target, job.variant))

    def make(self, job):
        pass

    def measure(self, job):
        shutil.copyfile(RECORDED, job.dir / self.options(job.config).log_name)

    def collect(self, job):
        log = job.dir / self.options(job.config).log_name
        return ([parse_file(log, LogFormat.WOLFCRYPT_TEST)] if log.is_file() else []), None


TARGET = ToyTarget()
'''
CONFIG = """\
source: {{local: {source}}}
targets:
  toy: {{flags: [], {option}}}
variants:
  plain: {{flags: [], targets: [toy]}}
cache_dir: {cache}
"""


def _package(where: Path, entry_point: str, module: str = "") -> dict[str, str]:
    """``toy_target`` in ``where``, its distribution's metadata naming ``entry_point``; the env to run it."""
    (where / "toy_target").mkdir(parents=True)
    (where / "toy_target" / "__init__.py").write_text("")
    (where / "toy_target" / "target.py").write_text(module)
    info = where / "toy_target-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-target\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[bsdkm_ci.targets]\n{entry_point}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), str(ROOT)])}


def _run(tmp_path: Path, env: dict[str, str], option: str = "") -> subprocess.CompletedProcess[str]:
    source = tmp_path / "wolfssl"
    source.mkdir()
    (source / "configure").write_text("#!/bin/sh\nexit 1\n")
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache", option=option))
    argv = [sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg),
            "--out", str(tmp_path / "out")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)


def test_a_target_from_a_package_outside_the_repository_runs_to_a_verdict(tmp_path: Path) -> None:
    recorded = str(FIXTURES / "userspace" / "noasm" / "testwolfcrypt.txt")
    env = _package(tmp_path / "plugins", "toy = toy_target.target:TARGET", TARGET.format(recorded=recorded))
    proc = _run(tmp_path, env, "log_name: toy.log")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True
    assert [(r["target"], r["variant"]) for r in summary["runs"]] == [("toy", "plain")]
    assert "toy/plain" in proc.stdout
    assert list((tmp_path / "out").rglob("toy.log")), "the target read its own option"


def test_an_outside_targets_options_are_checked_like_the_packages_own(tmp_path: Path) -> None:
    env = _package(tmp_path / "plugins", "toy = toy_target.target:TARGET", TARGET.format(recorded="/none"))
    proc = _run(tmp_path, env, "log_nam: toy.log")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{tmp_path / 'bsdkm.yml'}:3: targets.toy.log_nam: unknown key" in proc.stderr
    assert not (tmp_path / "cache").exists()


def test_an_entry_point_without_a_target_is_named(tmp_path: Path) -> None:
    env = _package(tmp_path / "plugins", "toy = toy_target.target:TARGET", "TARGET = object()\n")
    proc = _run(tmp_path, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert ("bad target plug-in: entry point bsdkm_ci.targets: toy = toy_target.target:TARGET "
            "(from toy-target 0): no target") in proc.stderr, proc.stderr


def test_an_outside_target_cannot_take_a_name_the_package_has(tmp_path: Path) -> None:
    env = _package(tmp_path / "plugins", "userspace = toy_target.target:TARGET", TARGET.format(recorded="/n"))
    proc = _run(tmp_path, env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the name 'userspace' is taken by another target" in proc.stderr, proc.stderr
