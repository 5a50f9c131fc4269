"""A stage's live progress: the milestones it announces, in the order it reaches them, as the shells
read them (``contract.read_progress``): a Buildbot step's summary and the Action's log groups.

The programs are stand-ins printing real wolfSSL output from the shared fixtures; the stage command,
the rounds, the run command and the group writer are the real thing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, ROOT
from test_perf_stage_base import built, stage

from buildbot_bsdkm.contract import BASE_SIDE, read_progress

BSDKM_CI = str(Path(sys.executable).parent / "bsdkm-ci")


def milestones(text: str, side: str = "") -> list[str]:
    said = [read_progress(line) for line in text.splitlines()]
    return [p.words for p in said if p is not None and p.side == side]


def test_load_with_its_base_says_each_side_and_each_round(tmp_path: Path) -> None:
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    built(out / "base", "base", order)
    p = stage("load", "--out", str(out), "--base-out", str(out / "base"), "--repeats", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert milestones(p.stderr) == ["loading", "self-test", "benchmark round 1 of 3",
                                    "benchmark round 2 of 3", "benchmark round 3 of 3"]
    # the base goes through its own load and unload stages in round 1
    assert milestones(p.stderr, BASE_SIDE) == [
        "loading (base)", "self-test (base)", "benchmark round 1 of 3 (base)", "unloading (base)",
        "benchmark round 2 of 3 (base)", "benchmark round 3 of 3 (base)"]


def test_load_without_a_base_names_no_round(tmp_path: Path) -> None:
    out = tmp_path / "bsdkm-out"
    built(out, "head", tmp_path / "order")
    p = stage("load", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert milestones(p.stderr) == ["loading", "self-test", "benchmark"]


def standin_tree(tree: Path) -> Path:
    """A source tree whose configure and make produce the two programs, printing the fixtures."""
    tree.mkdir()
    files = {
        "configure.ac": "AC_INIT([wolfssl],[5.0.0-standin])\n",
        "configure": ('#!/bin/sh\nsrc=$(cd "$(dirname "$0")" && pwd)\n'
                      'sed "s|@SRC@|$src|g" "$src/Makefile.in" > Makefile\n'),
        "Makefile.in": ("all:\n\tmkdir -p wolfcrypt/test wolfcrypt/benchmark\n"
                        "\tcp @SRC@/testwolfcrypt.sh wolfcrypt/test/testwolfcrypt\n"
                        "\tcp @SRC@/benchmark.sh wolfcrypt/benchmark/benchmark\n"),
        "testwolfcrypt.sh": f"#!/bin/sh\ncat {FIXTURES / 'userspace/noasm/testwolfcrypt.txt'}\n",
        "benchmark.sh": f"#!/bin/sh\ncat {FIXTURES / 'userspace/noasm/bench_default.txt'}\n",
    }
    for name, text in files.items():
        (tree / name).write_text(text)
        (tree / name).chmod(0o755)
    return tree


def test_run_puts_each_stage_in_a_log_group_of_its_own(tmp_path: Path) -> None:
    tree = standin_tree(tmp_path / "tree")
    config = tmp_path / "bsdkm.yml"
    config.write_text(f"source: {{local: {tree}}}\ntargets: {{userspace: {{flags: []}}}}\n"
                      "variants: {noasm: {flags: [--disable-asm], targets: [userspace]}}\n"
                      "benchmark: {repeats: 2, max_repeats: 2}\n"
                      f"cache_dir: {tmp_path / 'cache'}\npolicy: {ROOT / 'policies/default.yml'}\n")
    p = subprocess.run([BSDKM_CI, "run", "--config", str(config), "--out", str(tmp_path / "out"),
                        "--base-dir", str(tree), "--log-groups"], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stdout + p.stderr
    groups: list[tuple[str, list[str]]] = []
    open_group = None
    for line in p.stderr.splitlines():
        if line.startswith("::group::"):
            assert open_group is None, f"groups do not nest: {line}"
            open_group = line.removeprefix("::group::")
            groups.append((open_group, []))
        elif line == "::endgroup::":
            assert open_group is not None
            open_group = None
        else:
            progress = read_progress(line)
            if progress is not None:
                assert open_group is not None, f"{line}: outside any group"
                groups[-1][1].append(progress.words)
    assert open_group is None, "the last group is closed before the result is printed"
    label = "userspace/noasm"
    assert [g for g, _ in groups] == ["fetch", "fetch (base)", f"configure {label}", f"build {label}",
                                      f"configure {label} (base)", f"build {label} (base)", f"load {label}",
                                      "gate"]
    load = dict(groups)[f"load {label}"]
    assert {"self-test", "self-test (base)", "benchmark round 1 of 2", "benchmark round 2 of 2 (base)",
            "unloading (base)"} <= set(load), load
    assert "JUnit:" in p.stdout


def test_a_target_that_boots_a_vm_says_booting_and_one_on_the_host_does_not(tmp_path: Path) -> None:
    from buildbot_bsdkm.config.bsdkm_yml import load_config
    from buildbot_bsdkm.pipeline.job import KO, Job
    from buildbot_bsdkm.pipeline.runtime.loading import ModuleLoadOutcome
    from buildbot_bsdkm.pipeline.targets import get
    from buildbot_bsdkm.pipeline.targets.base import KernelTarget

    def loaded(self: KernelTarget, config: object, ko: Path, work: Path) -> ModuleLoadOutcome:
        return ModuleLoadOutcome(tmp_path / "kernel.log", 0, 0)  # the load itself is not what is tested

    for name, says in (("linux-kmod-qemu", ["booting"]), ("freebsd-kmod", [])):
        target = type("Loaded", (type(get(name)),), {"load": loaded})()
        lines: list[str] = []
        job = Job(load_config(ROOT / "bsdkm.yml"), name, "noasm", tmp_path / name, progress=lines.append)
        job.put(KO, str(tmp_path / "libwolfssl.ko"))
        KernelTarget.measure(target, job)
        assert milestones("\n".join(lines)) == says, lines
