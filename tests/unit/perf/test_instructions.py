"""Instruction counts of a fixed workload (perf/instruction_counts.py,
pipeline/runtime/instruction_counting.py, policy/instruction_gates.py, report/instruction_report.py,
report/junit.py's instructions suite)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import Config, parse_config
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult
from buildbot_bsdkm.perf.instruction_counts import (
    MEASURED,
    METADATA_KEY,
    MISSING,
    UNMEASURABLE,
    InstructionCounts,
    ItemCount,
    compare_counts,
    counts_of,
    fmt_change,
    parse_callgrind,
    parse_driver_output,
)
from buildbot_bsdkm.pipeline.runtime import instruction_counting as pinstr
from buildbot_bsdkm.policy import CheckKind, PolicyError, evaluate, load_policy, parse_policy
from buildbot_bsdkm.report.instruction_report import instruction_blocks, summary_line
from buildbot_bsdkm.report.junit import junit_xml
from buildbot_bsdkm.report.markdown import markdown_report

DATA = Path(__file__).parents[2] / "data" / "instructions"

needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")

PROFILE = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1500

ob=/tmp/drv
fl=???
fn=bsdkm_measure
0 10
cfn=Sha256Update
calls=4 0
0 1490

fn=Sha256Update
0 90
cfn=Transform_Sha256
calls=20 0
0 1400

fn=Transform_Sha256
0 1400

fn=(below main)'2
0 0
"""


def test_callgrind_part_gives_each_functions_own_count() -> None:
    p = parse_callgrind(PROFILE)
    assert p.total == 1500
    # a call's inclusive cost (the line after calls=) belongs to the callee, not the caller
    assert p.functions == {"bsdkm_measure": 10, "Sha256Update": 90, "Transform_Sha256": 1400}


def test_callgrind_garbage_is_named() -> None:
    with pytest.raises(ValueError, match="not a Callgrind profile"):
        parse_callgrind("hello\nworld\n", "x.out")
    with pytest.raises(ValueError, match="x.out:3: a cost line before"):
        parse_callgrind("events: Ir\n\n0 5\n", "x.out")


def test_driver_lines() -> None:
    out = parse_driver_output(
        "bsdkm-instr begin 1\n"
        "bsdkm-instr item 1 RSA 2048 public kind=asym amount=64 block=0 calls=64 rc=0\n"
        "noise\n"
        "bsdkm-instr skip 2 FOO reason=not-in-this-build\n"
        "bsdkm-instr end\n")
    assert out.begun and out.ended
    assert [(x.index, x.name, x.ran, x.kind, x.amount) for x in out.lines] == [
        (1, "RSA 2048 public", True, "asym", 64), (2, "FOO", False, "sym", 0)]
    assert out.lines[1].reason == "not in this build"


def _counts(per_byte_sha: float, *, extra_fn: int = 0, status: str = MEASURED) -> InstructionCounts:
    amount = 1 << 20
    sha_total = int(per_byte_sha * amount)
    sha = ItemCount("SHA-256", "sym", amount, sha_total, status=status,
                    functions={"Transform_Sha256_AVX2_RORX_Len": sha_total - 3000 - extra_fn,
                               "Sha256Update": 3000 + extra_fn})
    if status != MEASURED:
        sha = ItemCount("SHA-256", status=status, reason="Valgrind cannot run this code (SIGILL)")
    gcm = ItemCount("AES-128-GCM-enc", "sym", amount, 2 * amount,
                    functions={"AES_GCM_encrypt_avx2": 2 * amount})
    rsa = ItemCount("RSA 2048 public", "asym", 64, 64 * 236035,
                    functions={"sp_2048_mont_reduce_32": 64 * 236035})
    return InstructionCounts([gcm, sha, rsa], valgrind="valgrind-3.19.0", seconds=0.9)


def test_compare_1v1_names_the_function_and_never_passes_the_uncounted() -> None:
    base = _counts(27.43)
    plant = int(0.01 * 27.43 * (1 << 20))
    head = _counts(27.43 + 0.01 * 27.43, extra_fn=plant)
    changes = {c.name: c for c in compare_counts(base, head, 0.5)}
    sha = changes["SHA-256"]
    assert sha.regressed and sha.change_pct == pytest.approx(1.0, abs=0.01)
    assert sha.functions[0].name == "Sha256Update" and sha.functions[0].change_pct > 1000
    assert not changes["AES-128-GCM-enc"].regressed and changes["AES-128-GCM-enc"].change_pct == 0.0
    dead = {c.name: c for c in compare_counts(base, _counts(0, status=UNMEASURABLE), 0.5)}["SHA-256"]
    assert not dead.compared and not dead.regressed and "SIGILL" in (dead.reason or "")
    assert fmt_change(-0.0) == "\u22120.00 %" and fmt_change(1.004) == "+1.00 %"


