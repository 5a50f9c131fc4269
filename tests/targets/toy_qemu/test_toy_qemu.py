"""A third OS in QEMU is one folder and one entry point: ``toy_qemu/`` copied into a temporary
directory with its ``dist-info`` (the ``bsdkm_ci.targets`` entry point), and ``bsdkm-ci run`` takes
it to a verdict, the module's instructions counted in the guest, with no file of the package touched.

Real: gcc and ld build the guest (a multiboot image, a toy module in it), QEMU TCG boots it with
the counting plugin (``kmod/qemu/bsdkm_count.c``), the whole pipeline judges it. A boot takes
about a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from buildbot_bsdkm.model import from_json
from buildbot_bsdkm.perf.instruction_counts import MEASURED, METADATA_KEY, InstructionCounts
from buildbot_bsdkm.perf.kernel_counts import SCOPE_MODULE

pytestmark = pytest.mark.slow
PACKAGE = Path(__file__).parent / "toy_qemu"
CONFIG = """\
source: {{local: {source}}}
cache_dir: {cache}
policy: {policy}
targets:
  toy-qemu: {{flags: []}}
variants:
  plain: {{flags: [], targets: [toy-qemu]}}
timeouts: {{load: 120}}
"""
POLICY = "instructions:\n  kernel_count: true\n  kernel_bytes: 4096\n  kernel_sizes: [16, 1024]\n"


def install(site: Path) -> None:
    """The package and its distribution's metadata, as ``pip install`` would leave them."""
    shutil.copytree(PACKAGE, site / "toy_qemu", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "toy_qemu-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-qemu\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[bsdkm_ci.targets]\ntoy-qemu = toy_qemu.target:TARGET\n")


def test_a_toy_qemu_target_from_a_package_runs_to_a_verdict_with_its_counts(tmp_path: Path) -> None:
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("boots a QEMU guest: install qemu-system-x86")
    install(tmp_path / "site")
    source = tmp_path / "source"
    source.mkdir()
    (source / "configure").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "policy.yml").write_text(POLICY)
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache", policy=tmp_path / "policy.yml"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg), "--out",
                           str(out)], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"]["passed"] is True
    assert [(r["target"], r["variant"]) for r in summary["runs"]] == [("toy-qemu", "plain")]

    run = from_json((out / "toy-qemu" / "plain" / "results.json").read_text())[0]
    assert [t.name for t in run.logs[0].tests] == ["SUM"] and run.logs[0].selftest_summary is True
    counts = InstructionCounts.from_dict(run.metadata[METADATA_KEY])
    assert counts.scope == SCOPE_MODULE and counts.program == "harness.c + bsdkm_count.c"
    assert [(i.name, i.status) for i in counts.items] == [("kmod:TOY-SUM@16", MEASURED),
                                                          ("kmod:TOY-SUM@1024", MEASURED)]
    for item in counts.items:  # every counted instruction is the module's one function
        assert item.instructions is not None and item.instructions >= 4096  # at least one a byte
        assert item.functions == {"toy_sum": item.instructions}
    # The same 4096 bytes in 256 calls cost more than in 4: the calls' own instructions are counted.
    assert counts.items[0].instructions > counts.items[1].instructions  # type: ignore[operator]
