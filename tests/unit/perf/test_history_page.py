"""The perf history page as a static site: ``bsdkm-ci history page`` over a history directory draws
the same page (the core's renderer, its trend charts) the Buildbot master shows from its database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_perf import repeats, run, sym

from buildbot_bsdkm.buildbot.www_perf import render as master_page
from buildbot_bsdkm.model import to_json
from buildbot_bsdkm.perf.store import DirStore, SqlStore
from buildbot_bsdkm.report.history import history_link, render

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
FP = {"fingerprint": {"id": "f00d", "cpu_model": "Test CPU @ 3.40GHz"}}


def history(n: int, drop_from: int | None = None) -> list:
    """``n`` base-branch runs of userspace/intelasm, SHA-256 5 % slower from run ``drop_from`` on."""
    out = []
    for i, lg in enumerate(repeats(n, 9, noise=0.004)):
        f = 0.95 if drop_from is not None and i >= drop_from else 1.0
        lg.benchmarks = [sym(b.name, b.value * f, b.cycles / f) if b.name == "SHA-256" else b
                         for b in lg.benchmarks]
        out.append(run([lg], metadata={**FP, "source_commit": f"c{i:02d}" + "0" * 38}))
    return out


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_history_page_draws_the_trend_charts_of_a_history_directory(tmp_path: Path) -> None:
    store = tmp_path / "history"
    nights = history(20, drop_from=12)
    for r in nights[:-1]:
        DirStore(store).add(r)
    doc = tmp_path / "tonight.json"
    doc.write_text(to_json(nights[-1:]))
    assert cli("history", "add", "--store", store, doc).returncode == 0  # as the nightly adds its run
    page = tmp_path / "site" / "index.html"
    page.parent.mkdir()
    done = cli("history", "page", "--store", store, "--out", page)
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "<title>bsdkm-ci performance history</title>" in html
    assert html.count('class="trend"') == 1 and html.count('<tr class="commit">') == 20
    assert html.count('<tr class="item">') == 6 and "Test CPU @ 3.40GHz" in html
    assert 'class="drift" x1=' in html and "SHA-256 -5." in html and "from c12" in html  # the drift, marked


def test_the_static_page_and_the_masters_page_are_one_renderer(tmp_path: Path) -> None:
    runs = history(5)
    directory, database = DirStore(tmp_path / "history"), SqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    for r in runs:
        directory.add(r)
        database.add(r)
    assert directory.series() == database.series() == [("f00d", "userspace", "intelasm", 5)]
    keys = directory.series()
    from_dir = render(keys, lambda fp, t, v: directory.window(fp, t, v), kept="K", empty="E")
    from_db = master_page(database.series(), lambda fp, t, v: database.window(fp, t, v))
    database.close()
    # the same charts and tables; only the sentence saying where the runs are kept differs
    assert from_dir.split("</p>", 1)[1] == from_db.split("</p>", 1)[1]


def test_a_failed_run_is_no_history_and_the_command_says_so(tmp_path: Path) -> None:
    from buildbot_bsdkm.model import StageFailure

    bad = history(1)[0]
    bad.failure = StageFailure("load", "self-test failed", reason="selftest")
    doc = tmp_path / "bad.json"
    doc.write_text(to_json([bad]))
    done = cli("history", "add", "--store", tmp_path / "h", doc)
    assert done.returncode == 0, done.stderr
    assert "userspace/intelasm: not kept as perf history: load failed (selftest)" in done.stdout
    assert DirStore(tmp_path / "h").series() == []
    page = tmp_path / "index.html"
    assert cli("history", "page", "--store", tmp_path / "h", "--out", page).returncode == 0
    assert "No history stored yet" in page.read_text(encoding="utf-8")
    missing = cli("history", "page", "--store", tmp_path / "nowhere", "--out", page)
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_the_items_table_and_the_panel_compare_the_newest_run_with_one_median() -> None:
    import re

    first, second = history(2)
    for lg in second.logs:
        lg.benchmarks = [sym(b.name, b.value * 1.5, b.cycles / 1.5) for b in lg.benchmarks]
    page = render([("f00d", "userspace", "intelasm", 2)], lambda fp, t, v: [("c1", first), ("c2", second)],
                  kept="K", empty="E")
    panel = re.search(r"SHA-256: 2 runs</text>.*?newest ([+-][\d.]+)% vs median", page, re.S)
    table = re.search(r"<td>SHA-256</td><td class=\"num\">2</td><td class=\"num\">([+-][\d.]+)%", page)
    assert panel and table and panel.group(1) == table.group(1), (panel, table)


def test_the_link_a_report_gives_the_page() -> None:
    url = "https://wolfssl.github.io/wolfssl/"
    assert history_link(url) == f"Performance history of the base branch, with trend charts: [{url}]({url})"
