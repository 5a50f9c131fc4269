"""``freebsd-kmod`` perf runs: base and head kldloaded in alternating rounds, through the double.

FreeBSD cannot run here: the module build is replaced by a stand-in ``.ko`` per source (the build
needs a FreeBSD worker); everything after it is the real pipeline running the real
``kmod/freebsd`` scripts against the replay double (tests/freebsd_double: its benchmark block is
the real FreeBSD recording; the per-cycle variation is simulated, see its README).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES, interleaved_rounds
from freebsd_double import FreeBSDDouble, load_scenario

from buildbot_bsdkm.config.bsdkm_yml import LocalSource, parse_config
from buildbot_bsdkm.model import RunResult, from_json
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.pipeline import targets as registry
from buildbot_bsdkm.pipeline.job import Job
from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix
from buildbot_bsdkm.pipeline.jobs.pair import load_interleaved
from buildbot_bsdkm.pipeline.rounds import measured_interleaved
from buildbot_bsdkm.pipeline.runtime.stage_error import real_error
from buildbot_bsdkm.pipeline.stages import read_run, run_stage
from buildbot_bsdkm.pipeline.targets.freebsd_kmod import target as freebsd
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.policy import evaluate, load_policy, perf_inputs

CONFIG = """\
source: {{local: {head}}}
targets:
  freebsd-kmod: {{flags: []}}
variants:
  intelasm: {{flags: [--enable-aesni, --enable-intelasm], targets: [freebsd-kmod]}}
"""


def _tree(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "configure.ac").write_text("AC_INIT([wolfssl],[5.9.2],[x])\n")
    (path / "configure").write_text("#!/bin/sh\n")  # no autogen: nothing is built here
    return path


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FreeBSDDouble:
    """A booted double whose load cycles vary like repeated runs, as the worker's environment."""
    scenario = {**load_scenario("success"), "cycle_variation": {"seed": 7, "spread_pct": 1.0}}
    double = FreeBSDDouble.boot_doc(scenario, tmp_path / "kernel")
    for key, value in double.env().items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    monkeypatch.setattr(freebsd, "default_privilege", lambda: [])

    def build(self, config, variant, source, cache, jobs, log, patterns=None):  # noqa: ANN001, ANN202
        if (Path(source) / "BROKEN").exists():
            raise real_error("build", "compile", "compile failed: error: stand-in for a broken base")
        ko = Path(source) / "bsdkm" / "libwolfssl.ko"
        ko.parent.mkdir(exist_ok=True)
        ko.write_bytes(b"\x7fELF stand-in module of " + str(source).encode())
        return ko

    monkeypatch.setattr(freebsd.FreeBSDWorkerTarget, "build", build)
    monkeypatch.setattr(freebsd.FreeBSDWorkerTarget, "check_worker", lambda self, config: None)  # not FreeBSD
    return double


def _config(tmp_path: Path, max_repeats: int):  # noqa: ANN202
    """The config, with at most ``max_repeats`` rounds a side (the double's simulated variation is
    often too noisy to decide: more rounds would follow up to the default 15)."""
    head = _tree(tmp_path / "head-src")
    config = parse_config(CONFIG.format(head=head), str(tmp_path / "bsdkm.yml"), tmp_path)
    return replace(config, benchmark=replace(config.benchmark, max_repeats=max_repeats))


def _stage_pair(tmp_path: Path, max_repeats: int = 2) -> tuple[Job, Job]:
    """Head and base built by their stages as the Buildbot steps do (``--side base``: out/base)."""
    config = _config(tmp_path, max_repeats)
    base_config = replace(config, source=LocalSource(_tree(tmp_path / "base-src")))
    head = Job(config, "freebsd-kmod", "intelasm", tmp_path / "out", progress=lambda m: None)
    base = Job(base_config, "freebsd-kmod", "intelasm", tmp_path / "out" / "base", progress=lambda m: None)
    for job in (head, base):
        for stage in ("fetch", "configure", "build"):
            assert run_stage(job, stage) is None
    return head, base


def _cycles(double: FreeBSDDouble) -> list[str]:
    """kldload/kldunload calls in order: which tree's module was loaded, and each unload."""
    out = []
    for call in double.calls():
        if call[0] == "kldload":
            out.append("load " + ("base" if "/base-src/" in call[-1] else "head"))
        elif call[0] == "kldunload":
            out.append("unload")
    return out


def test_which_targets_measure_a_base_is_the_targets_own_property() -> None:
    got = {name: (t.perf_measurement, t.bench_repeats, t.measures_base())
           for name, t in registry.all_targets().items()}
    assert got == {
        "userspace": (True, True, True),
        "freebsd-kmod": (True, True, True),  # a real FreeBSD machine: kldload/kldunload again
        "linux-kmod-qemu": (False, False, False),  # QEMU TCG: emulator speeds
        "freebsd-kmod-qemu": (False, False, False),
    }
    assert [n for n in registry.all_targets() if measured_interleaved(n)] == ["userspace", "freebsd-kmod"]
    assert not measured_interleaved("no-such-target")


