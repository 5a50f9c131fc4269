"""The target facts table (``buildbot_bsdkm/targets.py``) and who reads it.

What a target is lives in one row; the pipeline's target classes, config validation, kernel health,
worker matching and the policy read it. The policy's gate is where "a QEMU TCG target is not
regression-gated" is decided, so every shell that gates (``compare``, ``junit``, ``action gate``, the
PR comment) agrees with ``bsdkm-ci run``; before, only the pipeline stripped their baselines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildbot_bsdkm import targets
from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.config.workers import PasswordRef, WorkerSpec
from buildbot_bsdkm.github.aggregate import PrReport
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult, SelfTest, to_json
from buildbot_bsdkm.pipeline import targets as registry
from buildbot_bsdkm.pipeline.targets.base import KernelTarget
from buildbot_bsdkm.policy import kernel_health, parse_policy

FIXED = "regressions:\n  - {pattern: '*', max_pct: 15}\n"
QEMU = "linux-kmod-qemu"


def test_every_row_is_one_registered_target_and_the_class_reads_its_row() -> None:
    assert tuple(registry.all_targets()) == targets.names()
    for name, t in registry.all_targets().items():
        row = targets.facts()[name]
        assert t.facts is row and t.name == name
        assert isinstance(t, KernelTarget) == row.kernel
        assert (t.perf_measurement, t.bench_repeats, t.perf_note, t.per_os_release, t.measures_base()) == (
            row.perf_measurement, row.bench_repeats, row.perf_note, row.per_os_release, row.measures_base)
        if row.kernel:
            assert t.source_dir == row.source_dir
    assert set(registry.kernel_targets()) == set(targets.kernel_names())


def test_the_facts_as_every_layer_used_to_spell_them() -> None:
    assert targets.names() == ("userspace", "linux-kmod-qemu", "freebsd-kmod", "freebsd-kmod-qemu")
    assert targets.kernel_names() == ("linux-kmod-qemu", "freebsd-kmod", "freebsd-kmod-qemu")
    assert targets.freebsd_names() == ("freebsd-kmod", "freebsd-kmod-qemu")
    assert targets.emulated_names() == ("linux-kmod-qemu", "freebsd-kmod-qemu")
    assert kernel_health.KernelRules().emulated == targets.emulated_names()
    rows = targets.facts()
    assert [n for n in rows if rows[n].measures_base] == ["userspace", "freebsd-kmod"]
    assert [n for n in rows if rows[n].per_os_release] == ["freebsd-kmod"]
    assert targets.os_release_tag("14.3", "amd64") == "freebsd-14.3-amd64"
    with pytest.raises(ValueError, match="emulated"):
        targets.TargetFacts("x", None, perf_measurement=True, bench_repeats=False, perf_note="",
                            emulated=True)


def test_config_names_its_targets_from_the_table(tmp_path: Path) -> None:
    text = "targets:\n  bogus: {}\nvariants:\n  v: {flags: [], targets: [bogus]}\n"
    known = "userspace, linux-kmod-qemu, freebsd-kmod, freebsd-kmod-qemu"
    with pytest.raises(ConfigError, match=f"unknown target \\(known: {known}\\)"):
        parse_config(text, str(tmp_path / "bsdkm.yml"), tmp_path)
    text = ("targets:\n  userspace: {}\nvariants:\n  v: {flags: [--enable-freebsdkm-crypto-register], "
            "targets: [userspace]}\n")
    with pytest.raises(ConfigError, match="only works on freebsd-kmod and freebsd-kmod-qemu"):
        parse_config(text, str(tmp_path / "bsdkm.yml"), tmp_path)


@pytest.mark.parametrize(("tags", "runs"), [
    ((), ["userspace"]),
    (("linux-qemu",), ["userspace", "linux-kmod-qemu", "freebsd-kmod-qemu"]),
    (("freebsd-14.3-amd64",), ["userspace", "freebsd-kmod"]),
    (("linux-userspace", "linux-qemu", "freebsd-kmod"),
     ["userspace", "linux-kmod-qemu", "freebsd-kmod", "freebsd-kmod-qemu"]),
])
def test_which_worker_runs_which_target_follows_each_rows_worker_tag(tags: tuple[str, ...],
                                                                     runs: list[str]) -> None:
    spec = WorkerSpec("w", PasswordRef("secret", "w"), tags=tags)
    assert [n for n in targets.names() if spec.can_run(n)] == runs
    assert spec.can_run("a-target-no-row-names")  # as before: only known targets ask for a tag


# --------------------------------------------------------------------------- the gate in every shell


def _run(target: str, aes: float) -> RunResult:
    benches = [Benchmark(name, v, "MiB/s", per_second=v * 1024**2)
               for name, v in {"AES-128-GCM-enc": aes, "SHA-256": 100.0}.items()]
    log = LogResult("bench.log", complete=True, benchmarks=benches, tests=[SelfTest("AES", True)],
                    benchmark_complete=True)
    return RunResult("noasm", target, logs=[log])


def _files(tmp_path: Path, target: str) -> tuple[Path, Path, Path]:
    """Base at 100 MiB/s, a head 40 % slower on AES-GCM, a fixed 15 % limit."""
    base, head, policy = tmp_path / "base.json", tmp_path / "head.json", tmp_path / "fixed.yml"
    base.write_text(to_json([_run(target, 100.0)]))
    head.write_text(to_json([_run(target, 60.0)]))
    policy.write_text(FIXED)
    return base, head, policy


SHELLS = {
    "compare": lambda base, head, policy, out: ["compare", str(base), str(head), "--policy", str(policy)],
    "junit": lambda base, head, policy, out: ["junit", str(head), "-o", str(out / "junit.xml"),
                                              "--baseline", str(base), "--policy", str(policy)],
    "action gate": lambda base, head, policy, out: ["action", "gate", "--out", str(out),
                                                    "--results", str(head), "--baseline", str(base),
                                                    "--policy", str(policy)],
}


@pytest.mark.parametrize("shell", list(SHELLS))
def test_no_shell_regression_gates_a_qemu_run_with_a_slower_head(tmp_path: Path, shell: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Fails on the old code: these shells called the gate with the QEMU baseline and exited 1."""
    out = tmp_path / "out"
    out.mkdir()
    assert main(SHELLS[shell](*_files(tmp_path, QEMU), out)) == 0, capsys.readouterr()
    # the same numbers on a perf target are a regression in each shell: the gate is still on
    (tmp_path / "u").mkdir()
    assert main(SHELLS[shell](*_files(tmp_path / "u", "userspace"), out)) == 1


