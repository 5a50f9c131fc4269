"""The measured code shares the fixed-work driver's stdout: lines it prints must not become counts."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.perf.instruction_counts import MEASURED
from buildbot_bsdkm.pipeline.runtime import instruction_counting as pinstr

# The fake driver of tests/data/instructions/, whose measured function (the PR's code) prints
# driver lines of its own: a hundredfold amount for the item it runs, a tiny one for the next one.
SPOOFING_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int current;
static const char *next_name;

__attribute__((noinline)) int bsdkm_measure(long n)
{
    volatile long x = 0;
    long i;
    printf("bsdkm-instr item %d A kind=sym amount=%ld block=%ld calls=1 rc=0\n", current, n * 100, n * 100);
    if (next_name != NULL)
        printf("bsdkm-instr item %d %s kind=sym amount=1 block=1 calls=1 rc=0\n", current + 1, next_name);
    for (i = 0; i < n; i++)
        x += i;
    return 0;
}

int main(int argc, char **argv)
{
    int i;
    printf("bsdkm-instr begin 1\n");
    for (i = 1; i < argc; i++) {
        char name[128];
        char *eq;
        long n;
        snprintf(name, sizeof(name), "%s", argv[i]);
        eq = strrchr(name, '=');
        *eq = '\0';
        n = atol(eq + 1);
        current = i;
        next_name = i + 1 < argc ? "B" : NULL;
        fflush(stdout);
        bsdkm_measure(n);
        printf("bsdkm-instr item %d %s kind=sym amount=%ld block=%ld calls=1 rc=0\n", i, name, n, n);
        fflush(stdout);
    }
    printf("bsdkm-instr end\n");
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("gcc") is None,
                    reason="valgrind and gcc needed")
def test_lines_the_measured_code_prints_change_no_amount(tmp_path: Path) -> None:
    """Fails on the old code: the printed amounts were taken (A's per-byte count a hundredth of the real
    one), and each item's second line took the next item's profile part."""
    src = tmp_path / "spoof.c"
    src.write_text(SPOOFING_DRIVER)
    program = tmp_path / "spoof"
    subprocess.run(["gcc", "-O1", "-o", str(program), str(src)], check=True)
    got = {i.name: i for i in pinstr.count_program(program, {"A": 100000, "B": 200000}, tmp_path / "work",
                                                   block=100000)}
    assert got["A"].status == MEASURED and got["A"].amount == 100000, got["A"]
    assert got["B"].status == MEASURED and got["B"].amount == 200000, got["B"]
    # the counts are the work done: twice the loop, about twice the instructions per the same unit
    assert got["B"].instructions / got["A"].instructions == pytest.approx(2.0, rel=0.05)


def test_the_driver_rounds_a_per_byte_amount_to_whole_blocks_and_so_does_the_reader() -> None:
    from buildbot_bsdkm.perf.instruction_counts import DriverLine

    lines = [DriverLine(1, "AES-128-CBC-enc", True, "sym", 99),
             DriverLine(2, "RSA-2048-sign", True, "asym", 99),
             DriverLine(3, "AES-128-CBC-enc", True, "sym", 1)]  # another position's name: not the driver's
    got = pinstr._own_lines(lines, pinstr.item_args({"AES-128-CBC-enc": 20000, "RSA-2048-sign": 5,
                                                     "SHA-256": 100}, 16384))
    assert [(line.name, line.amount) for line in got] == [("AES-128-CBC-enc", 32768), ("RSA-2048-sign", 5)]
