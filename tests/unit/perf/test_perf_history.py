"""Perf history: base-branch results per fingerprint in a directory or the master's DB,
a window of history instead of the last pass, and drift named by the commit where it began."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_server import pg_server
from test_perf import LEARNED, learned, repeats, run

from buildbot_bsdkm.perf import drift
from buildbot_bsdkm.perf.store import DirStore, SqlStore, StoreError
from buildbot_bsdkm.policy import evaluate, parse_policy

FP = {"fingerprint": {"id": "f00d"}}


def stored_runs(n: int, seed: int, metadata: dict | None = None, **kw) -> list:
    return [run([lg], metadata={**(metadata or FP), "source_commit": f"c{i:02d}"})
            for i, lg in enumerate(repeats(n, seed, **kw))]


def check_store(store) -> None:
    for r in stored_runs(12, 3):
        store.add(r)
    store.add(stored_runs(1, 4, metadata={"fingerprint": {"id": "beef"}})[0])
    window = store.window("f00d", "userspace", "intelasm", 5)
    assert [c for c, _ in window] == ["c07", "c08", "c09", "c10", "c11"]  # newest five, oldest first
    assert [len(r.benchmarks) for _, r in window] == [6] * 5
    assert [c for c, _ in store.window("beef", "userspace", "intelasm")] == ["c00"]
    assert store.window("f00d", "userspace", "noasm") == []
    with pytest.raises(StoreError, match="no machine fingerprint"):
        store.add(run(repeats(1, 5)))


def test_directory_store(tmp_path: Path) -> None:
    check_store(DirStore(tmp_path / "history"))


def test_sql_store_on_sqlite(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    check_store(store)
    store.close()
    again = SqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")  # the table is kept, not recreated
    assert len(again.window("f00d", "userspace", "intelasm", 100)) == 12


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with pg_server(prefix="bsdkm-perf-pg-") as pg:
        yield pg.url


@pytest.mark.slow
def test_sql_store_on_postgresql(postgres_url: str) -> None:
    store = SqlStore(postgres_url)
    check_store(store)
    store.close()


def test_a_head_is_compared_with_a_window_of_history_not_the_last_pass() -> None:
    # A loss of 1 % per base-branch run: every run passes against the one before it (a ratchet
    # would follow it down); against the window of history the accumulated loss is seen.
    history = []
    for i, lg in enumerate(repeats(20, 9, noise=0.003)):
        lg.benchmarks = [type(b)(**{**b.__dict__, "value": b.value * 0.99 ** i,
                                    "per_second": b.per_second * 0.99 ** i, "cycles": b.cycles / 0.99 ** i})
                         for b in lg.benchmarks]
        history.append(run([lg], metadata=FP))
    last_pass = history[-1]
    head = repeats(5, 10, noise=0.003, scale=dict.fromkeys(["AES-128-CBC-enc", "AES-128-GCM-enc", "SHA-256",
                                                            "SHA-512", "GMAC Table 4-bit", "AES-256-GCM-enc"],
                                                           0.99 ** 20))
    policy = parse_policy(LEARNED)
    against_last = evaluate([run(head, metadata=FP)], policy, [last_pass, last_pass, last_pass], history)
    assert not [c for c in against_last.regressions]
    against_window = evaluate([run(head, metadata=FP)], policy, None, history)
    assert learned(against_window)["geomean"]["verdict"] == "regression"
    assert learned(against_window)["geomean"]["change"] < -0.05


def test_drift_names_the_commit_where_it_began() -> None:
    rng = random.Random(4)
    series = [(f"c{i:02d}", 1000.0 * (0.95 if i >= 18 else 1.0) * (1 - abs(rng.gauss(0, 0.004))))
              for i in range(30)]
    (found,) = drift.detect(series)
    assert found.commit == "c18" and found.change == pytest.approx(-0.05, abs=0.01)
    flat = [(f"c{i}", 1000.0 * (1 - abs(rng.gauss(0, 0.01)))) for i in range(30)]
    assert drift.detect(flat) == []
    assert drift.detect(series[:4]) == []  # too short to tell


def test_html_report_has_a_trend_chart_per_item_with_the_drift_marked() -> None:
    from test_perf import sym

    from buildbot_bsdkm.report.html_page import html_report

    history = []
    for i, lg in enumerate(repeats(24, 9, noise=0.004)):
        f = 0.95 if i >= 15 else 1.0  # SHA-256 lost 5 % at commit 15 of the base branch
        lg.benchmarks = [sym(b.name, b.value * f, b.cycles / f) if b.name == "SHA-256" else b
                         for b in lg.benchmarks]
        history.append(run([lg], metadata={**FP, "source_commit": f"{0xabc000 + i:x}"}))
    head = run(repeats(5, 10, noise=0.004, scale={"SHA-256": 0.95}), metadata=FP)
    v = evaluate([head], parse_policy(LEARNED), None, history)
    trend = v.perf[0]["trend"]
    assert trend["SHA-256"]["drift"]["commit"] == "abc00f"
    assert trend["SHA-256"]["drift"]["change"] == pytest.approx(-0.05, abs=0.01)
    assert [n for n, t in trend.items() if t["drift"]] == ["SHA-256"]
    assert len(trend["AES-128-GCM-enc"]["points"]) == 24
    page = html_report([head], v)
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="trend"') == 1
    assert page.count('class="drift"') == 1 and "drift -5." in page and "from abc00f" in page
    assert page.count('class="head"') == 6


def test_buildbot_master_keeps_base_branch_results_in_its_own_database(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from buildbot_bsdkm.buildbot import perf_history

    db = SimpleNamespace(db_url="sqlite:///state.sqlite")  # Buildbot 4's DBConfig
    master = SimpleNamespace(config=SimpleNamespace(db=db), basedir=str(tmp_path))
    url = perf_history.master_db_url(master)
    assert url == f"sqlite:///{tmp_path / 'state.sqlite'}"  # relative to the master's basedir, as Buildbot
    healthy = stored_runs(3, 1)
    sick = stored_runs(1, 2)[0]
    sick.failure = __import__("buildbot_bsdkm.model", fromlist=["StageFailure"]).StageFailure("load", "x")
    unfingerprinted = run(repeats(1, 3))
    kept = [r for r in [*healthy, sick, unfingerprinted] if perf_history.healthy(r)]
    assert kept == healthy
    assert perf_history._add(url, kept, "abc123") == 3
    window = SqlStore(url).window("f00d", "userspace", "intelasm")
    assert [c for c, _ in window] == ["abc123"] * 3


def test_the_worker_side_gate_reads_the_history_the_master_provides(tmp_path: Path) -> None:
    from test_pipeline_e2e import CONFIG

    from buildbot_bsdkm.buildbot import perf_history
    from buildbot_bsdkm.config.bsdkm_yml import parse_config
    from buildbot_bsdkm.model import to_json
    from buildbot_bsdkm.pipeline import stages

    url = f"sqlite:///{tmp_path / 'state.sqlite'}"
    perf_history._add(url, stored_runs(12, 3), None)  # earlier base-branch builds of this machine
    head = run(repeats(3, 4, scale={"SHA-256": 0.8}), metadata=FP)
    window = perf_history._window(url, [head], 30)
    assert len(window) == 12
    job = stages.Job(parse_config(CONFIG, str(tmp_path / "bsdkm.yml"), tmp_path), "userspace", "intelasm",
                     tmp_path / "out")
    (job.dir / "results.json").write_text(to_json([head]))
    (job.dir / stages.HISTORY_FILE).write_text(to_json(window))  # what provide() downloads to the worker
    stages.stage_gate(job)
    (perf,) = job.state["verdict"]["perf"]
    assert perf["base_from"] == "history"
    assert {i["name"]: i["verdict"] for i in perf["items"]}["SHA-256"] == "regression"
    assert "SHA-256" in job.state["gate_failed"] or "regression" in job.state["gate_failed"]


def test_history_trend_per_item_for_the_masters_page(tmp_path: Path) -> None:
    from test_perf import sym

    from buildbot_bsdkm.perf.store import trend

    store = SqlStore(f"sqlite:///{tmp_path / 'state.sqlite'}")
    for i, lg in enumerate(repeats(20, 9, noise=0.004)):
        f = 0.95 if i >= 12 else 1.0
        lg.benchmarks = [sym(b.name, b.value * f, b.cycles / f) if b.name == "SHA-256" else b
                         for b in lg.benchmarks]
        store.add(run([lg], metadata={**FP, "source_commit": f"c{i:02d}"}))
    store.add(stored_runs(1, 4, metadata={"fingerprint": {"id": "beef"}})[0])
    assert store.series() == [("beef", "userspace", "intelasm", 1), ("f00d", "userspace", "intelasm", 20)]
    t = trend(store.window("f00d", "userspace", "intelasm"))
    assert set(t) == {"AES-128-CBC-enc", "AES-128-GCM-enc", "SHA-256", "SHA-512", "GMAC Table 4-bit",
                      "AES-256-GCM-enc"}
    sha = t["SHA-256"]
    assert len(sha["points"]) == 19 and sha["verdict"] == "20 runs" and sha["head_label"] == "newest"
    assert sha["drift"]["commit"] == "c12" and sha["drift"]["index"] == 12
    assert [n for n, s in t.items() if s["drift"]] == ["SHA-256"]
    assert trend(store.window("beef", "userspace", "intelasm")) == {}  # one run: no series yet


def test_perf_history_page_escapes_what_the_history_says() -> None:
    from test_perf import sym

    from buildbot_bsdkm.buildbot.www_perf import render

    evil = "<img src=x onerror=alert(1)>"
    window = [(f"{evil}{i}", run([type(lg)(**{**lg.__dict__, "benchmarks": [sym(evil, 100.0 + i, 2.0)]})],
                                 metadata={"fingerprint": {"id": "f00d", "cpu_model": evil}}))
              for i, lg in enumerate(repeats(4, 1))]
    page = render([("f00d", "userspace", evil, 4)], lambda fp, t, v: window)
    assert evil not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert page.count('<tr class="commit">') == 4 and page.count('<tr class="item">') == 1
    assert "No history stored yet" in render([], lambda fp, t, v: [])
