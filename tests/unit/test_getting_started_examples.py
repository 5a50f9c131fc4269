"""docs/getting-started.md's examples for logs one already has, run as written (each line from the page
itself) on a real benchmark log and real repeats: what they print is what a newcomer would paste, and
the headline counts what the JUnit file holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, fixture_text

PAGE = ROOT / "docs" / "getting-started.md"
BIN = Path(sys.executable).parent
Ran = dict[str, subprocess.CompletedProcess[str]]
BOXED = re.compile("[\u2600-\u27bf\U0001f000-\U0001faff\ufe0f]")  # emoji and their variation selector


def page_block(after: str, fence: str) -> str:
    text = PAGE.read_text(encoding="utf-8").split(after, 1)[1]
    return text.split(f"```{fence}\n", 1)[1].split("```", 1)[0]


def example_lines() -> list[str]:
    lines = []
    for line in page_block("Logs you already have can be gated", "sh").splitlines():
        command = line.split("  #", 1)[0].strip()
        if command:
            lines.append(command)
    return lines


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    """Each example line, run in a directory holding bench.log, base/ and head/ (three repeats each)."""
    here = tmp_path_factory.mktemp("getting-started")
    (here / "bench.log").write_text(fixture_text("userspace/noasm/bench_default.txt"), encoding="utf-8")
    env = {**os.environ, "PATH": f"{BIN}:/usr/bin:/bin"}
    for side, repeats in (("base", ("01", "03", "05")), ("head", ("07", "09", "11"))):
        (here / side).mkdir()
        for r in repeats:
            log = FIXTURES / "noise" / f"noasm_r{r}.txt"
            doc = subprocess.run([str(BIN / "bsdkm-ci"), "parse", "--json", "--target", "userspace",
                                  "--variant", "noasm", str(log)],
                                 capture_output=True, text=True, check=True, env=env).stdout
            (here / side / f"{r}.json").write_text(doc, encoding="utf-8")
    out = {}
    for line in example_lines():
        out[line.split()[1]] = subprocess.run(["bash", "-c", line], cwd=here, capture_output=True, text=True,
                                              env=env, timeout=300, check=False)
    out["dir"] = subprocess.CompletedProcess([], 0, str(here), "")
    return out


def test_every_example_runs_as_written(ran: Ran) -> None:
    assert set(ran) == {"parse", "junit", "compare", "dir"}
    for name in ("parse", "junit", "compare"):
        assert ran[name].returncode == 0, (name, ran[name].stderr)
        assert ran[name].stderr == "", (name, ran[name].stderr)  # `| head` ends no traceback either


def test_the_junit_example_prints_what_the_page_shows(ran: Ran) -> None:
    assert ran["junit"].stdout == page_block("says what the JUnit", "text")


def test_the_headline_counts_what_the_junit_file_holds(ran: Ran) -> None:
    here = Path(ran["dir"].stdout)
    printed = ran["junit"].stdout
    checks = int(re.search(r"PASS: (\d+) checks? passed", printed).group(1))  # type: ignore[union-attr]
    root = ET.parse(here / "junit.xml").getroot()
    # Every check of the verdict is in the file, once: a PASS/FAIL line in its testcase's output.
    said = [line for out in root.iter("system-out") for line in (out.text or "").splitlines()
            if re.match(r"(PASS|FAIL) \w+: ", line)]
    assert len(said) == checks
    tests = re.search(r"junit\.xml: (\d+) tests \(", printed).group(1)  # type: ignore[union-attr]
    assert tests == root.get("tests")
    named = {s.get("name") for s in root.iter("testsuite")}
    assert named and all(n.startswith("bsdkm.userspace.noasm.") for n in named)  # named as the example says


def test_reports_show_no_path_of_this_machine_and_no_emoji(ran: Ran) -> None:
    here = Path(ran["dir"].stdout)
    reports = [(here / name).read_text(encoding="utf-8") for name in ("report.md", "report.html")]
    for text in [*reports, ran["compare"].stdout]:
        for local in (str(here), str(ROOT), "site-packages", str(Path.home())):
            assert local not in text, local
    assert "Policy: `policies/default.yml` (packaged)" in (here / "report.md").read_text(encoding="utf-8")
    assert not BOXED.search((here / "report.html").read_text(encoding="utf-8"))


def test_the_tables_leave_out_what_is_empty(ran: Ran) -> None:
    report = (Path(ran["dir"].stdout) / "report.md").read_text(encoding="utf-8")
    assert "| benchmark | value | cycles |\n" in report  # no baseline, delta, limit or status to show
    assert "|  |" not in report


def test_compare_names_its_base_and_says_no_base_where_there_is_none(
        ran: Ran) -> None:
    said = ran["compare"].stdout
    assert "base from baseline" not in said and "against the base's runs" in said
    assert "### Change versus the base" in said
