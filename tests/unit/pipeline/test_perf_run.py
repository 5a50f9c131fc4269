"""``bsdkm-ci run`` with a base build: base and head measured in alternating rounds.

The base here is the same wolfSSL source as the head (the build is shared by its inputs, and with
tests/targets/userspace/test_pipeline_e2e.py's config, so nothing extra is compiled): what is tested
is the plumbing (two sources, interleaved repeats, the gate judging the head's repeats against the
base's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
from conftest import ROOT, interleaved_rounds
from test_pipeline_e2e import CONFIG

from buildbot_bsdkm.cli import UsageError
from buildbot_bsdkm.commands.run_cmd import base_override
from buildbot_bsdkm.config.bsdkm_yml import LocalSource, parse_config
from buildbot_bsdkm.pipeline.jobs.matrix import MatrixResult, run_matrix


def run_with_base(tmp_path: Path, text: str, repeats: int,
                  max_repeats: int) -> tuple[MatrixResult, list[str]]:
    """``run`` of userspace/intelasm with the same source as its base, into ``tmp_path/out``."""
    config = parse_config(text, str(tmp_path / "bsdkm.yml"), tmp_path)
    config = dataclasses.replace(config, benchmark=dataclasses.replace(config.benchmark,
                                                                       max_repeats=max_repeats))
    lines: list[str] = []
    result = run_matrix(config, ["intelasm"], ["userspace"], tmp_path / "out", progress=lines.append,
                        base_source=config.source, repeats=repeats)
    return result, lines


@pytest.mark.slow
def test_base_and_head_are_measured_interleaved_and_gated_together(tmp_path: Path) -> None:
    # the plumbing of the first rounds; more rounds while too noisy: the next test
    result, lines = run_with_base(tmp_path, CONFIG, 3, 3)
    out = tmp_path / "out"
    assert any("intelasm: round 3 of 3 (" in ln for ln in lines), lines
    (head,) = result.runs
    names = [Path(lg.source).name for lg in head.logs]
    assert names == ["test.log", "bench.log", "bench.2.log", "bench.3.log"]
    base_dir, head_dir = out / "base" / "userspace" / "intelasm", out / "userspace" / "intelasm"
    assert (base_dir / "results.json").is_file() and (base_dir / "bench.3.log").is_file()
    # Rounds: each round's two logs are written after the previous round's, in the order it drew
    order = sorted([(p.stat().st_mtime_ns, p.parent.parent.parent.name, p.name)
                    for d in (base_dir, head_dir) for p in d.glob("bench*.log")])
    assert [name for _, _, name in order] == ["bench.log"] * 2 + ["bench.2.log"] * 2 + ["bench.3.log"] * 2
    sides = [{"base": "base", "out": "head"}[side] for _, side, _ in order]
    state = json.loads((head_dir / "state.json").read_text())
    assert interleaved_rounds(sides, 3) == state["round_order"]
    (perf,) = result.verdict.perf
    assert perf["base_from"] == "baseline"
    assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(3, 3)}
    assert "interleaved, 3 round(s)" in result.verdict.notes[0]
    assert head.metadata["fingerprint"]["id"]


@pytest.mark.slow
def test_run_measures_more_rounds_while_too_noisy_and_judges_all_of_them(tmp_path: Path) -> None:
    """``benchmark.max_repeats``: a pair whose items cannot resolve ``perf.resolve_pct`` gets as many
    rounds again, real benchmark runs of base and head interleaved, and one verdict on all of them."""
    policy = tmp_path / "policy.yml"
    shipped = (ROOT / "policies" / "default.yml").read_text()
    assert "  resolve_pct: 10 " in shipped
    policy.write_text(shipped.replace("  resolve_pct: 10 ", "  resolve_pct: 0.01 "))  # never resolved
    text = CONFIG.replace(str(ROOT / "policies" / "default.yml"), str(policy))
    result, lines = run_with_base(tmp_path, text, 2, 5)
    out = tmp_path / "out"
    more = [ln for ln in lines if ln.endswith("): too noisy to decide yet")]
    assert [ln.split("intelasm: ", 1)[1][:13] for ln in more] == ["round 3 of 4 ", "round 4 of 4 ",
                                                                   "round 5 of 5 "], lines
    head_dir = out / "userspace" / "intelasm"
    state = json.loads((head_dir / "state.json").read_text())
    assert state["extended_rounds"] == [2, 5]
    (head,) = result.runs
    assert [Path(lg.source).name for lg in head.logs if lg.benchmarks] == [
        "bench.log", *(f"bench.{i}.log" for i in range(2, 6))]
    assert (out / "base" / "userspace" / "intelasm" / "bench.5.log").is_file()
    (perf,) = result.verdict.perf
    assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(5, 5)}
    first, grown = result.verdict.notes[:2]
    assert first.endswith(" measured next to the head, interleaved, 2 round(s) (userspace/intelasm)")
    assert grown == ("extend: too noisy to resolve a small drop in the first rounds, measured more rounds "
                     "(base and head interleaved) and judged on all of them: userspace/intelasm 2 -> 5")


def test_base_source_arguments() -> None:
    def ns(**kw: str | None) -> argparse.Namespace:
        return argparse.Namespace(**{"base_git": None, "base_ref": None, "base_dir": None, **kw})

    assert base_override(ns()) is None
    assert isinstance(base_override(ns(base_dir="/")), LocalSource)
    with pytest.raises(UsageError, match="--base-ref 'main' needs --base-git"):
        base_override(ns(base_ref="main"))
    with pytest.raises(UsageError, match="--base-dir /nonexistent-x: not a directory"):
        base_override(ns(base_dir="/nonexistent-x"))


def test_run_reads_its_history_before_building_anything(tmp_path: Path) -> None:
    import subprocess
    import sys

    empty = tmp_path / "history"
    empty.mkdir()
    p = subprocess.run([str(Path(sys.executable).parent / "bsdkm-ci"), "run", "--history", str(empty),
                        "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "no .json results documents" in p.stderr
    assert not (tmp_path / "out").exists()
