"""A PR build's base, stage by stage: ``stage load --base-out`` measures the base and
the head in alternating rounds, ``stage gate --base-out`` judges the head's repeats against the base's.

The programs are stand-ins that print real wolfSSL output from the shared fixtures and note which side
ran, so the order of the rounds is seen directly; everything else (the stage command, state files,
parsers, the learned gate) is the real thing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, ROOT, interleaved_rounds
from test_sec_sources import repo  # noqa: F401 - the fixture: a bare repository with main and a PR head

from buildbot_bsdkm.commands import stage_cmd
from buildbot_bsdkm.commands.run_cmd import base_override
from buildbot_bsdkm.model import from_json

BSDKM_CI = str(Path(sys.executable).parent / "bsdkm-ci")
SELFTEST = FIXTURES / "userspace/noasm/testwolfcrypt.txt"
BENCH = FIXTURES / "userspace/noasm/bench_default.txt"


def built(out: Path, side: str, order: Path) -> None:
    """What ``stage fetch/configure/build --out out`` leaves: programs recorded in state.json."""
    bin_dir = out / "tree" / "wolfcrypt" / "bin"  # the programs run in their tree's top directory
    bin_dir.mkdir(parents=True)
    programs = {}
    for name, fixture in (("testwolfcrypt", SELFTEST), ("benchmark", BENCH)):
        prog = bin_dir / name
        note = f"echo {side} >> {order}\n" if name == "benchmark" else ""
        prog.write_text(f"#!/bin/sh\n{note}cat {fixture}\n")
        prog.chmod(0o755)
        programs[name] = str(prog)
    run_dir = out / "userspace" / "noasm"
    run_dir.mkdir(parents=True)
    state = {"target": "userspace", "variant": "noasm", "programs": programs,
             "stages": {"fetch": 0.1, "configure": 0.1, "build": 0.1},
             "source": {"origin": side, "kind": "dir", "path": str(out / "tree")}}
    (run_dir / "state.json").write_text(json.dumps(state))


def stage(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [BSDKM_CI, "stage", *args, "--variant", "noasm", "--target", "userspace",
           "--config", str(ROOT / "bsdkm.yml")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_load_and_gate_with_the_base_built_beside_the_head(tmp_path: Path) -> None:
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    built(out / "base", "base", order)
    p = stage("load", "--out", str(out), "--base-out", str(out / "base"), "--repeats", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    state = json.loads((out / "userspace/noasm/state.json").read_text())
    assert interleaved_rounds(order.read_text().split(), 3) == state["round_order"]  # each round: A B or B A
    (head,) = from_json((out / "userspace/noasm/results.json").read_text())
    names = [Path(lg.source).name for lg in head.logs]
    assert names == ["test.log", "bench.log", "bench.2.log", "bench.3.log"]
    p = stage("gate", "--out", str(out), "--base-out", str(out / "base"))
    assert p.returncode == 0, p.stdout + p.stderr
    verdict = json.loads((out / "userspace/noasm/state.json").read_text())["verdict"]
    (perf,) = verdict["perf"]
    assert perf["base_from"] == "baseline"
    assert {(i["n_base"], i["n_head"]) for i in perf["items"]} == {(3, 3)}
    assert verdict["notes"][0] == "base measured next to the head, interleaved, 3 round(s)"


def test_gate_without_a_usable_base_uses_history_and_says_why(tmp_path: Path) -> None:
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    assert stage("load", "--out", str(out)).returncode == 0  # no base: one run, as before
    assert order.read_text().split() == ["head"]
    p = stage("gate", "--out", str(out), "--base-out", str(out / "base"))
    verdict = json.loads((out / "userspace/noasm/state.json").read_text())["verdict"]
    assert verdict["notes"][0].startswith("no base build in "), (p.stdout, verdict["notes"])
    assert verdict["notes"][0].endswith(": gated against history")


def test_a_base_that_failed_to_build_leaves_the_head_measured_once(tmp_path: Path) -> None:
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    built(out / "base", "base", order)
    state = out / "base/userspace/noasm/state.json"
    doc = json.loads(state.read_text())
    doc["failure"] = {"stage": "build", "message": "build: error: x", "category": "real", "reason": "compile",
                      "evidence": []}
    state.write_text(json.dumps(doc))
    p = stage("load", "--out", str(out), "--base-out", str(out / "base"), "--repeats", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert order.read_text().split() == ["head"]  # no rounds without a base to alternate with
    p = stage("gate", "--out", str(out), "--base-out", str(out / "base"))
    notes = json.loads((out / "userspace/noasm/state.json").read_text())["verdict"]["notes"]
    assert notes[0] == "base build unusable (build: error: x): gated against history", notes


def test_base_options_apply_to_load_and_gate_only() -> None:
    parser = __import__("buildbot_bsdkm.cli", fromlist=["build_parser"]).build_parser()
    for argv, message in (
        (["stage", "build", "--base-out", "b"], "--base-out applies to 'stage load' and 'stage gate'"),
        (["stage", "load", "--repeats", "3"], "--repeats applies to 'stage load --base-out DIR' only"),
        (["stage", "load", "--base-out", "b", "--repeats", "0"], "--repeats must be at least 1"),
        (["stage", "load", "--base-out", "o", "--out", "o"], "the same directory as --out"),
        (["stage", "load", "--side", "base", "--base-out", "b"], "--side base is the base itself"),
    ):
        args = parser.parse_args([*argv, "--variant", "noasm", "--target", "userspace",
                                  *([] if "--out" in argv else ["--out", "o"])])
        try:
            stage_cmd._base_options(args)
        except Exception as e:  # noqa: BLE001 - the UsageError's message is what is checked
            assert message in str(e), (argv, e)
        else:
            raise AssertionError(f"{argv}: accepted")


def test_confirm_re_measures_base_and_head_interleaved_as_new_runs(tmp_path: Path) -> None:
    from buildbot_bsdkm.config.bsdkm_yml import load_config
    from buildbot_bsdkm.pipeline.job import Job
    from buildbot_bsdkm.pipeline.jobs.pair import load_interleaved
    from buildbot_bsdkm.pipeline.rounds import remeasurer as _remeasurer
    from buildbot_bsdkm.pipeline.stages import collect

    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    built(out / "base", "base", order)
    config = load_config(ROOT / "bsdkm.yml")
    # two rounds are below the gate's min_repeats: no more rounds here, this is about confirm's
    config = dataclasses.replace(config, benchmark=dataclasses.replace(config.benchmark, max_repeats=2))
    head, base = (Job(config, "userspace", "noasm", root, progress=lambda _: None)
                  for root in (out, out / "base"))
    assert load_interleaved(head, base, 2) is None
    first_head, first_base = collect(head)[0], collect(base)[0]
    again = _remeasurer([head], {("userspace", "noasm"): base}, [first_head], [first_base], 3, lambda _: None)
    assert again([("userspace", "intelasm")]) == ([], [])  # only the pairs asked for
    (h,), (b,) = again([("userspace", "noasm")])
    seen = interleaved_rounds(order.read_text().split(), 5)  # 2 rounds, then 3 confirm rounds
    assert seen == f"{head.state['round_order']}, {head.state['confirm_round_order']}"
    assert [Path(lg.source).name for lg in h.logs] == [f"bench.confirm.{i}.log" for i in (1, 2, 3)]
    assert len(b.logs) == 3 and all(lg.benchmarks for lg in b.logs)
    assert h.metadata == first_head.metadata  # the same fingerprint: comparable with the first runs
    assert len(collect(head)[0].logs) == 3  # the run's own results keep the first measurement only


def test_the_base_of_the_same_repository_gets_a_work_tree_of_its_own(repo, tmp_path: Path) -> None:  # noqa: F811
    # Head and base are usually one repository: fetched into one tree, the base would check out over
    # the head and both sides would build the base.
    url, main, pr = repo
    out = tmp_path / "bsdkm-out"
    env = {**__import__("os").environ, "BSDKM_CACHE": str(tmp_path / "cache")}

    def fetch(*extra: str) -> dict:
        cmd = [BSDKM_CI, "stage", "fetch", "--variant", "noasm", "--target", "userspace", "--out", str(out),
               "--config", str(ROOT / "bsdkm.yml"), "--source-git", url, *extra]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        return p

    fetch("--source-ref", "refs/pull/1/head", "--source-commit", pr)
    fetch("--side", "base", "--source-ref", main, "--source-commit", main)
    head = json.loads((out / "userspace/noasm/state.json").read_text())["source"]
    base = json.loads((out / "base/userspace/noasm/state.json").read_text())["source"]
    assert (head["commit"], base["commit"]) == (pr, main)
    assert head["path"] != base["path"]
    assert "5.0.1-pr" in (Path(head["path"]) / "configure.ac").read_text()  # the head's tree is the head's
    assert "5.0.0" in (Path(base["path"]) / "configure.ac").read_text()
    assert base_override(argparse.Namespace(base_git=url, base_ref=main, base_dir=None)).slot == "base"


def test_release_sides_of_one_repository_get_trees_of_their_own(repo, tmp_path: Path) -> None:  # noqa: F811
    from buildbot_bsdkm.config.bsdkm_yml import GitSource, load_config
    from buildbot_bsdkm.pipeline.jobs import release as release

    url, main, pr = repo
    config = dataclasses.replace(load_config(ROOT / "bsdkm.yml"), cache_dir=tmp_path / "cache")
    sides = [release.SideResult(name, GitSource(url, ref)) for name, ref in (("candidate", pr),
                                                                           ("previous", main))]
    for side in sides:
        release._fetch(side, config, lambda _: None)
    cand, prev = (Path(s.tree.path) for s in sides)
    assert cand != prev and "5.0.1-pr" in (cand / "configure.ac").read_text()


CONFIRM_POLICY = """\
perf: {alpha: 0.01, tail: 1.8, reduce: best, min_repeats: 3, confirm: true}
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
"""


def scripted(out: Path, side: str, logs: list[str], order: Path) -> None:
    """Like ``built``, but the benchmark prints ``logs`` one per run, in order, and notes its side."""
    built(out, side, order)
    data = out / "logs"
    data.mkdir()
    for i, text in enumerate(logs, 1):
        (data / f"{i}.txt").write_text(text)
    bench = out / "tree" / "wolfcrypt" / "bin" / "benchmark"
    bench.write_text(f"#!/bin/sh\necho {side} >> {order}\n"
                     f"n=$(( $(cat {data}/n 2>/dev/null || echo 0) + 1 ))\n"
                     f"echo $n > {data}/n\ncat {data}/$n.txt\n")


def slowed_text(text: str, item: str, factor: float) -> str:
    """A wolfCrypt benchmark log with ``item`` slower by ``factor`` (rate down, cycles per byte up)."""
    import re

    def one(m: re.Match[str]) -> str:
        return f"{m[1]}{float(m[2]) * factor:.3f} MiB/s Cycles per byte = {float(m[3]) / factor:6.2f}"
    pattern = rf"^({re.escape(item)}\s.*?)([\d.]+) MiB/s Cycles per byte =\s+([\d.]+)"
    return "\n".join(re.sub(pattern, one, line) for line in text.splitlines()) + "\n"


def confirm_case(tmp_path: Path, confirm_slow: bool
                 ) -> tuple[subprocess.CompletedProcess[str], dict, list[str]]:
    """3 interleaved rounds with the head's AES-128-GCM-enc 30 % slower, then ``stage gate --base-out``
    under a ``confirm: true`` policy; the re-measurement's head is slow again or healthy."""
    noise = [p.read_text() for p in sorted((FIXTURES / "noise").glob("noasm_r*.txt"))]
    slow = [slowed_text(t, "AES-128-GCM-enc", 0.7) for t in noise[3:6]]
    again = [slowed_text(t, "AES-128-GCM-enc", 0.7) for t in noise[6:9]] if confirm_slow else noise[6:9]
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    scripted(out, "head", slow + again, order)
    scripted(out / "base", "base", noise[0:3] + noise[0:3], order)
    (tmp_path / "policy.yml").write_text(CONFIRM_POLICY)
    config = tmp_path / "bsdkm.yml"
    # three rounds and no more (benchmark.max_repeats): the logs after them are confirm's
    config.write_text((ROOT / "bsdkm.yml").read_text().replace("policy: policies/default.yml",
                                                               f"policy: {tmp_path / 'policy.yml'}")
                      .replace("  max_repeats: 15 ", "  max_repeats: 3 "))

    def stage_here(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [BSDKM_CI, "stage", *args, "--variant", "noasm", "--target", "userspace",
               "--config", str(config)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    p = stage_here("load", "--out", str(out), "--base-out", str(out / "base"), "--repeats", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    gate = stage_here("gate", "--out", str(out), "--base-out", str(out / "base"))
    verdict = json.loads((out / "userspace/noasm/state.json").read_text())["verdict"]
    return gate, verdict, order.read_text().split()


def _gcm(verdict: dict) -> dict:
    (check,) = [c for c in verdict["checks"] if c["kind"] == "regression" and c["name"] == "AES-128-GCM-enc"]
    return check


def test_stage_gate_confirms_a_regression_by_measuring_base_and_head_again(tmp_path: Path) -> None:
    gate, verdict, order = confirm_case(tmp_path, confirm_slow=True)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    interleaved_rounds(order, 6)  # 3 load rounds, then 3 confirm rounds, on this worker
    check = _gcm(verdict)
    assert not check["passed"] and "confirmed by a re-measurement" in check["message"]
    assert check["detail"]["confirm"]["verdict"] == "regression"
    said = "confirm: re-measured userspace/noasm base and head interleaved again: 1 regression(s) confirmed"
    assert any(n.startswith(said + ", 0 withdrawn") for n in verdict["notes"]), verdict["notes"]
    names = sorted(p.name for p in (tmp_path / "bsdkm-out/userspace/noasm").glob("bench.confirm.*.log"))
    assert names == ["bench.confirm.1.log", "bench.confirm.2.log", "bench.confirm.3.log"]


def test_stage_gate_withdraws_a_regression_the_re_measurement_does_not_see(tmp_path: Path) -> None:
    gate, verdict, order = confirm_case(tmp_path, confirm_slow=False)
    assert gate.returncode == 0, gate.stdout + gate.stderr  # before: exit 1, "nothing can measure again"
    interleaved_rounds(order, 6)
    check = _gcm(verdict)
    assert check["passed"] and "NOT confirmed by a re-measurement" in check["message"]
    assert check["detail"]["confirm"]["verdict"] != "regression"
    assert verdict["passed"]
