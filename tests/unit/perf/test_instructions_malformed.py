"""A profile or driver line the PR's code wrote is "not counted", never a CI exception.

PR code runs inside the fixed-work driver and can write its own Callgrind profile and print its own
``bsdkm-instr`` lines. An unreadable one must not raise ValueError, which the stage runner would file
as an infrastructure error and retry, hiding the PR's own failed self-test.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import parse_config
from buildbot_bsdkm.perf.instruction_counts import (
    MISSING,
    InstructionsError,
    parse_callgrind,
    parse_driver_output,
)
from buildbot_bsdkm.pipeline.runtime import instruction_counting as runtime_counting
from buildbot_bsdkm.pipeline.runtime.instruction_counting import count_program


@pytest.mark.parametrize("summary", ["abc", "9" * 5000, "-x"])
def test_a_malformed_summary_is_an_instructions_error(summary: str) -> None:
    with pytest.raises(InstructionsError, match="unreadable summary line"):
        parse_callgrind(f"events: Ir\nfn=f\n1 5\nsummary: {summary}\n", "p.1")


def test_driver_lines_with_absurd_numbers_are_no_driver_lines() -> None:
    out = parse_driver_output("bsdkm-instr begin\n"
                              f"bsdkm-instr item 1 AES kind=sym amount={'9' * 5000} block=16 calls=1 rc=0\n"
                              "bsdkm-instr item 2 SHA kind=sym amount=1024 block=16 calls=1 rc=0\n"
                              "bsdkm-instr end\n")
    assert [(line.index, line.name) for line in out.lines] == [(2, "SHA")]


FAKE_VALGRIND = """#!/bin/sh
# Speaks the driver's protocol and writes the profile part the PR's code chose.
for a in "$@"; do case "$a" in --callgrind-out-file=*) out="${a#--callgrind-out-file=}";; esac; done
echo "bsdkm-instr begin"
echo "bsdkm-instr item 1 AES-128-GCM-enc kind=sym amount=1024 block=16 calls=1 rc=0"
printf 'events: Ir\\nfn=f\\n1 5\\nsummary: abc\\n' > "$out.1"
echo "bsdkm-instr end"
"""


def test_a_forged_profile_makes_the_item_not_counted(tmp_path: Path, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "valgrind"
    fake.write_text(FAKE_VALGRIND)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    program = tmp_path / "bsdkm-instr"
    program.write_text("")
    [item] = count_program(program, {"AES-128-GCM-enc": 1024}, tmp_path / "work", timeout_s=60)
    assert item.status == MISSING and "unreadable summary line" in (item.reason or ""), item


def test_anything_else_that_goes_wrong_counting_leaves_the_stage_its_real_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a profile the driver left behind")

    monkeypatch.setattr(runtime_counting, "count_instructions", broken)
    cfg = parse_config("targets: {userspace: null}\nvariants: {a: {targets: [userspace]}}\n", "c.yml")
    counts = runtime_counting.counts_for(cfg, tmp_path, tmp_path / "instructions.log")
    assert counts is not None and counts.items and not counts.measured
    assert all(i.status == MISSING and "KeyError" in (i.reason or "") for i in counts.items)
