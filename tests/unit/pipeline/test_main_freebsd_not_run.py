"""The main job (``scripts/main.sh``, ``bsdkm-ci main``) on a machine that reaches no FreeBSD mirror:
its FreeBSD runs are reported not run, with the reason and the key to set, never failed or passed.

What the main job runs is the shipped ``bsdkm.yml`` with ``--unavailable`` at its default; here its
FreeBSD runs go through the same ``bsdkm-ci run`` path with the shipped ``freebsd:`` section, an https
mirror whose name cannot resolve (as ``download.freebsd.org`` cannot on this project's machines) and a
stand-in wolfSSL tree, so nothing else is fetched or built."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from buildbot_bsdkm.cli import build_parser
from buildbot_bsdkm.commands.matrix_run import NOT_RUN
from buildbot_bsdkm.config.bsdkm_yml import default_config_path, load_config
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.options import freebsd_options

REASON = "no FreeBSD release set reachable (freebsd.mirror)"
UNREACHABLE = "https://download.freebsd.invalid"  # .invalid never resolves (RFC 6761)


def test_main_reports_what_it_cannot_do_as_not_run() -> None:
    args = build_parser().parse_args(["main"])
    assert args.unavailable == NOT_RUN
    shipped = load_config(default_config_path())
    freebsd = [(t, v) for t, v in shipped.pairs() if t.startswith("freebsd")]
    assert freebsd == [("freebsd-kmod-qemu", "intelasm"), ("freebsd-kmod-qemu", "noasm")]
    assert freebsd_options(shipped).freebsd.mirror == "https://download.freebsd.org"


def test_the_main_jobs_freebsd_runs_are_not_run_without_a_mirror(tmp_path: Path) -> None:
    source = tmp_path / "wolfssl"
    (source / "bsdkm").mkdir(parents=True)
    for name in ("autogen.sh", "configure"):
        (source / name).write_text("#!/bin/sh\nexit 1\n")
    doc = yaml.safe_load(default_config_path().read_text())
    for key in ("policy", "known_issues"):  # the shipped policy is found beside the shipped file
        doc.pop(key, None)
    doc["source"] = {"local": str(source)}
    doc["cache_dir"] = str(tmp_path / "cache")
    doc["freebsd"]["mirror"] = UNREACHABLE
    config = tmp_path / "bsdkm.yml"
    config.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(config),
                           "--target", "freebsd-kmod-qemu", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    for variant in ("intelasm", "noasm"):
        assert f"freebsd-kmod-qemu/{variant}: 0 self-tests, 0 benchmarks; not run: {REASON}" in proc.stdout, \
            proc.stdout + proc.stderr
        state = json.loads((out / "freebsd-kmod-qemu" / variant / "state.json").read_text())
        assert state["failure"]["reason"] == "target-unavailable"
        why = state["failure"]["evidence"][0]  # what the mirror said: the reason kept with the run
        assert why.startswith(f"{UNREACHABLE}: ") and f"{UNREACHABLE}/" in why[len(UNREACHABLE):], why
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"]["not_run"] == [{"target": "freebsd-kmod-qemu", "variant": v, "reason": REASON}
                                             for v in ("intelasm", "noasm")]
    assert "FAILED" not in proc.stdout
