"""The HTML report shows on a fresh machine without an emoji font: every character it writes is one the
core fonts have (WGL4: DejaVu, Liberation, Arial, Helvetica...), and the verdict's mark is drawn."""

from __future__ import annotations

import re

import pytest
from conftest import FIXTURES
from test_triage_classify import POLICY, panic_run

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, load_policy
from buildbot_bsdkm.report.html_page import html_report

# Windows Glyph List 4 beyond Latin-1: the punctuation, arrows and signs every core font carries.
WGL4_EXTRA = set("–—‘’‚“”„†‡•…‰‹›€™←↑→↓↔↕−√∞≈≠≤≥")


def shown_by_every_font(ch: str) -> bool:
    return ch in "\n\t" or " " <= ch <= "~" or "\u00a0" <= ch <= "\u00ff" or ch in WGL4_EXTRA


def run_of(variant: str, *logs: str) -> RunResult:
    return RunResult(variant, "userspace", logs=[parse_file(FIXTURES / log) for log in logs])


def reports() -> dict[str, str]:
    failing = run_of("intelasm", "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt", "noise/accel_r03.txt")
    passing = [run_of("intelasm", "noise/accel_r05.txt"), run_of("noasm", "noise/noasm_r05.txt")]
    unjudged = run_of("intelasm", "noise/accel_r03.txt")
    return {
        "pass": html_report(passing, evaluate(passing, load_policy())),
        "fail": html_report([failing], evaluate([failing], load_policy())),
        "inconclusive": html_report([unjudged], evaluate([unjudged], load_policy(),
                                                         [run_of("intelasm", "noise/accel_r01.txt")])),
        "kernel panic": html_report([panic_run()], evaluate([panic_run()], POLICY)),
    }


@pytest.mark.parametrize(("status", "page"), list(reports().items()))
def test_every_character_is_in_every_core_font(status: str, page: str) -> None:
    missing = sorted({f"U+{ord(c):04X} {c}" for c in page if not shown_by_every_font(c)})
    assert missing == [], status


@pytest.mark.parametrize(("status", "page"), list(reports().items()))
def test_the_verdict_mark_is_drawn(status: str, page: str) -> None:
    verdict = re.search(r'<p class="verdict">(<svg[^>]*aria-label="(\w+)".*?</svg>) (\w+):', page)
    assert verdict is not None, status
    assert verdict.group(2) == verdict.group(3).lower() == status.split()[-1].replace("panic", "fail")
