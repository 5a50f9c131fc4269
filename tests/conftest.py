"""Shared test helpers: where the read-only real fixtures live."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from buildbot_bsdkm.pipeline.rounds import describe as describe_rounds

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"


def _test_folders() -> list[str]:
    found = []
    for here, dirs, files in os.walk(TESTS):
        dirs[:] = [d for d in dirs if not d.startswith(("node", ".", "__"))]
        if here != str(TESTS) and any(f.startswith("test_") and f.endswith(".py") for f in files):
            found.append(here)
    return sorted(found)


# Test modules borrow each other's builders and fixtures by module name, wherever in the tree they are.
sys.path[1:1] = _test_folders()
SHARED = Path(os.environ.get("BSDKM_SHARED", ROOT.parent / "shared")).resolve()
FIXTURES = SHARED / "fixtures"
# Third-party data the suite checks against, never copied into the repository: the Jenkins xUnit
# plugin's JUnit schema.
JUNIT_SCHEMA = SHARED / "schemas" / "junit-10.xsd"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    if not FIXTURES.is_dir():
        pytest.fail(f"real fixtures not found at {FIXTURES} (set BSDKM_SHARED)")
    return FIXTURES


def fixture_text(rel: str) -> str:
    return (FIXTURES / rel).read_text(encoding="utf-8", errors="replace")


# -- every JUnit report the suite produces must be one the readers accept --------------
# In-process reports are checked as junit_xml() returns them; reports written by subprocesses
# (bsdkm-ci run/junit/stage, the Action) are found in each module's temp directories afterwards.

def _validating_junit() -> None:
    from junit_readers import validate

    import buildbot_bsdkm.report.junit as junit_module

    plain = junit_module.junit_xml
    if getattr(plain, "validated", False):
        return

    def junit_xml(runs, verdict, **kw):  # type: ignore[no-untyped-def]
        text = plain(runs, verdict, **kw)
        if not kw.get("testcase_files"):  # testcase file/line attributes are outside the schema by design
            validate(text, "junit_xml()")
        return text

    junit_xml.validated = True  # type: ignore[attr-defined]
    junit_module.junit_xml = junit_xml


_validating_junit()

# wolfSSL/kernel source and build trees hold no reports: not walked (they are most of the files)
_SOURCE_TREE_MARKERS = ("configure.ac", "config.status", "Kbuild", ".git", "node_modules", "pyvenv.cfg")


def _junit_reports(base: Path, since: float) -> list[Path]:
    from junit_readers import is_junit_report

    found, stack = [], [base]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        if any(e.name in _SOURCE_TREE_MARKERS for e in entries):
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))
            elif e.name.endswith(".xml") and e.stat().st_mtime >= since and is_junit_report(Path(e.path)):
                found.append(Path(e.path))
    return found


@pytest.fixture(scope="module", autouse=True)
def _junit_files_are_schema_valid(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import time

    from junit_readers import validate

    start = time.time()
    yield
    for path in _junit_reports(tmp_path_factory.getbasetemp(), start):
        validate(path.read_bytes(), str(path))


# -- the package as a user installs it: a wheel of the working tree, a fresh venv ------
# Session-wide: the wheel test and the Action's `install: "true"` run share one build and one venv.

def _tree_copy(dest: Path) -> Path:
    """The working tree's files (tracked or not, minus ignored and node tools), symlinks kept."""
    import shutil
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        if rel.startswith("tests/node") or not os.path.lexists(ROOT / rel):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        src = ROOT / rel
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, target)
    return dest


@pytest.fixture(scope="session")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree_copy(tmp_path_factory.mktemp("bsdkm-src") / "bsdkm-ci")


@pytest.fixture(scope="session")
def built_wheel(source_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build` (sdist, then the wheel from the sdist) of the copy, as a release would."""
    import subprocess
    import sys

    dist = tmp_path_factory.mktemp("dist")
    cmd = [sys.executable, "-m", "build", "--no-isolation", "-o", str(dist), str(source_copy)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    return wheel


@pytest.fixture(scope="session")
def fresh_venv(built_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv holding only the wheel and its declared (base) dependencies, from PyPI."""
    import subprocess
    import sys

    venv = tmp_path_factory.mktemp("fresh") / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True, timeout=300)
    cmd = [str(venv / "bin" / "pip"), "install", "--quiet", "--retries", "5", str(built_wheel)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return venv


def interleaved_rounds(order: list[str], rounds: int) -> str:
    """The sides as measured, one round per pair (``B H, H B, ...``: pipeline/rounds.describe), after
    checking that every round ran exactly one base and one head."""
    assert len(order) == 2 * rounds, order
    pairs = [(order[i], order[i + 1]) for i in range(0, len(order), 2)]
    assert all(sorted(p) == ["base", "head"] for p in pairs), order
    return describe_rounds(pairs)


# -- the order of the suite: longest files first, whole files per xdist worker (suite_schedule) --

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from suite_schedule import longest_first

    items[:] = [items[i] for i in longest_first([item.nodeid for item in items])]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    from suite_schedule import FileUnits

    config.option.loadscopereorder = False  # xdist would sort units by test count; ours are by time
    return FileUnits(config, log)