def test_the_pr_comment_verdict_leaves_qemu_speeds_ungated() -> None:
    """Fails on the old code: github/aggregate's PrReport gated the QEMU run against its baseline."""
    policy = parse_policy(FIXED, "fixed.yml")
    verdict = PrReport(policy, [_run(QEMU, 100.0)]).verdict([_run(QEMU, 60.0)])
    assert verdict.passed and not verdict.regressions, verdict.summary()
    assert f"{QEMU}: {targets.TCG_NOTE}: not regression-gated" in verdict.notes
    assert not PrReport(policy, [_run("userspace", 100.0)]).verdict([_run("userspace", 60.0)]).passed


def test_a_qemu_run_says_once_why_it_is_not_regression_gated() -> None:
    """Before: the learned gate added 'no baseline and no history' after the 'not regression-gated'
    note of the same target (two notes a QEMU variant in the main job's report)."""
    from buildbot_bsdkm.policy import evaluate, load_policy

    verdict = evaluate([_run(QEMU, 100.0)], load_policy())
    about = [n for n in verdict.notes if n.startswith(QEMU) and "instructions not counted" not in n]
    assert about == [f"{QEMU}: {targets.TCG_NOTE}: not regression-gated"], verdict.notes
    # The instruction counts a kernel run lacks are a separate matter, said once too.
    assert sum("instructions not counted" in n for n in verdict.notes) == 1, verdict.notes
    assert any("userspace/noasm: no baseline and no history" in n
               for n in evaluate([_run("userspace", 100.0)], load_policy()).notes)
