"""What a master killed with SIGKILL and started again must not lose.

Used on sqlite (``test_gh_master.py``'s master) and on PostgreSQL (``test_gh_restart.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from . import payloads
from .master import Master, deliver
from .server import FakeGitHub, Fault

CANCELLED = 6
A, B, C = "a" * 40, "b" * 40, "c" * 40
CONTEXTS = {"bsdkm/userspace/intelasm", "bsdkm/userspace/noasm"}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _pr(github: FakeGitHub, number: int, action: str, head: str, **kw: object) -> dict:
    payload = payloads.pull_request(action, number=number, head_sha=head, **kw)
    github.add_pull(payload)
    return payload


def _statuses(github: FakeGitHub, sha: str) -> list[dict]:
    with github.lock:
        return [s for s in github.statuses if s["url"].endswith(sha)]


def kill_and_restart_scenario(master: Master, github: FakeGitHub) -> None:
    fork = dict(association="FIRST_TIME_CONTRIBUTOR", login="newcomer", fork=True)
    hook = master.hook_url
    opened = _pr(github, 300, "opened", A, updated_at=payloads.github_time(-60), **fork)
    deliver(None, hook, "pull_request", opened)
    ok = payloads.issue_comment("ok to test", association="MEMBER", login="maintainer", number=300)
    deliver(None, hook, "issue_comment", ok, delivery="restart-ok-to-test")
    (approved,) = master.buildsets_for(300)
    wait_for(lambda: {s["context"] for s in _statuses(github, A)} >= CONTEXTS, "queued statuses of A")

    # GitHub fails every status POST for a while: PR 301's "queued" statuses are in their retries...
    github.fail_next(*[Fault(500, method="POST", delay=0.5) for _ in range(200)])
    deliver(None, hook, "pull_request", _pr(github, 301, "opened", C))
    outbox = master.layout.master / "github-outbox.json"
    wait_for(lambda: outbox.exists() and len([p for p in json.loads(outbox.read_text())["pending"]
                                                if p["payload"].get("sha") == C]) == 2,
             "write-ahead outbox", timeout=5)  # before the first attempt, not after the retries
    # ... when the master dies.
    master.kill()
    with github.lock:
        github.faults.clear()
    master.restart()

    # Item 10: each of them reaches GitHub, exactly once.
    wait_for(lambda: {s["context"] for s in _statuses(github, C)} >= CONTEXTS, "C's statuses after restart",
             timeout=60)
    assert sorted(s["context"] for s in _statuses(github, C)) == sorted(CONTEXTS)

    # Item 1, persisted: the same delivery re-POSTed after the restart does nothing.
    deliver(None, hook, "issue_comment", ok, delivery="restart-ok-to-test")
    master.wait_acted()  # the hook answers first, then the master acts
    assert len(master.buildsets_for(300)) == 1
    # A maintainer's retest while head A's build from before the kill is still pending joins it,
    # as it would have without the kill: the master read its unfinished buildsets when it started.
    retest = payloads.issue_comment("retest this please", association="MEMBER", login="lead", number=300)
    deliver(None, hook, "issue_comment", retest)
    master.wait_acted()
    assert len(master.buildsets_for(300)) == 1
    assert "a build of PR #300 head aaaaaaaaaaaa is already pending" in master.log()
    # Item 11: a push after the restart still supersedes the queued builds made before it...
    deliver(None, hook, "pull_request", _pr(github, 300, "synchronize", B, **fork))
    for buildset in master.buildsets_for(300):
        done = wait_for(lambda b=buildset: all(r["complete"] for r in master.requests_of(b["bsid"]))
                        and master.requests_of(b["bsid"]), f"buildset {buildset['bsid']} cancelled")
        assert {r["results"] for r in done} == {CANCELLED}
    assert approved["bsid"] in {b["bsid"] for b in master.buildsets_for(300)}
    # Item 16: ... and A's pending statuses are resolved, naming the new head.
    wait_for(lambda: {c for c, s in github.latest_statuses(A).items() if s["state"] == "error"} >= CONTEXTS,
             "A's statuses resolved")
    for status in github.latest_statuses(A).values():
        assert status["description"] == f"superseded by {B}"
    assert master.buildsets_for(300)[-1]["sourcestamps"][0]["revision"] != B  # B needs its own approval


