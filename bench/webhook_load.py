"""Webhook load on a real Buildbot master: N signed events/s for D seconds.

    .venv/bin/python bench/webhook_load.py [--rate 50] [--duration 20] [--prs 50] [--json FILE]

Starts the loopback GitHub (tests/github_fake) and a real master with the bsdkm GitHub hook
(no worker: build requests stay queued, which is what is measured). The events are GitHub's
example payloads: pushes to PRs (a new head each), redeliveries of a PR's last event and
collaborators' ``retest this please``, scheduled at a fixed rate from 16 client threads.

Checked afterwards, from the master's REST API:
* none lost: every delivery answered 2xx, and every PR's last head has a buildset;
* none double-built: no (PR, head) has more than one buildset.
Latency: from sending a webhook to its answer; the hook answers after the buildset and its
build requests are in the database, so for a building event this is hook-to-build-request.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import requests  # noqa: E402
from github_fake import payloads  # noqa: E402
from github_fake.master import Master, deliver, write_config  # noqa: E402
from github_fake.server import FakeGitHub  # noqa: E402

TARGET_P99_S = 1.0


class RemoteGitHub:
    """The loopback GitHub in its own process, so its OpenAPI checks don't slow the load generator."""

    def __init__(self, token: str = "ghp_fake_token_for_tests") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "tests"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "github_fake.server", "--token", token, "--no-response-validation"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError("loopback GitHub did not start")
        self.token = token
        self.session = requests.Session()

    def add_pull(self, payload: dict[str, Any]) -> None:
        self.session.post(self.url + "/_fake/pulls", json=payload, timeout=30).raise_for_status()

    def state(self) -> dict[str, Any]:
        return requests.get(self.url + "/_fake/state", timeout=30).json()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


FIRST_PR = 1000


@dataclass
class Event:
    at: float  # seconds after the start
    kind: str  # push | redelivery | retest
    number: int
    head: str
    name: str
    payload: dict[str, Any]


@dataclass
class LoadResult:
    rate: float
    duration: float
    events: int
    by_kind: dict[str, int]
    answered_2xx: int
    failed: list[str]
    heads_pushed: int
    buildsets: int
    double_built: list[str]
    last_heads_missing: list[str]
    latency_p50_s: float
    latency_p99_s: float
    latency_max_s: float
    build_latency_p99_s: float
    achieved_rate: float
    latencies: list[float] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return (
            not self.failed
            and not self.double_built
            and not self.last_heads_missing
            and self.latency_p99_s <= TARGET_P99_S
        )


def _head(number: int, serial: int) -> str:
    return f"{number:08x}{serial:032x}"


def schedule(rate: float, duration: float, prs: int) -> list[Event]:
    """A fixed mix: 2 pushes, 1 redelivery, 1 retest in every 4 events, spread over ``prs`` PRs."""
    events: list[Event] = []
    serial: Counter[int] = Counter()
    last: dict[int, dict[str, Any]] = {}
    for i in range(int(rate * duration)):
        number = FIRST_PR + (i // 4) % prs
        slot = i % 4
        if slot in (0, 1) or number not in last:
            serial[number] += 1
            head = _head(number, serial[number])
            payload = payloads.pull_request("synchronize", number=number, head_sha=head, association="MEMBER")
            last[number] = payload
            events.append(Event(i / rate, "push", number, head, "pull_request", payload))
        elif slot == 2:
            payload = last[number]
            events.append(
                Event(
                    i / rate,
                    "redelivery",
                    number,
                    payload["pull_request"]["head"]["sha"],
                    "pull_request",
                    payload,
                )
            )
        else:
            comment = payloads.issue_comment("retest this please", association="COLLABORATOR", number=number)
            events.append(Event(i / rate, "retest", number, "", "issue_comment", comment))
    return events


def run_load(
    master: Master, github: FakeGitHub | RemoteGitHub, rate: float, duration: float, prs: int
) -> LoadResult:
    events = schedule(rate, duration, prs)
    latencies: list[float] = [0.0] * len(events)
    statuses: list[int | str] = [0] * len(events)
    local = threading.local()
    start = time.monotonic() + 0.5

    def send(index: int) -> None:
        event = events[index]
        delay = start + event.at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if event.kind == "push":
            github.add_pull(event.payload)  # GitHub knows the new head before it sends the event
        if not hasattr(local, "session"):
            local.session = requests.Session()
        try:
            response, seconds = deliver(local.session, master.hook_url, event.name, event.payload)
            statuses[index], latencies[index] = response.status_code, seconds
        except requests.RequestException as e:
            statuses[index], latencies[index] = f"{type(e).__name__}", float("inf")

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(send, range(len(events))))
    finished = time.monotonic()

    failed = [
        f"{events[i].kind} #{events[i].number}: {s}" for i, s in enumerate(statuses) if s not in (200, 202)
    ]
    built: Counter[tuple[int, str]] = Counter()
    for bs in master.rest.get("buildsets"):
        for stamp in bs.get("sourcestamps") or []:
            branch = stamp.get("branch") or ""
            if branch.startswith("refs/pull/"):
                built[(int(branch.split("/")[2]), stamp["revision"])] += 1
    ours = {k: v for k, v in built.items() if k[0] >= FIRST_PR}
    last_head: dict[int, str] = {}
    for e in events:
        if e.kind == "push":
            last_head[e.number] = e.head
    ok_latencies = sorted(x for x in latencies if x != float("inf"))
    building = sorted(latencies[i] for i, e in enumerate(events) if e.kind == "push")
    return LoadResult(
        rate=rate,
        duration=duration,
        events=len(events),
        by_kind=dict(Counter(e.kind for e in events)),
        answered_2xx=sum(1 for s in statuses if s in (200, 202)),
        failed=failed,
        heads_pushed=sum(1 for e in events if e.kind == "push"),
        buildsets=sum(ours.values()),
        double_built=[f"#{n} {h[:12]}: {c} buildsets" for (n, h), c in ours.items() if c > 1],
        last_heads_missing=[f"#{n} {h[:12]}" for n, h in last_head.items() if (n, h) not in ours],
        latency_p50_s=statistics.median(ok_latencies),
        latency_p99_s=ok_latencies[int(0.99 * (len(ok_latencies) - 1))],
        latency_max_s=ok_latencies[-1],
        build_latency_p99_s=building[int(0.99 * (len(building) - 1))],
        achieved_rate=len(events) / (finished - start),
        latencies=latencies,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=50.0, help="events per second (default 50)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds (default 20)")
    parser.add_argument("--prs", type=int, default=50, help="distinct pull requests (default 50)")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--master-log", type=Path, help="keep the master's twistd.log here")
    args = parser.parse_args(argv)
    github = RemoteGitHub()
    with tempfile.TemporaryDirectory(prefix="bsdkm-webhook-load-") as tmp:
        base = Path(tmp)
        master = Master(base, github)  # type: ignore[arg-type]
        try:
            master.start(write_config(base / "bsdkm.yml", github.url), with_worker=False)  # type: ignore[arg-type]
            result = run_load(master, github, args.rate, args.duration, args.prs)
            if args.master_log:
                args.master_log.write_text(master.log(), encoding="utf-8")
        finally:
            master.stop()
            github.stop()
    summary = {k: v for k, v in asdict(result).items() if k != "latencies"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(
        f"p99 hook latency {result.latency_p99_s * 1000:.0f} ms (target <= {TARGET_P99_S * 1000:.0f} ms): "
        f"{'OK' if result.ok else 'FAILED'}"
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
