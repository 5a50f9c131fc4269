"""docs/getting-started.md's first run of one's own, the line as the page writes it, in a directory
holding the checkout's bsdkm.yml and policies: a real wolfSSL build (cached after the first), and a
headline that counts what the JUnit file holds."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow
PAGE = ROOT / "docs" / "getting-started.md"
BIN = Path(sys.executable).parent


def first_run_line() -> str:
    section = PAGE.read_text(encoding="utf-8").split("## A first run of your own", 1)[1]
    (line,) = [x for x in section.split("```sh\n", 1)[1].split("```", 1)[0].splitlines() if x.strip()]
    return line


def test_the_first_run_runs_as_written(tmp_path: Path) -> None:
    line = first_run_line()
    assert line.startswith("bsdkm-ci run --config bsdkm.yml ")
    shutil.copy(ROOT / "bsdkm.yml", tmp_path / "bsdkm.yml")
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    env = {**os.environ, "PATH": f"{BIN}:/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=3000, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = int(re.search(r"^PASS: (\d+) checks passed$", done.stdout, re.M).group(1))  # type: ignore[union-attr]
    root = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    said = [x for out in root.iter("system-out") for x in (out.text or "").splitlines()
            if re.match(r"(PASS|FAIL) \w+: ", x)]
    assert len(said) == checks  # every check of the headline is in the JUnit file, once
    tests = re.search(r"^JUnit: +out/junit\.xml: (\d+) tests \(", done.stdout, re.M)
    assert tests is not None and tests.group(1) == root.get("tests"), done.stdout
    report = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Policy: `policies/default.yml`\n" in report  # relative to the config, no path of this machine
    assert str(tmp_path) not in report and str(Path.home()) not in report