def test_freebsd_kmod_base_and_head_are_kldloaded_in_rounds(tmp_path: Path, worker: FreeBSDDouble) -> None:
    config = _config(tmp_path, 3)
    base = _tree(tmp_path / "base-src")
    out = tmp_path / "out"
    lines: list[str] = []
    result = run_matrix(config, None, None, out, progress=lines.append, base_source=LocalSource(base),
                        repeats=3)
    assert any(": round 3 of 3 (" in ln for ln in lines), lines
    cycles = _cycles(worker)
    assert cycles[1::2] == ["unload"] * 6  # every load unloaded before the next
    loads = [c.removeprefix("load ") for c in cycles[0::2]]
    (state_file,) = (out / "freebsd-kmod").glob("*/state.json")
    state = json.loads(state_file.read_text())
    assert interleaved_rounds(loads, 3) == state["round_order"]
    (head,) = result.runs
    assert head.failure is None, head.failure
    names = [Path(lg.source).name for lg in head.logs]
    assert names == ["kernel.log", "kernel.2.log", "kernel.3.log"]
    (base_run,) = from_json((out / "base-runs.json").read_text())
    assert [Path(lg.source).name for lg in base_run.logs] == names
    # Each round is its own load cycle: the double varies them (simulated), the parser reads them all.
    aes = [next(b for b in lg.benchmarks if b.name == "AES-128-CBC-enc") for lg in head.logs]
    assert len({b.cycles for b in aes}) == 3
    (perf,) = result.verdict.perf
    assert perf["base_from"] == "baseline"
    assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(3, 3)}
    assert "interleaved, 3 round(s) (freebsd-kmod/intelasm)" in result.verdict.notes[0]


def test_a_base_that_fails_to_build_never_fails_the_head(tmp_path: Path, worker: FreeBSDDouble) -> None:
    config = _config(tmp_path, 3)
    base = _tree(tmp_path / "base-src")
    (base / "BROKEN").write_text("")
    result = run_matrix(config, None, None, tmp_path / "out", progress=lambda m: None,
                        base_source=LocalSource(base), repeats=3)
    (head,) = result.runs
    assert head.failure is None and len(head.logs) == 3
    assert _cycles(worker) == ["load head", "unload"] * 3  # the head's rounds, no base to load
    # no base and (here) no history: the learned gate says so; the head's run passes
    assert result.verdict.perf == [] and result.passed, result.verdict.summary()
    assert any("base unusable (build failed: compile failed" in n and "gated against history" in n
               for n in result.verdict.notes), result.verdict.notes