def test_counts_round_trip_through_run_metadata() -> None:
    c = _counts(27.43)
    again = counts_of({METADATA_KEY: c.to_dict()})
    assert again is not None and again.to_dict() == c.to_dict()
    assert counts_of({}) is None and counts_of({METADATA_KEY: {"items": "x"}}) is None


# --------------------------------------------------------------------------- policy

POLICY = """
complete: false
instructions:
  block_bytes: 4096
  items: {SHA-256: 1048576, RSA 2048 public: 64}
regressions:
  - {pattern: "*", max_pct: 0.5, metric: instructions}
  - {pattern: "*", max_pct: 0.5, metric: instructions, aggregate: geomean}
"""


def test_policy_reads_the_workload_and_the_counted_rules() -> None:
    p = parse_policy(POLICY, "p.yml")
    assert p.instructions.items == {"SHA-256": 1048576, "RSA 2048 public": 64}
    assert p.instructions.block_bytes == 4096
    assert [(r.metric, r.aggregate, r.limit) for r in p.regressions] == [
        ("instructions", "item", "fixed"), ("instructions", "geomean", "fixed")]
    assert load_policy().instructions.enabled  # the default policy counts a workload


@pytest.mark.parametrize("text,problem", [
    ('regressions: [{pattern: "*", max_pct: 1, metric: instructions, limit: learned}]',
     "metric: instructions takes a fixed limit"),
    ("instructions: {items: {SHA-256: 0}}", "instructions.items.SHA-256"),
    ("instructions: {block_bytes: 99999999}", "at most 1048576"),
    ('instructions: {items: {"A=1": 5}}', "bad item name"),
    ("instructions: {cache_sim: true}", "unknown key"),
])
def test_policy_errors_name_the_key(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        parse_policy(text, "p.yml")


def _run(counts: InstructionCounts, variant: str = "intelasm") -> RunResult:
    return RunResult(variant, "userspace", metadata={METADATA_KEY: counts.to_dict()})


def test_gate_fails_a_one_percent_change_at_1v1_with_the_function_named() -> None:
    policy = parse_policy(POLICY, "p.yml")
    plant = int(0.01 * 27.43 * (1 << 20))
    head, base = _run(_counts(27.43 * 1.01, extra_fn=plant)), _run(_counts(27.43))
    verdict = evaluate([head], policy, [base])
    checks = {c.name: c for c in verdict.of_kind(CheckKind.INSTRUCTIONS)}
    sha = checks["instructions:SHA-256"]
    assert not sha.passed and "Sha256Update" in sha.message and sha.delta_pct == pytest.approx(1.0, abs=0.01)
    assert checks["instructions:AES-128-GCM-enc"].passed
    assert not verdict.passed
    # the same counts again: no alarm
    assert evaluate([_run(_counts(27.43))], policy, [base]).passed
    line = summary_line([head], verdict)
    assert line is not None and line.startswith("instructions: userspace/intelasm +1.00 % (SHA-256)")
    md = markdown_report([head], verdict)
    assert "Instruction counts: userspace/intelasm" in md and "Sha256Update" in md


def test_uncounted_items_are_noted_never_passed_and_skipped_in_junit() -> None:
    policy = parse_policy(POLICY, "p.yml")
    head, base = _run(_counts(0, status=UNMEASURABLE)), _run(_counts(27.43))
    verdict = evaluate([head], policy, [base])
    assert "instructions:SHA-256" not in {c.name for c in verdict.checks}
    assert any("not counted (not judged, not passed): SHA-256" in n for n in verdict.notes)
    xml = junit_xml([head], verdict)
    assert "bsdkm.userspace.intelasm.instructions" in xml
    assert 'message="not counted: Valgrind cannot run this code (SIGILL)"' in xml and "<skipped" in xml
    blocks = instruction_blocks([head], verdict)
    assert any(b.table and any("not counted" in r.cells[7] for r in b.table.rows) for b in blocks)


def test_no_base_counts_is_said() -> None:
    policy = parse_policy(POLICY, "p.yml")
    verdict = evaluate([_run(_counts(27.43))], policy, [RunResult("intelasm", "userspace")])
    assert any("no base instruction counts" in n for n in verdict.notes)
    assert not verdict.of_kind(CheckKind.INSTRUCTIONS)


def _timed(counts: InstructionCounts, rate: float) -> RunResult:
    """A run with counts and a timed SHA-256 of ``rate`` MiB/s."""
    run = _run(counts)
    run.logs = [LogResult("bench.log", complete=True, benchmark_complete=True,
                          benchmarks=[Benchmark("SHA-256", rate, "MiB/s", per_second=rate * 2**20)])]
    return run


def test_wall_clock_slower_with_flat_count_is_said() -> None:
    text = POLICY + '  - {pattern: "*", max_pct: 5}\n'
    policy = parse_policy(text, "p.yml")
    verdict = evaluate([_timed(_counts(27.43), 500)], policy, [_timed(_counts(27.43), 1000)])
    assert any("SHA-256 is slower by the clock but its instruction count is flat" in n for n in verdict.notes)
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    assert sha.passed and sha.detail["clock_change_pct"] == pytest.approx(-50.0)


# --------------------------------------------------------------------------- Valgrind, for real


@needs_valgrind
def test_an_instruction_valgrind_cannot_run_is_unmeasurable_and_the_rest_counted(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    subprocess.run(["gcc", "-O1", "-o", str(fake), str(DATA / "fake_driver.c")], check=True)
    got = {i.name: i for i in pinstr.count_program(
        fake, {"A": 1000, "AVX512-x": 1000, "B": 2000, "NONE": 1}, tmp_path / "work")}
    assert got["A"].status == MEASURED and got["B"].status == MEASURED
    # twice the loop, twice the instructions (the same few of set-up on both)
    assert got["B"].instructions - got["A"].instructions == pytest.approx(got["A"].instructions, rel=0.01)
    assert got["AVX512-x"].status == UNMEASURABLE
    assert "Valgrind cannot run an instruction" in (got["AVX512-x"].reason or "")
    assert got["NONE"].status == MISSING


@needs_valgrind
def test_a_relative_work_directory_counts_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the old code: the main job's out directory is relative (bsdkm-out/...), and Valgrind,
    started in the work directory, could not open its log there: nothing was counted."""
    fake = tmp_path / "fake"
    subprocess.run(["gcc", "-O1", "-o", str(fake), str(DATA / "fake_driver.c")], check=True)
    monkeypatch.chdir(tmp_path)
    got = pinstr.count_program(Path("fake"), {"A": 1000}, Path("bsdkm-out") / "work")
    assert [(i.name, i.status) for i in got] == [("A", MEASURED)], got


def test_valgrind_missing_counts_nothing_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pinstr, "valgrind_version", lambda: None)
    counts = pinstr.count_instructions(Path("/nonexistent"), {"SHA-256": 1})
    assert [i.status for i in counts.items] == [UNMEASURABLE]
    assert "valgrind is not installed" in (counts.items[0].reason or "")


PLANT_ANCHOR = "        /* add length for final */\n        AddLength(sha256, len);\n"


def planted_sha256(text: str, rounds: int = 2) -> str:
    """A few extra rounds of a loop in Sha256Update per 64-byte block (~1 % of SHA-256's work)."""
    assert text.count(PLANT_ANCHOR) == 1
    return text.replace(PLANT_ANCHOR, PLANT_ANCHOR + f"""
        {{
            volatile word32 mix = sha256->digest[0];
            word32 n;
            for (n = 0; n < (len / WC_SHA256_BLOCK_SIZE) * {rounds}; n++)
                mix = rotrFixed(mix, 7) ^ n;
        }}
""")


def e2e_config(tmp_path: Path) -> Config:
    """The end-to-end tests' config: its builds are the suite's, made once and cached."""
    from test_pipeline_e2e import CONFIG

    return parse_config(CONFIG, str(tmp_path / "bsdkm.yml"), tmp_path)


def cached_userspace_build(variant: str, config: Config) -> Path:
    """The pipeline's own userspace build of the configured source (made once, then cached)."""
    from buildbot_bsdkm.pipeline.runtime.source import cache_root, fetch_source
    from buildbot_bsdkm.pipeline.runtime.userspace_build import userspace_build

    tree = fetch_source(config.source, cache=cache_root(config), timeout_s=900)
    build = userspace_build(config, variant, tree.path, tree.sha256 or str(tree.path), cache_root(config), 2)
    log = build.build_dir.with_name(build.build_dir.name + ".test.log")
    build.make(log, 3600)
    return build.build_dir


@needs_valgrind
def test_planted_one_percent_fails_at_1v1_with_the_function_named_on_real_builds(tmp_path: Path) -> None:
    base_dir = cached_userspace_build("intelasm", e2e_config(tmp_path))
    source = pinstr.BuiltTree.find(base_dir).source
    sha_c = source / "wolfcrypt" / "src" / "sha256.c"
    original = sha_c.read_text()
    head_dir = pinstr.rebuilt_with(base_dir, {"wolfcrypt/src/sha256.c": planted_sha256(original)},
                                   tmp_path / "planted")
    assert sha_c.read_text() == original  # the cached source is never written
    items = {"SHA-256": 1 << 18, "AES-128-GCM-enc": 1 << 18}
    base = pinstr.count_instructions(base_dir, items)
    head = pinstr.count_instructions(head_dir, items)
    policy = parse_policy(POLICY, "p.yml")
    verdict = evaluate([_run(head)], policy, [_run(base)])
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    gcm = next(c for c in verdict.checks if c.name == "instructions:AES-128-GCM-enc")
    assert not sha.passed and 0.5 < sha.delta_pct < 2.0, sha.message
    assert "Sha256Update" in sha.message
    assert gcm.passed and gcm.delta_pct == 0.0
    # the same build counted again: identical, to the instruction
    again = pinstr.count_instructions(base_dir, items)
    assert [i.instructions for i in again.items] == [i.instructions for i in base.items]


def test_release_judges_the_candidates_counts_once_and_lists_them_with_the_changes() -> None:
    from buildbot_bsdkm.pipeline.jobs.release import judge_candidate
    from buildbot_bsdkm.report.release_report import comparison

    # with a learned timed rule the release judges every repeat: three runs of one binary
    policy = parse_policy(POLICY + '  - {pattern: "*", max_pct: 2, limit: learned}\n', "p.yml")
    plant = int(0.01 * 27.43 * (1 << 20))
    head = _counts(27.43 * 1.01, extra_fn=plant)
    candidate = {"userspace/intelasm": [_timed(head, 1000) for _ in range(3)]}
    previous = {"userspace/intelasm": [_timed(_counts(27.43), 1000) for _ in range(3)]}
    verdict = judge_candidate(candidate, previous, policy)
    sha = [c for c in verdict.checks if c.name == "instructions:SHA-256"]
    assert len(sha) == 1 and not sha[0].passed  # three repeats of one binary: one judgement
    doc = comparison(items=[{"label": "userspace/intelasm", "target": "userspace", "variant": "intelasm",
                             "status": "run", "in_previous": True}],
                     candidate=candidate, previous=previous, builds={}, verdict=verdict,
                     sources={"candidate": {}, "previous": {}}, software_variant="noasm", repeats=3)
    row = next(c for c in doc["changes"] if c["name"] == "instructions:SHA-256")
    assert row["metric"] == "instructions" and row["verdict"] == "regression" and row["delta_pct"] > 0.5


def test_kernel_proxy_flags_say_what_they_could_not_carry() -> None:
    carried, dropped = pinstr.proxy_flags(
        ["--enable-cryptonly", "--enable-aesni", "--enable-intelasm", "--enable-kernel-benchmarks",
         "--enable-linuxkm-lkcapi-register=cbc(aes),gcm(aes)", "--enable-freebsdkm-crypto-register"])
    assert carried == ["--enable-cryptonly", "--enable-aesni", "--enable-intelasm"]
    assert dropped == ["--enable-kernel-benchmarks", "--enable-linuxkm-lkcapi-register=cbc(aes),gcm(aes)",
                       "--enable-freebsdkm-crypto-register"]
    assert parse_policy("instructions: {kernel_proxy: true}").instructions.kernel_proxy
    assert not load_policy().instructions.kernel_proxy


def test_a_qemu_targets_proxy_counts_are_gated_though_its_timings_are_not() -> None:
    policy = parse_policy(POLICY, "p.yml")
    plant = int(0.01 * 27.43 * (1 << 20))

    def qemu(counts: InstructionCounts) -> RunResult:
        return RunResult("noasm", "linux-kmod-qemu", metadata={METADATA_KEY: counts.to_dict()})

    verdict = evaluate([qemu(_counts(27.43 * 1.01, extra_fn=plant))], policy, [qemu(_counts(27.43))])
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    assert not sha.passed and sha.target == "linux-kmod-qemu"
    assert any("not regression-gated" in n for n in verdict.notes)  # the timed gate still is not


def test_history_gives_the_base_only_from_the_same_machine() -> None:
    policy = parse_policy(POLICY, "p.yml")
    plant = int(0.01 * 27.43 * (1 << 20))

    def on(machine: str, counts: InstructionCounts) -> RunResult:
        run = _run(counts)
        run.metadata["fingerprint"] = {"id": machine}
        return run

    head = on("m1", _counts(27.43 * 1.01, extra_fn=plant))
    other = evaluate([head], policy, None, [on("m2", _counts(27.43))])
    assert not other.of_kind(CheckKind.INSTRUCTIONS)
    assert any("no base instruction counts" in n for n in other.notes)
    same = evaluate([head], policy, None, [on("m2", _counts(20.0)), on("m1", _counts(27.43))])
    sha = next(c for c in same.checks if c.name == "instructions:SHA-256")
    assert not sha.passed and sha.baseline == pytest.approx(27.43, rel=1e-3)
    assert any("newest history run" in n for n in same.notes)


def test_a_pr_heads_results_carry_the_bases_counts_for_later_readers() -> None:
    from buildbot_bsdkm.perf.instruction_counts import BASE_METADATA_KEY

    policy = parse_policy(POLICY, "p.yml")
    plant = int(0.01 * 27.43 * (1 << 20))
    head = _run(_counts(27.43 * 1.01, extra_fn=plant))
    head.metadata[BASE_METADATA_KEY] = _counts(27.43).to_dict()
    verdict = evaluate([head], policy)  # the PR comment: the head's results alone
    sha = next(c for c in verdict.checks if c.name == "instructions:SHA-256")
    assert not sha.passed and "Sha256Update" in sha.message
    assert any("base build counted next to it" in n for n in verdict.notes)


@needs_valgrind
def test_run_counts_each_item_and_function_and_gates_on_them(tmp_path: Path) -> None:
    """``bsdkm-ci run --target userspace`` (run_matrix) on the real build: the load counts the policy's
    workload; against a baseline whose SHA-256 did 1 % less work in Sha256Update the gate fails,
    naming it, in the verdict, the report (with the summary line) and JUnit."""
    import dataclasses
    import json

    from buildbot_bsdkm.model import to_json
    from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix

    config = e2e_config(tmp_path)
    build = cached_userspace_build("intelasm", config)
    items = load_policy().instructions.items
    real = pinstr.count_instructions(build, items)
    sha = real.item("SHA-256")
    assert sha is not None and sha.instructions
    less = sha.instructions // 101  # the base did 1/101 less: the head is 1 % above it
    sha.instructions -= less
    sha.functions["Sha256Update"] = sha.functions.get("Sha256Update", 0) - less
    baseline = tmp_path / "baseline.json"
    base_run = RunResult("intelasm", "userspace", metadata={METADATA_KEY: real.to_dict()})
    baseline.write_text(to_json([base_run]))
    config = dataclasses.replace(config, baseline=baseline)
    result = run_matrix(config, ["intelasm"], ["userspace"], tmp_path / "out", progress=lambda _: None)
    counts = counts_of(result.runs[0].metadata)
    assert counts is not None and [i.status for i in counts.items] == [MEASURED] * len(items)
    assert all(i.functions for i in counts.items)  # per function, for every item
    checks = {c.name: c for c in result.verdict.of_kind(CheckKind.INSTRUCTIONS)}
    failed = checks["instructions:SHA-256"]
    assert not failed.passed and "Sha256Update" in failed.message
    assert all(c.passed for n, c in checks.items() if n != "instructions:SHA-256"), checks
    assert not result.passed
    out = tmp_path / "out"
    report = (out / "report.md").read_text()
    assert "instructions: userspace/intelasm +1.00 % (SHA-256)" in report
    junit = (out / "userspace" / "intelasm" / "junit.xml").read_text()
    assert 'name="instructions:SHA-256"' in junit and "changed most: Sha256Update" in junit
    assert (out / "userspace" / "intelasm" / "callgrind").is_dir()  # the profiles are kept
    assert json.loads((out / "summary.json").read_text())


def test_a_kernel_run_without_counts_says_its_code_was_not_counted() -> None:
    policy = parse_policy(POLICY, "p.yml")
    verdict = evaluate([RunResult("noasm", "linux-kmod-qemu"), RunResult("intelasm", "linux-kmod-qemu")],
                       policy)
    said = [n for n in verdict.notes if "instructions not counted" in n]
    # once for the target, not once a variant
    assert len(said) == 1 and said[0].startswith(
        "linux-kmod-qemu: instructions not counted (not judged, not passed): a kernel module"), said
    assert not verdict.of_kind(CheckKind.INSTRUCTIONS)
