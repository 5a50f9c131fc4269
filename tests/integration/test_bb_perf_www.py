"""The perf history page of a real Buildbot master's web UI.

The master (the repository's master.cfg and bsdkm.yml, on sqlite) gets a ``www:`` section that
closes the UI to anonymous users; its ``bsdkm_perf_history`` table is filled with two
(target, variant) series of base-branch runs, one of which lost 5 % on SHA-256 at a known commit.
The page is fetched over HTTP like the UI fetches it: refused without a login, then read as a
logged-in user, and shot in headless Chromium inside Buildbot's own page.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from conftest import ROOT
from test_perf import repeats, run, sym

from buildbot_bsdkm.buildbot import control
from buildbot_bsdkm.buildbot.www_perf import NAME
from buildbot_bsdkm.perf.store import SqlStore

pytestmark = pytest.mark.slow

USER, PASSWORD = "alice", "alice-pw"
PAGE = f"plugins/wsgi_dashboards/{NAME}/index.html"
FP = {"fingerprint": {"id": "f00d", "cpu_model": "Test CPU @ 3.40GHz", "os": "Debian GNU/Linux 13"}}


def _history() -> list:
    runs = []
    for i, lg in enumerate(repeats(24, 9, noise=0.004)):
        f = 0.95 if i >= 15 else 1.0  # SHA-256 lost 5 % at the 16th base-branch commit
        lg.benchmarks = [sym(b.name, b.value * f, b.cycles / f) if b.name == "SHA-256" else b
                         for b in lg.benchmarks]
        runs.append(run([lg], metadata={**FP, "source_commit": f"{0xabc000 + i:x}"}))
    runs += [run([lg], "noasm", metadata={**FP, "source_commit": f"{0xdef000 + i:x}"})
             for i, lg in enumerate(repeats(6, 4, noise=0.01))]
    return runs


def _start(layout: control.Layout) -> None:
    try:
        control.start_master(layout)
    except control.ControlError as e:
        if "took more than" not in str(e):  # `buildbot start` stops watching after 10 s on a busy machine
            raise
    deadline = time.monotonic() + 180
    log = layout.master / "twistd.log"
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "BuildMaster is running" in text:
            return
        if "BuildMaster startup failed" in text or "Configuration Errors" in text:
            raise RuntimeError(f"master did not start:\n{text[-3000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"master not running after 180 s (see {log})")


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[control.Layout]:
    base = tmp_path_factory.mktemp("bbperfwww")
    htpasswd = base / "www.htpasswd"
    htpasswd.write_text(f"{USER}:{PASSWORD}\n")
    doc = yaml.safe_load((ROOT / "bsdkm.yml").read_text())
    doc["policy"] = str(ROOT / "policies" / "default.yml")
    doc["www"] = {"anonymous": "none", "auth": {"type": "htpasswd", "file": str(htpasswd)}}
    config = base / "bsdkm.yml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False))
    layout = control.Layout(base / "bb")
    control.create(layout, config_path=config, workers=("local",))
    _start(layout)
    try:
        store = SqlStore(f"sqlite:///{layout.master / 'state.sqlite'}")  # what perf_history.record writes
        for r in _history():
            store.add(r)
        store.close()
        yield layout
    finally:
        control.stop_master(layout)


def test_perf_history_page_is_served_to_logged_in_users_only(master: control.Layout) -> None:
    url = master.www_url()
    with requests.Session() as anonymous:
        refused = anonymous.get(url + PAGE, timeout=30)
        assert refused.status_code == 403, refused.text[:500]  # no bypass around anonymous: none
        assert "perf-history" not in refused.text and "abc00" not in refused.text
        assert anonymous.get(url + "api/v2/builders", timeout=30).status_code == 403  # as the REST API
        forged = anonymous.get(url + PAGE, cookies={"TWISTED_SESSION": "e30.e30.forged"}, timeout=30)
        assert forged.status_code == 403
    with requests.Session() as session:
        session.get(url + "auth/login", auth=(USER, PASSWORD), timeout=30)
        page = session.get(url + PAGE, timeout=30)
        assert page.status_code == 200, page.text[:500]
        assert page.headers["Content-Type"].startswith("text/html")
        # The UI lists the dashboard (the React app builds its menu from this config).
        ui_config = session.get(url + "config", timeout=30).text
        assert NAME in ui_config and "Perf history" in ui_config
    html = page.text
    assert html.count('<tr class="item">') == 12  # six items x two (target, variant)s
    assert "userspace/intelasm" in html and "userspace/noasm" in html and "Test CPU @ 3.40GHz" in html
    assert html.count('<tr class="commit">') == 30  # every stored commit listed
    assert "<code>abc017</code>" in html and "<code>def005</code>" in html
    # The report's own trend chart: one panel per item, the drift marker naming the commit.
    assert html.count('class="trend"') == 2 and html.count('class="head"') == 12
    assert html.count('class="drift" x1=') == 1 and "SHA-256 -5." in html and "from abc00f" in html


def _chromium(profile: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--virtual-time-budget=30000", "--window-size=1200,1600", *args],
        capture_output=True, text=True, timeout=120, check=False)


def test_perf_history_page_in_the_buildbot_ui_screenshot(master: control.Layout) -> None:
    from PIL import Image

    url = master.www_url()
    profile = tempfile.mkdtemp(prefix="bsdkm-chromium-")
    shot = Path(profile) / "perf-history.png"
    try:
        # Logged in as a person would be: HTTP basic auth on /auth/login sets Buildbot's session
        # cookie and redirects into the UI, to the dashboard's page.
        host = url.split("//", 1)[1]
        for attempt in range(4):
            login = f"http://{USER}:{PASSWORD}@{host}auth/login?redirect=/{NAME}&try={attempt}"
            taken = _chromium(profile, f"--screenshot={shot}", login)
            assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
            image = Image.open(shot).convert("RGB")
            px = image.load()
            w, h = image.size
            # the trend panels' #fafafa background right of the side menu: the chart is drawn
            panel = sum(1 for y in range(0, h, 4) for x in range(w // 4, w, 4) if px[x, y] == (250, 250, 250))
            if panel > 600:
                break
            time.sleep(2)
        keep = ROOT / "out" / "screenshots"
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, keep / "buildbot-perf-history.png")  # for people to look at (out/ is ignored)
        sidebar = px[20, h // 2]
        assert sidebar[2] > sidebar[0] + 30, sidebar  # Buildbot's navigation: the UI, not a bare page
        assert panel > 600, f"{panel} panel pixels: the chart is not rendered in {shot}"
    finally:
        shutil.rmtree(profile, ignore_errors=True)