def test_a_base_round_that_cannot_run_stops_the_base_only(tmp_path: Path, worker: FreeBSDDouble,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A round the worker cannot run (here: kldload refused, the module still loaded) is the base's
    failure, recorded, never an exception out of the run; the head's rounds go on."""
    real = freebsd.FreeBSDWorkerTarget.repeat_load

    def repeat_load(self, config, ko, work):  # noqa: ANN001, ANN202
        if "/base-src/" in str(ko):
            raise freebsd.infra_error("load", "ci-exception", "libwolfssl was already loaded on the worker")
        return real(self, config, ko, work)

    monkeypatch.setattr(freebsd.FreeBSDWorkerTarget, "repeat_load", repeat_load)
    config = _config(tmp_path, 3)
    result = run_matrix(config, None, None, tmp_path / "out", progress=lambda m: None,
                        base_source=LocalSource(_tree(tmp_path / "base-src")), repeats=3)
    (head,) = result.runs
    assert head.failure is None and len(head.logs) == 3
    cycles = _cycles(worker)
    assert cycles[1::2] == ["unload"] * 4
    loads = [c.removeprefix("load ") for c in cycles[0::2]]
    assert sorted(loads) == ["base", "head", "head", "head"] and "base" in loads[:2]  # base: round 1 only
    assert any("base unusable (load failed: libwolfssl was already loaded" in n for n in result.verdict.notes)
    assert result.verdict.perf == []  # not its one good round: history (none here), as the note says


def test_stage_load_with_base_out_whose_base_cannot_load(tmp_path: Path, worker: FreeBSDDouble) -> None:
    """The Buildbot path (``stage load --base-out``): the base's load fails, the head is measured once
    and the gate says it used history."""
    head, base = _stage_pair(tmp_path)
    Path(base.state["ko"]).unlink()  # the base's module is gone: its load fails (infrastructure)
    assert load_interleaved(head, base, 3) is None
    assert base.failure is not None and "does not exist" in base.failure.message
    assert _cycles(worker) == ["load head", "unload"]
    head.base_out = tmp_path / "out" / "base"
    run_stage(head, "unload")
    run_stage(head, "gate")
    notes = head.state["verdict"]["notes"]
    assert any("base build unusable" in n and "gated against history" in n for n in notes), notes


def test_stage_load_with_base_out_measures_rounds(tmp_path: Path, worker: FreeBSDDouble) -> None:
    head, base = _stage_pair(tmp_path)
    assert load_interleaved(head, base, 2) is None
    # the head's first cycle is its load stage; both sides' second rounds follow
    loads = [c.removeprefix("load ") for c in _cycles(worker) if c != "unload"]
    assert interleaved_rounds(loads, 2) == head.state["round_order"]
    head.base_out = tmp_path / "out" / "base"
    assert run_stage(head, "unload") is None
    run_stage(head, "gate")
    assert any("interleaved, 2 round(s)" in n for n in head.state["verdict"]["notes"])
    assert [Path(lg.source).name for lg in read_run(head).logs] == ["kernel.log", "kernel.2.log"]
    head.state.pop("verdict")
    assert run_stage(head, "load") is None  # the load again (a retried step): its rounds start over
    assert "repeats" not in head.state and len(read_run(head).logs) == 1


def test_kldload_rounds_go_on_while_too_noisy_to_decide(tmp_path: Path, worker: FreeBSDDouble) -> None:
    """``benchmark.max_repeats`` on a kernel target: more kldload cycles of base and head, each unloaded
    before the next; the gate judges them all and says how the rounds grew. A load run again starts
    over."""
    head, base = _stage_pair(tmp_path, max_repeats=4)
    assert load_interleaved(head, base, 2) is None
    assert head.state["extended_rounds"] == [2, 4]
    cycles = _cycles(worker)
    assert cycles[1::2] == ["unload"] * 8
    loads = [c.removeprefix("load ") for c in cycles[0::2]]
    assert interleaved_rounds(loads, 4) == head.state["round_order"]
    assert [Path(lg.source).name for lg in read_run(head).logs] == [
        "kernel.log", "kernel.2.log", "kernel.3.log", "kernel.4.log"]
    head.base_out = tmp_path / "out" / "base"
    assert run_stage(head, "unload") is None
    run_stage(head, "gate")
    assert ("base measured next to the head, interleaved, 4 round(s) (the first 2, then more while too "
            "noisy to decide)") in head.state["verdict"]["notes"]
    assert run_stage(head, "load") is None
    assert "extended_rounds" not in head.state


def test_qemu_targets_are_not_regression_gated(tmp_path: Path) -> None:
    """What ``gate_runs`` hands the policy: no base or history for a QEMU TCG target's runs."""
    log = parse_file(FIXTURES / "linuxkm/asm-full-bench.console.log")

    def gate(target: str) -> tuple[list, list[str]]:
        runs = [RunResult("intelasm", target, logs=[log])]
        base, history, notes = perf_inputs(runs, [RunResult("intelasm", target, logs=[log])],
                                           [RunResult("intelasm", target, logs=[log])] * 10)
        return evaluate(runs, load_policy(None), base, history).of_kind("regression"), notes

    checks, notes = gate("linux-kmod-qemu")
    assert checks == [] and notes == [
        "linux-kmod-qemu: QEMU TCG emulates the CPU: emulator speeds, not the module's performance: "
        "not regression-gated"]
    checks, notes = gate("userspace")  # the same numbers on a perf target are gated
    assert checks and notes == []


def test_kmod_dirs_are_read_from_the_environment_at_call_time(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """linuxkm read $BSDKM_KMOD_LINUX when imported; set later, it was ignored."""
    monkeypatch.setenv("BSDKM_KMOD_LINUX", str(tmp_path / "linux"))
    with pytest.raises(Exception, match=f"harness script missing: {tmp_path}/linux/init"):
        linuxkm._script("init")
    monkeypatch.setenv("BSDKM_KMOD_FREEBSD", str(tmp_path / "freebsd"))
    ko = tmp_path / "libwolfssl.ko"
    ko.write_bytes(b"\x7fELF")
    with pytest.raises(Exception, match=f"FreeBSD scripts missing in {tmp_path}/freebsd"):
        freebsd.run_freebsd_module(ko, tmp_path / "work", timeout_s=5, privilege=[])


def test_run_with_a_base_builds_none_for_a_qemu_target(tmp_path: Path) -> None:
    """``run --base-*`` on a QEMU target: no base fetched or built, and the progress says why."""
    text = ("source: {local: /nonexistent/head}\ntargets:\n  linux-kmod-qemu: {flags: []}\n"
            "variants:\n  noasm: {flags: [--disable-asm], targets: [linux-kmod-qemu]}\n")
    config = parse_config(text, str(tmp_path / "bsdkm.yml"), tmp_path)
    lines: list[str] = []
    result = run_matrix(config, None, None, tmp_path / "out", progress=lines.append,
                        base_source=LocalSource(tmp_path / "no-base"), repeats=3)
    assert any("linux-kmod-qemu/noasm: no base built (QEMU TCG emulates the CPU" in ln for ln in lines), lines
    assert not any("base fetch" in ln or "base source" in ln for ln in lines), lines
    assert not (tmp_path / "out" / "base").exists() and not (tmp_path / "out" / "base-runs.json").exists()
    assert result.runs[0].failure is not None and result.runs[0].failure.stage == "fetch"  # the head's own
