"""Load, briefly: 50 signed webhooks/s for 4 s into a real master (bench/webhook_load.py), which is
killed (SIGKILL) as soon as the last one is answered and started again.

The hook answers once an event is in the master's inbox, and the master acts on it afterwards, so
at that moment most events are answered and not acted on yet. None may be lost (every delivery
answered 2xx, every PR's last head has a buildset after the restart) and none double-built (no PR
head with two buildsets). The answers' p99 is held to a generous bound only: the 1 s target over
60 s is a benchmark figure (``python bench/webhook_load.py``, ``bench/results/webhook_load.md``),
not a timed assertion on a shared machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from script_module import load_script

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
GENEROUS_P99_S = 10.0




def test_fifty_events_per_second_then_a_kill_loses_none_and_builds_none_twice(tmp_path: Path) -> None:
    bench = load_script(ROOT / "bench" / "webhook_load.py")  # bench/ is not a package
    github = bench.RemoteGitHub()
    master = bench.Master(tmp_path, github)
    journal = master.layout.master / "github-inbox.jsonl"
    left: list[int] = []

    def kill_and_restart() -> None:
        master.kill()
        left.append(len(bench.read_journal(journal, 0.0)))
        master.restart()

    started = time.monotonic()
    try:
        config = bench.write_config(tmp_path / "bsdkm.yml", github.url, answer_within_s=bench.ANSWER_WITHIN_S)
        master.start(config, with_worker=False)
        result = bench.run_load(master, github, rate=50, duration=4, prs=20, drain_limit_s=300,
                                after_answers=kill_and_restart)
        invalid = github.state()["invalid"]
    finally:
        master.stop()
        github.stop()
    summary = {k: v for k, v in vars(result).items() if k != "latencies"}
    summary["left_in_inbox_at_kill"] = left
    summary["wall_s"] = time.monotonic() - started
    (tmp_path / "webhook_load.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))

    assert result.events == 200
    assert result.failed == [], "deliveries lost"
    assert left and left[0] > 0, "nothing was left to act on at the kill: the restart was not tested"
    assert result.double_built == [], "PR heads built twice"
    assert result.last_heads_missing == [], "a PR's newest head was never built"
    assert result.buildsets <= result.heads_pushed
    assert invalid == [], "status requests outside GitHub's OpenAPI description"
    assert result.latency_p99_s < GENEROUS_P99_S
