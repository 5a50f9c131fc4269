"""``bsdkm-ci compare`` with repeats and history, as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_perf import repeats, run

from buildbot_bsdkm.model import to_json

ROOT = Path(__file__).resolve().parents[3]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
FIELDS = {"name", "target", "variant", "change", "ci_low", "ci_high", "limit", "min_detectable", "n_base",
          "n_head", "verdict"}
HERE = {"fingerprint": {"id": "f00d", "cpu_model": "AMD EPYC"}}


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def docs(tmp: Path, prefix: str, seed: int, n: int = 5, metadata: dict | None = None, **kw) -> list[Path]:
    """One results document per repeat, as ``bsdkm-ci run`` writes one per run."""
    out = []
    for i, lg in enumerate(repeats(n, seed, **kw)):
        p = tmp / f"{prefix}{i}.json"
        p.write_text(to_json([run([lg], metadata=metadata or HERE)]))
        out.append(p)
    return out


def test_repeats_of_both_sides_are_judged_together_and_written_as_json(tmp_path: Path) -> None:
    base = docs(tmp_path, "b", 1)
    head = docs(tmp_path, "h", 2, scale={"SHA-256": 0.8})
    out = tmp_path / "verdict.json"
    p = cli("compare", "--base", *base, "--head", *head, "--json", out)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert (doc["verdict"], doc["regression"]) == ("fail", True)  # the policy's one word, Verdict.status
    items = {i["name"]: i for i in doc["items"]}
    assert set(items["SHA-256"]) >= FIELDS
    sha = items["SHA-256"]
    assert sha["verdict"] == "regression" and (sha["n_base"], sha["n_head"]) == (5, 5)
    assert sha["ci_low"] < sha["change"] < sha["ci_high"] < 0
    assert (sha["target"], sha["variant"]) == ("userspace", "intelasm")
    assert items["AES-128-GCM-enc"]["verdict"] == "unchanged"
    assert "| SHA-256 | -20." in p.stdout and "| regression |" in p.stdout  # the per-item table


def test_healthy_repeats_exit_0(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    p = cli("compare", "--base", *docs(tmp_path, "b", 1), "--head", *docs(tmp_path, "h", 2), "--json", out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(out.read_text())["verdict"] == "pass"


def test_short_form_still_works_and_one_run_a_side_is_inconclusive(tmp_path: Path) -> None:
    (base,), (head,) = docs(tmp_path, "b", 1, n=1), docs(tmp_path, "h", 2, n=1, scale={"SHA-256": 0.7})
    out = tmp_path / "v.json"
    p = cli("compare", base, head, "--json", out)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["verdict"] == "inconclusive"
    assert {i["verdict"] for i in doc["items"]} == {"inconclusive"}
    assert "inconclusive (not judged, not passed)" in p.stdout


def test_history_directory_lends_spread_and_other_machines_are_left_out(tmp_path: Path) -> None:
    hist = tmp_path / "history"
    hist.mkdir()
    docs(hist, "ok", 7, n=12)
    docs(hist, "other", 8, n=3, metadata={"fingerprint": {"id": "beef"}})
    out = tmp_path / "v.json"
    p = cli("compare", "--base", *docs(tmp_path, "b", 1, n=3), "--head", *docs(tmp_path, "h", 2, n=3),
            "--history", hist, "--json", out)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert {i["noise_from"] for i in doc["items"]} == {"repeats+history"}
    assert ("userspace/intelasm: 3 history run(s) left out: machine fingerprint beef is not this run's f00d"
            in doc["notes"])


def test_unusable_input_exits_2(tmp_path: Path) -> None:
    base, head = docs(tmp_path, "b", 1, n=3), docs(tmp_path, "h", 2, n=3)
    other = docs(tmp_path, "o", 3, n=3, metadata={"fingerprint": {"id": "beef", "cpu_model": "Intel"}})
    p = cli("compare", "--base", *other, "--head", *head)
    assert p.returncode == 2 and "another machine fingerprint" in p.stderr and "cpu_model" in p.stderr

    nan = tmp_path / "nan.json"
    nan.write_text(head[0].read_text().replace('"per_second": ', '"per_second": NaN, "x": ', 1))
    p = cli("compare", "--base", *base, "--head", nan)
    assert p.returncode == 2 and "nan" in p.stderr.lower() and "Traceback" not in p.stderr

    p = cli("compare", base[0], head[0], "--base", base[1])
    assert p.returncode == 2 and "not both" in p.stderr
    p = cli("compare", "--base", *base)
    assert p.returncode == 2 and "--head" in p.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    p = cli("compare", "--base", *base, "--head", *head, "--history", empty)
    assert p.returncode == 2 and "no .json results documents" in p.stderr


def test_github_action_benchmark_output(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    p = cli("compare", "--base", *docs(tmp_path, "b", 1), "--head", *docs(tmp_path, "h", 2), "--gab", out)
    assert p.returncode == 0, p.stderr
    bigger = json.loads(out.read_text())
    smaller = json.loads((tmp_path / "bench.cycles.json").read_text())
    gcm = next(e for e in bigger if e["name"] == "userspace/intelasm: AES-128-GCM-enc")
    assert gcm["unit"] == "MiB/s" and 4700 < gcm["value"] <= 4900 and gcm["extra"] == "best of 5 repeat(s)"
    assert {"name", "unit", "value"} <= set(smaller[0]) and smaller[0]["unit"] == "cycles/byte"
    assert len(bigger) == len(smaller) == 6


def test_history_add_show_and_compare_against_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    base = docs(tmp_path, "base", 7, n=12)
    p = cli("history", "add", "--store", store, *base)
    assert p.returncode == 0, p.stderr
    assert len(list((store / "f00d" / "userspace" / "intelasm").glob("*.json"))) == 12
    p = cli("history", "show", "--store", store, "--json", tmp_path / "h.json")
    assert p.returncode == 0 and "f00d userspace/intelasm: 12 run(s); no drift" in p.stdout
    # no --base: the head's three repeats are judged against a window of that history
    out = tmp_path / "v.json"
    head = docs(tmp_path, "h", 2, n=3, scale={"SHA-256": 0.8})
    doc_head = [str(h) for h in head]
    p = cli("compare", "--base", *base[:3], "--head", *doc_head, "--history", store, "--json", out)
    assert p.returncode == 1
    assert {i["name"]: i["verdict"] for i in json.loads(out.read_text())["items"]}["SHA-256"] == "regression"
    nofp = tmp_path / "nofp.json"
    nofp.write_text(to_json([run(repeats(1, 3))]))
    p = cli("history", "add", "--store", store, nofp)
    assert p.returncode == 2 and "no machine fingerprint" in p.stderr
