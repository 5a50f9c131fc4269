"""The Markdown report opens on the verdict; each variant's benchmark table is folded."""

from __future__ import annotations

from conftest import FIXTURES

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.parsers import parse_file
from buildbot_bsdkm.policy import evaluate, load_policy
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import markdown_report


def test_benchmark_tables_are_folded_per_variant_after_the_verdict() -> None:
    runs = [RunResult("aesni-avx", "userspace", logs=[parse_file(FIXTURES / "noise/accel_r03.txt")]),
            RunResult("noasm", "userspace", logs=[parse_file(FIXTURES / "noise/noasm_r03.txt")])]
    verdict = evaluate(runs, load_policy())
    md = markdown_report(runs, verdict)
    first_details = md.index("<details>")
    assert md.index("checks passed") < first_details or md.index("FAIL") < first_details
    for run in runs:
        summary = f"<details><summary>{run.target}/{run.variant}: {len(run.benchmarks)} benchmarks</summary>"
        start = md.index(summary)
        end = md.index("</details>", start)
        assert f"### Benchmarks: {run.target}/{run.variant}" in md[start:end]
        assert "| AES-128-GCM-enc |" in md[start:end]
    assert md.count("<details>") == md.count("</details>") == 2
    page = html_report(runs, verdict)
    assert page.count("<details open>") == page.count("</details>") == 2
