"""Hostile results documents, endless inputs and Markdown injection."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from buildbot_bsdkm.model import (
    BenchKind,
    Benchmark,
    LogResult,
    ModelError,
    RunResult,
    SelfTest,
    from_json,
    to_json,
)
from buildbot_bsdkm.policy import evaluate, parse_policy
from buildbot_bsdkm.report.markdown import markdown_report

CLI = [sys.executable, "-m", "buildbot_bsdkm.cli"]


def _doc(value: object) -> str:
    bench = {"name": "AES-128-GCM-enc", "value": value, "unit": "MiB/s", "per_second": 1.0, "kind": "sym"}
    run = {"variant": "noasm", "target": "userspace", "logs": [{"source": "x", "benchmarks": [bench]}]}
    return json.dumps({"schema": 1, "runs": [run]})


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_doc(float("nan")), "NaN is not a number"),
        (_doc(float("inf")), "Infinity is not a number"),
        (_doc(float("-inf")), "-Infinity is not a number"),
        (_doc(1.0).replace("1.0, \"unit\"", "1e999, \"unit\""), "overflows to infinity"),
        ('{"schema": 1, "runs": ' + "[" * 50000 + "]" * 50000 + "}", "nested deeper than 64"),
        ('{"schema": 1, "runs": [], "x": ' + "9" * 5000 + "}", "integer of 5000 digits"),
        ('{"schema": 1, "runs": 5}', "'runs' is a JSON int, not a list"),
    ],
)
def test_hostile_results_documents_are_refused_by_name(text: str, reason: str) -> None:
    with pytest.raises(ModelError, match=reason):
        from_json(text, "doc.json")


@pytest.mark.parametrize(
    "text",
    [
        _doc(float("nan")),
        '{"schema": 1, "runs": ' + "[" * 50000 + "]" * 50000 + "}",
        '{"schema": 1, "runs": [], "x": ' + "9" * 5000 + "}",
        '{"schema": 1, "runs": 5}',
    ],
)
def test_compare_exits_2_with_a_message_not_a_traceback(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    good = tmp_path / "good.json"
    good.write_text(_doc(100.0))
    for args in (("compare", str(good), str(bad)), ("junit", str(bad), "-o", str(tmp_path / "j.xml"))):
        done = _cli(*args)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and "bad.json" in done.stderr


def test_a_nan_baseline_no_longer_switches_the_regression_gate_off() -> None:
    # Before: NaN compared false with the limit, so a 50 % drop "passed".
    with pytest.raises(ModelError):
        from_json(_doc(float("nan")))


def test_parse_dev_zero_stops_at_the_default_size_limit() -> None:
    done = _cli("parse", "/dev/zero", timeout=120)
    assert done.returncode == 2
    assert "1073741824-byte input limit" in done.stderr and "--max-bytes" in done.stderr


def test_parse_limits_are_overridable_and_named(tmp_path: Path) -> None:
    done = _cli("parse", "/dev/zero", "--max-bytes", "100000")
    assert done.returncode == 2 and "100000-byte input limit" in done.stderr
    done = _cli("parse", "/dev/urandom", "--max-seconds", "0.5", "--max-bytes", str(1 << 40))
    assert done.returncode == 2 and "time limit --max-seconds 0.5" in done.stderr
    log = tmp_path / "ok.log"
    log.write_text("AES-128-GCM-enc 100 MiB took 1.000 seconds, 100.000 MiB/s\n")
    done = _cli("parse", str(log), "--max-bytes", str(log.stat().st_size))
    assert done.returncode != 2, done.stderr  # exactly at the limit is allowed


INJECTED = "evil\n\n## Approved [click](https://evil.example) @wolfSSL/maintainers | x |"


def _injected_report() -> str:
    bench = Benchmark(name=INJECTED, value=10.0, unit="MiB/s", per_second=10.0, kind=BenchKind.SYMMETRIC)
    failed = SelfTest(name=INJECTED, passed=False)
    log = LogResult(source="x", complete=True, benchmarks=[bench], tests=[failed])
    run = RunResult(variant="v[x](https://evil.example)\n# owned", target="userspace", logs=[log])
    policy = parse_policy("selftests: true\n", "p.yml")
    return markdown_report([run], evaluate([run], policy))


def test_names_cannot_inject_markdown_into_the_pr_comment() -> None:
    md = _injected_report()
    # Literal text inside an HTML <summary> line is not Markdown; everywhere else it must be escaped.
    markdown = "\n".join(line for line in md.splitlines() if not line.startswith("<details><summary>"))
    assert "[click](" not in markdown and "[x](" not in markdown
    assert all(line.endswith("</summary>") for line in md.splitlines() if line.startswith("<details>"))
    assert "\n## Approved" not in md and "\n# owned" not in md
    assert " @wolfSSL" not in md  # no mention of a team
    # The names' own pipes are escaped: every row of a table has its header's column count.
    columns: list[int] = []
    for line in [*md.splitlines(), ""]:
        if line.startswith("|"):
            columns.append(len(re.findall(r"(?<!\\)\|", line)))
        elif columns:
            assert len(set(columns)) == 1, columns
            columns = []


def test_round_trip_of_a_normal_document_still_works() -> None:
    run = RunResult(variant="noasm", target="userspace", logs=[LogResult(source="x", complete=True)])
    assert from_json(to_json([run]))[0].variant == "noasm"
