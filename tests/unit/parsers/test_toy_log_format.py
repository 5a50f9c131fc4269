"""A log format is one module and one registration line: detection, the engine, the gates, the
reports and JUnit know it then (``toy_log_format.py`` is that module).

The module is imported when a test asks for it, not when the suite is collected: a format, once
defined, is known to the whole process, and collection must see only the package's own.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from types import ModuleType

import pytest

from buildbot_bsdkm.model import LogFormat, RunResult, from_json, to_json
from buildbot_bsdkm.parsers import detect_format, parse_text
from buildbot_bsdkm.parsers.formats import register, unregister
from buildbot_bsdkm.policy import CheckKind, evaluate, parse_policy
from buildbot_bsdkm.report.junit import junit_xml
from buildbot_bsdkm.report.markdown import markdown_report

LOG = """\
[    0.100000] toy: begin
[    0.200000] toy: ring bytes=64 ops=1000 ns=2000000
[    0.300000] toy: ring bytes=1024 ops=1000 ns=4000000
[    0.400000] ### LKM-CI: nonce 42
[    0.500000] toy: end
"""
LOCKUP = """\
[   30.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [insmod:110]
[   30.000001] CPU: 0 PID: 110 Comm: insmod Tainted: G           O       6.1.0 #1
[   30.000002] RIP: 0010:toy_ring_spin+0x10/0x40 [libwolfssl]
[   30.000003] Call Trace:
[   30.000004]  <TASK>
[   30.000005]  toy_ring_spin+0x10/0x40 [libwolfssl]
[   30.000006]  </TASK>
"""
POLICY = """
required: ["AES-128-GCM-enc"]
kernel: {soft_lockup: fail}
"""


@pytest.fixture
def toy_module() -> ModuleType:
    return importlib.import_module("toy_log_format")


@pytest.fixture
def toy(toy_module: ModuleType) -> Iterator[LogFormat]:
    register(toy_module.TOY, toy_module.ToyRingParser, shows=toy_module.shows)  # the one line
    yield toy_module.TOY
    unregister(toy_module.TOY)


def test_the_toy_log_is_detected_and_parsed(toy: LogFormat) -> None:
    assert detect_format(LOG.splitlines()) is toy
    log = parse_text(LOG, "console.log")
    assert log.format is toy and log.complete
    assert [(b.name, b.per_second) for b in log.benchmarks] == [("toy:ring@64", 32e6),
                                                               ("toy:ring@1024", 256e6)]
    assert log.metadata["markers"] == ["LKM-CI: nonce 42"]  # the engine's work, for every format
    again = from_json(to_json([RunResult("v", "toy", logs=[log])]))[0].logs[0]
    assert again.format is toy and again.benchmarks == log.benchmarks


def test_a_cut_off_toy_log_is_incomplete(toy: LogFormat) -> None:
    log = parse_text(LOG.replace("toy: end", "toy: ring bytes=16 ops=1 ns=1"), "console.log")
    assert not log.complete and log.incomplete_reason == "no 'toy: end' line (cut off?)"


def test_a_toy_kernel_log_is_judged_and_reported_as_a_kernel_log(toy: LogFormat) -> None:
    run = RunResult("v", "toy", logs=[parse_text(LOG + LOCKUP, "console.log")])
    assert [ev.kind for ev in run.logs[0].kernel] == ["soft_lockup"]
    verdict = evaluate([run], parse_policy(POLICY))
    failed = [c for c in verdict.checks if not c.passed]
    # the toy prints no wolfCrypt benchmark: the required item is not asked of it
    assert [(c.kind, c.name) for c in failed] == [(CheckKind.KERNEL, "kernel:soft_lockup@6")]
    assert 'name="kernel:soft_lockup"' in junit_xml([run], verdict)
    assert "Kernel health" in markdown_report([run], verdict)


def test_a_format_has_one_parser_and_an_unregistered_one_is_named(toy_module: ModuleType) -> None:
    toy, parser = toy_module.TOY, toy_module.ToyRingParser
    register(toy, parser)
    try:
        with pytest.raises(ValueError, match="toy-ring-log already has a parser"):
            register(toy, parser)
    finally:
        unregister(toy)
    with pytest.raises(ValueError, match="no parser is registered for log format toy-ring-log"):
        parse_text(LOG, "console.log", toy)
    assert detect_format(LOG.splitlines()) is LogFormat.LINUX_KERNEL_LOG  # its stamps alone
