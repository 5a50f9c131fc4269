"""Markdown / HTML reports and the SVG speedup chart, from real parsed logs."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from conftest import FIXTURES

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import DEFAULT_POLICY_PATH, evaluate, load_policy, parse_policy
from buildbot_bsdkm.report.charts import speedup_svg
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import delta_report, markdown_report

SVG = "{http://www.w3.org/2000/svg}"

FIXED_POLICY = DEFAULT_POLICY_PATH.parent / "fixed-limits.yml"


def parsed(variant: str, target: str, *rel: str) -> RunResult:
    return RunResult(variant, target, logs=[parse_file(FIXTURES / r) for r in rel])


@pytest.fixture(scope="module")
def matrix() -> list[RunResult]:
    return [
        parsed("aesni-avx", "userspace", "noise/accel_r01.txt", "userspace/accel/testwolfcrypt.txt"),
        parsed("noasm", "userspace", "noise/noasm_r01.txt", "userspace/noasm/testwolfcrypt.txt"),
        parsed("openssl", "userspace", "openssl/speed_evp_aes128cbc_elapsed.stdout.txt"),
        parsed("openssl-noaesni", "userspace", "openssl/noaesni_speed_evp_aes128cbc_elapsed.stdout.txt"),
    ]


@pytest.fixture(scope="module")
def baseline() -> list[RunResult]:
    return [parsed("aesni-avx", "userspace", "noise/accel_r03.txt"),
            parsed("noasm", "userspace", "noise/noasm_r03.txt")]


def test_markdown_report_sections_and_numbers(matrix, baseline) -> None:
    # one run a side: the fixed-limit policy (the default's learned limits call it inconclusive)
    v = evaluate(matrix, load_policy(FIXED_POLICY), baseline)
    text = markdown_report(matrix, v, retries=[{"run": "userspace/noasm", "attempt": 1, "stage": "fetch",
                                                "reason": "network", "category": "infrastructure"}],
                           links={"build": "https://ci.example/builds/7"})
    assert text.startswith("## bsdkm-ci results\n\n✅ PASS: ")
    assert "[build](https://ci.example/builds/7)" in text
    assert "| userspace/aesni-avx | 89 | 89 | 0 | yes |" in text  # testwolfcrypt.txt: 89 "test passed!"
    assert ("| userspace | AES-128-GCM-enc | aesni-avx: 4938 MiB/s | noasm: 156 MiB/s | 31.57x | 10x "
            "| pass |") in text
    assert ("| userspace | openssl:AES-128-CBC | openssl vs openssl-noaesni | 16 bytes | 16: 4.01x, "
            "64: 4.53x, 256: 4.70x, 1024: 4.77x, 8192: 4.82x, 16384: 4.77x | pass |") in text
    # accel_r01 4937.746 vs accel_r03 5074 MiB/s: -2.7 %
    assert "| AES-128-GCM-enc | 4938 MiB/s | 0.5 cycles/byte | 5074 MiB/s | -2.7% | 15% | pass |" in text
    assert "| userspace/noasm | 1 | fetch | network | infrastructure |" in text
    assert len(text) < 65536 and "omitted" not in text


def test_failures_come_first_with_their_numbers(matrix, baseline) -> None:
    strict = parse_policy("regressions:\n  - {pattern: 'AES-256-GCM-*', max_pct: 2}\n")
    v = evaluate(matrix, strict, baseline)
    text = markdown_report(matrix, v)
    # 2 complete + 178 self-tests + 12 AES-256-GCM-* items;
    # accel r01 vs r03: enc -4.7 %, dec -4.5 %, STREAM-dec -2.7 %
    assert text.splitlines()[2] == "❌ FAIL: 3 of 192 checks failed (regression)"
    failures = text[text.index("### Failures"):text.index("### Self-tests")]
    assert ("| userspace/aesni-avx | regression | AES-256-GCM-enc | AES-256-GCM-enc 4369 MiB/s is 4.7% below "
            "baseline 4586 MiB/s (limit 2%) |") in failures
    assert failures.count("| userspace/") == 3


def test_clock_quantisation_is_explained() -> None:
    # No FreeBSD machine is reachable: the x_nofloatfmt build prints the kernel module's number
    # style, and the whole-second clock flag is set as the FreeBSD log parser would.
    run = parsed("aesni-avx", "freebsd-kmod", "userspace/x_nofloatfmt/bench_subset.txt")
    run.logs[0] = dataclasses.replace(run.logs[0], clock_resolution=1.0)
    base = parsed("aesni-avx", "freebsd-kmod", "userspace/x_nofloatfmt/bench_subset.txt")
    base.logs[0] = dataclasses.replace(base.logs[0], clock_resolution=1.0)
    v = evaluate([run], load_policy(FIXED_POLICY), [base])
    text = markdown_report([run], v)
    assert ("> **Note:** freebsd-kmod/aesni-avx: benchmark clock is quantised (1 s resolution): its "
            "throughput under-reports by up to one tick per item; throughput gates use cycles per byte/op "
            "instead.") in text
    assert ("| AES-128-GCM-enc | 5094 MiB/s | 0.49 cycles/byte | 0.49 cycles/byte | +0.0% (cycles) | 15% "
            "| pass |") in text


def test_max_chars_drops_passing_rows_first_and_says_so(matrix, baseline) -> None:
    strict = parse_policy("regressions:\n  - {pattern: 'AES-256-GCM-*', max_pct: 2}\n"
                          "speedups:\n  - {pattern: 'AES-*', accelerated: aesni-avx, software: noasm, "
                          "min: 3}\n")
    v = evaluate(matrix, strict, baseline)
    full = markdown_report(matrix, v)
    text = markdown_report(matrix, v, max_chars=4000)
    assert len(full) > 7000 and len(text) <= 4000
    assert "passing row(s) left out; every failure is shown" in text
    assert "AES-256-GCM-enc 4369 MiB/s is 4.7% below baseline 4586 MiB/s (limit 2%)" in text
    assert "| AES-256-GCM-enc | 4369 MiB/s |" in text  # failing benchmark row survives
    assert "| AES-128-CBC-dec | 10605 MiB/s |" not in text  # passing benchmark rows go first
    assert "less important row(s) omitted" in text


def test_max_chars_is_a_hard_limit_even_for_failures(matrix, baseline) -> None:
    v = evaluate(matrix, parse_policy("regressions:\n  - {pattern: '*', max_pct: 0}\n"), baseline)
    assert len(v.failures) > 20
    text = markdown_report(matrix, v, max_chars=1500)
    assert len(text) <= 1500 and text.endswith("see the JUnit artifact for the rest._\n")


def test_markdown_cells_escape_pipes() -> None:
    run = parsed("a|b", "userspace", "userspace/accel/bench_timeout3_KILL.txt")
    text = markdown_report([run], evaluate([run], parse_policy("")))
    row = next(line for line in text.splitlines() if line.startswith("| userspace/a"))
    assert row.startswith("| userspace/a\\|b | complete (error) | complete:")
    assert row.count(" | ") == 4  # still five cells (the last one the failure's signature)


def test_report_names_the_source_built_and_its_commit() -> None:
    run = parsed("accel", "userspace", "userspace/accel/bench_default.txt")
    run.metadata = {"source": "git:https://github.com/wolfSSL/wolfssl.git@refs/pull/42/head",
                    "source_commit": "c" * 40}
    text = markdown_report([run], evaluate([run], parse_policy("")))
    assert "Source: `git:https://github.com/wolfSSL/wolfssl.git@refs/pull/42/head` at `cccccccccccc`" in text


def test_delta_report_lists_every_item(baseline) -> None:
    head = [parsed("noasm", "userspace", "noise/noasm_r05.txt")]
    v = evaluate(head, load_policy(), baseline)
    text = delta_report(v)
    rows = [line for line in text.splitlines() if line.startswith("| userspace/noasm |")]
    assert len(rows) == 28  # 27 items + the geometric mean
    # 1 vs 1: every item unjudged, so never a PASS headline (Verdict.status)
    assert text.startswith("⚠️ INCONCLUSIVE: 28 gated item(s) not judged")


class _TagCounter(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.counts: dict[str, int] = {}

    def handle_starttag(self, tag: str, attrs) -> None:
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if tag not in ("meta", "line", "rect", "br"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("line", "rect"):
            return
        assert self.open.pop() == tag


def test_html_report_is_balanced_and_has_the_chart(matrix, baseline) -> None:
    v = evaluate(matrix, load_policy(), baseline)
    page = html_report(matrix, v)
    counter = _TagCounter()
    counter.feed(page)
    assert counter.open == []
    # the speedup chart, and the verdict's mark (drawn: an emoji needs a font the machine may lack)
    assert counter.counts["svg"] == 2 and counter.counts["rect"] == 18
    assert "<td>31.57x</td>" in page and ">31.57x</text>" in page


def test_speedup_svg_bars_follow_the_ratios(matrix) -> None:
    v = evaluate(matrix, load_policy())
    checks = v.of_kind("speedup")
    root = ET.fromstring(speedup_svg(checks))
    rects = root.findall(f"{SVG}rect")
    assert len(rects) == len(checks) == 18
    widths = {c.name: float(r.get("width")) for c, r in zip(checks, rects, strict=True)}
    # log scale: AES-128-GCM-enc 31.6x is longer than AES-128-CBC-enc 4.2x, not 7.5x longer
    ratio = widths["AES-128-GCM-enc"] / widths["AES-128-CBC-enc"]
    assert 1.5 < ratio < 3.0
    assert {r.get("fill") for r in rects} == {"#2da44e"}
    assert len(root.findall(f"{SVG}line")) == 18  # a minimum marker per bar
    titles = [r.find(f"{SVG}title").text for r in rects]
    assert titles[0] == checks[0].message


def test_speedup_svg_shows_a_lost_speedup_below_1x(matrix) -> None:
    # roles swapped on purpose: the portable C "accelerated" build is ~30x slower
    text = ("speedups:\n  - {pattern: 'AES-128-GCM-enc', accelerated: noasm, software: aesni-avx, min: 1}\n"
            "  - {pattern: 'SHA-256', accelerated: aesni-avx, software: noasm, min: 1}\n")
    checks = evaluate(matrix, parse_policy(text)).of_kind("speedup")
    root = ET.fromstring(speedup_svg(checks))
    rects = root.findall(f"{SVG}rect")
    assert [c.name for c in checks] == ["AES-128-GCM-enc", "SHA-256"]
    assert [r.get("fill") for r in rects] == ["#cf222e", "#2da44e"]
    gcm, sha = (float(r.get("width")) for r in rects)
    assert 0 < gcm < sha  # 0.03x still gets a visible, shorter bar
    assert root.find(f"{SVG}text").text.startswith("speedup (log scale from 0.026x)")  # 0.032x / 1.25
