"""Webhook load on a real Buildbot master: N signed events/s for D seconds.

    .venv/bin/python bench/webhook_load.py [--rate 50] [--duration 60] [--prs 50] [--busy] [--json FILE]

Starts the loopback GitHub (tests/github_fake) and a real master with the bsdkm GitHub hook
(no worker: build requests stay queued, which is what is measured). The events are GitHub's
example payloads: pushes to PRs (a new head each), redeliveries of a PR's last event and
collaborators' ``retest this please``, each sent at its scheduled time by an asyncio client (one
connection per request, as GitHub's deliveries come), so the offered rate does not depend on how
fast the master answers: ``offered_rate`` is what was sent, ``achieved_rate`` what was answered.

``--busy`` adds ``bench/master_probe.py`` to the master: PR reports rendered as the reporter
renders them and worker file transfers going on during the load, and a 10 ms reactor tick whose
gaps (``reactor``) say how long the reactor was busy with something else.

Checked afterwards, from the master's REST API:
* none lost: every delivery answered 2xx, and every PR's last head has a buildset (waited for
  after the load, up to ``DRAIN_LIMIT_S``: ``drained_s`` is how long after the last answer);
* none double-built: no (PR, head) has more than one buildset.
Latency: from sending a webhook to its answer. The hook answers once the event is verified and in
the master's inbox; the buildsets come after, and how far behind they run is ``drained_s``.
``--profile FILE`` adds ``bench/master_profile.py``: the reactor thread's profile and the time of
each database operation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import requests  # noqa: E402
from github_fake import payloads  # noqa: E402
from github_fake.master import Master, sign, write_config  # noqa: E402
from github_fake.master import control as master_control  # noqa: E402

BENCH_CFG = """# bench/webhook_load.py: the real master.cfg, then the bench's own services
import sys
exec(compile(open({real!r}).read(), {real!r}, "exec"))
sys.path.insert(0, {bench!r})
{services}
"""
PROBE_SERVICE = """from master_probe import ReactorProbe
BuildmasterConfig.setdefault("services", []).append(ReactorProbe(out={out!r}))"""
UNFROZEN_SERVICE = """from buildbot_bsdkm.buildbot.heap import FrozenStartupHeap
BuildmasterConfig["services"] = [s for s in BuildmasterConfig["services"]
                                 if not isinstance(s, FrozenStartupHeap)]"""
PROFILE_SERVICE = """from master_profile import ReactorProfile
BuildmasterConfig.setdefault("services", []).append(ReactorProfile(out={out!r}))"""


def with_services(probe: Path | None = None, profile: Path | None = None, unfrozen: bool = False) -> None:
    """Make the next master ``control.create`` lays out load bench/master_probe.py (figures to
    ``probe``) and bench/master_profile.py (a reactor profile to ``profile``) too; ``unfrozen``:
    without the master's frozen startup heap, to compare."""
    plain = master_control.create
    lines = ([PROBE_SERVICE.format(out=str(probe))] if probe else []) + (
        [PROFILE_SERVICE.format(out=str(profile))] if profile else []) + (
        [UNFROZEN_SERVICE] if unfrozen else [])
    if not lines:
        return

    def create(layout: Any, **kwargs: Any) -> Any:
        got = plain(layout, **kwargs)
        cfg = layout.master / "master.cfg"
        real = str(cfg.resolve())
        cfg.unlink()
        cfg.write_text(BENCH_CFG.format(real=real, bench=str(ROOT / "bench"), services="\n".join(lines)),
                       encoding="utf-8")
        return got

    master_control.create = create
from github_fake.server import FakeGitHub  # noqa: E402

from buildbot_bsdkm.github.inbox import INBOX_FILE, read_journal  # noqa: E402
from buildbot_bsdkm.github.settings import GitHubSettings  # noqa: E402

TARGET_P99_S = 1.0
ANSWER_WITHIN_S = GitHubSettings.answer_within_s  # the master's default, not the tests' helper's


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
    build_latency_p99_s: float  # the answer's latency of the pushes (those that build)
    achieved_rate: float
    offered_rate: float = 0.0
    send_lag_max_s: float = 0.0  # the client's own lateness against the schedule
    reactor: dict[str, Any] | None = None  # bench/master_probe.py's figures (--busy)
    drained_s: float = 0.0  # after the last answer, until every PR's newest head had its buildset
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
            # As GitHub sends a push: the head it replaced, and updated_at stamped when it is sent.
            payload["before"] = _head(number, serial[number] - 1)
            payload["after"] = head
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


async def _post(url: str, body: bytes, headers: dict[str, str], timeout: float = 60.0) -> int:
    """One HTTP/1.1 POST on a connection of its own; returns the status code."""
    parts = urlsplit(url)
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(parts.hostname, parts.port or 80), timeout)
    try:
        head = [f"POST {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
                f"Host: {parts.netloc}", f"Content-Length: {len(body)}", "Connection: close",
                *(f"{k}: {v}" for k, v in headers.items())]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), timeout)
        await asyncio.wait_for(reader.read(), timeout)  # the rest, until the server closes
        return int(status.split()[1])
    finally:
        writer.close()


REQUEST_TIMEOUT_S = 600.0  # a late answer is a latency to report, not a lost event


async def _deliver(hook_url: str, event: str, payload: dict[str, Any]) -> int:
    body = json.dumps(payload).encode()
    return await _post(hook_url, body, timeout=REQUEST_TIMEOUT_S, headers={
        "Content-Type": "application/json", "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()), "User-Agent": "GitHub-Hookshot/loopback",
        "X-Hub-Signature-256": sign(body)})


def _built(master: Master) -> Counter[tuple[int, str]]:
    """Buildsets per (PR, head) of the load's PRs, from the master's REST API."""
    built: Counter[tuple[int, str]] = Counter()
    for attempt in range(10):  # the master may still be busy with the tail of the load
        try:
            buildsets = master.rest.get("buildsets")
            break
        except requests.RequestException:
            if attempt == 9:
                raise
            time.sleep(10)
    for bs in buildsets:
        for stamp in bs.get("sourcestamps") or []:
            branch = stamp.get("branch") or ""
            if branch.startswith("refs/pull/"):
                built[(int(branch.split("/")[2]), stamp["revision"])] += 1
    return Counter({k: v for k, v in built.items() if k[0] >= FIRST_PR})


DRAIN_LIMIT_S = 600.0


def run_load(
    master: Master, github: FakeGitHub | RemoteGitHub, rate: float, duration: float, prs: int,
    drain_limit_s: float = DRAIN_LIMIT_S, after_answers: Any = None,
) -> LoadResult:
    """``after_answers``: called once every delivery was answered, before waiting for the buildsets
    (the suite's test kills and restarts the master there)."""
    events = schedule(rate, duration, prs)
    latencies: list[float] = [0.0] * len(events)
    statuses: list[int | str] = [0] * len(events)
    lags: list[float] = [0.0] * len(events)
    sent_at: list[float] = [0.0] * len(events)

    async def send(index: int, start: float) -> None:
        event = events[index]
        loop = asyncio.get_running_loop()
        delay = start + event.at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        lags[index] = loop.time() - (start + event.at)
        try:
            if event.kind == "push":  # GitHub knows the new head before it sends the event
                event.payload["pull_request"]["updated_at"] = payloads.github_time()
                await _post(github.url + "/_fake/pulls", json.dumps(event.payload).encode(),
                            {"Content-Type": "application/json"})
            sent_at[index] = began = loop.time()
            statuses[index] = await _deliver(master.hook_url, event.name, event.payload)
            latencies[index] = loop.time() - began
        except (TimeoutError, OSError, ValueError, IndexError) as e:
            statuses[index], latencies[index] = f"{type(e).__name__}", float("inf")

    async def all_of() -> tuple[float, float]:
        start = asyncio.get_running_loop().time() + 0.5
        await asyncio.gather(*(send(i, start) for i in range(len(events))))
        return start, asyncio.get_running_loop().time()

    start, finished = asyncio.run(all_of())
    if after_answers is not None:
        after_answers()
    offered_over = max(sent_at) - min(x for x in sent_at if x) if any(sent_at) else 0.0

    failed = [
        f"{events[i].kind} #{events[i].number}: {s}" for i, s in enumerate(statuses) if s not in (200, 202)
    ]
    last_head: dict[int, str] = {}
    for e in events:
        if e.kind == "push":
            last_head[e.number] = e.head
    # The hook answers before the master acts on an event: wait until every PR's newest head has
    # its buildset (or the drain limit), and say how long that took after the last answer.
    answered_at = time.monotonic()
    deadline = answered_at + drain_limit_s
    # The inbox journal says what is still to act on; asking the REST API for every buildset each
    # second would itself load the master's database.
    journal = master.layout.master / INBOX_FILE
    while time.monotonic() < deadline and (not journal.exists() or read_journal(journal, 0.0)):
        time.sleep(1.0)
    drained_s = time.monotonic() - answered_at
    time.sleep(1.0)  # the last event's buildset follows its last database write
    ours = _built(master)
    ok_latencies = sorted(x for x in latencies if x != float("inf")) or [float("inf")]
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
        last_heads_missing=[f"#{n} {h}" for n, h in last_head.items() if (n, h) not in ours],
        latency_p50_s=statistics.median(ok_latencies),
        latency_p99_s=ok_latencies[int(0.99 * (len(ok_latencies) - 1))],
        latency_max_s=ok_latencies[-1],
        build_latency_p99_s=building[int(0.99 * (len(building) - 1))],
        achieved_rate=len(events) / (finished - start),
        offered_rate=(len(events) - 1) / offered_over if offered_over > 0 else 0.0,
        send_lag_max_s=max(lags),
        drained_s=drained_s,
        latencies=latencies,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=50.0, help="events per second (default 50)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--prs", type=int, default=50, help="distinct pull requests (default 50)")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--master-log", type=Path, help="keep the master's twistd.log here")
    parser.add_argument("--busy", action="store_true",
                        help="reports rendering and worker file transfers during the load; reactor gaps")
    parser.add_argument("--unfrozen-heap", action="store_true",
                        help="without the master's frozen startup heap (buildbot/heap.py), to compare")
    parser.add_argument("--profile", type=Path, help="cProfile the master's reactor thread into this file")
    args = parser.parse_args(argv)
    # Every delivery waits on a connection of its own: a slow master holds thousands open at once
    # (here and in the master, which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    github = RemoteGitHub()
    with tempfile.TemporaryDirectory(prefix="bsdkm-webhook-load-") as tmp:
        base = Path(tmp)
        probe = base / "probe.json"
        with_services(probe if args.busy else None, args.profile.resolve() if args.profile else None,
                      unfrozen=args.unfrozen_heap)
        master = Master(base, github)  # type: ignore[arg-type]
        try:
            config = write_config(base / "bsdkm.yml", github.url, answer_within_s=ANSWER_WITHIN_S)
            master.start(config, with_worker=False)  # type: ignore[arg-type]
            if args.busy:
                time.sleep(5)  # the probe's first report renders (the renderer's child starts)
            result = run_load(master, github, args.rate, args.duration, args.prs)
            if args.master_log:
                args.master_log.write_text(master.log(), encoding="utf-8")
        finally:
            master.stop()
            github.stop()
        if args.busy:
            result.reactor = json.loads(probe.read_text()) if probe.is_file() else {"error": "no figures"}
    summary = {k: v for k, v in asdict(result).items() if k != "latencies"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(
        f"offered {result.offered_rate:.1f} events/s; p99 hook latency {result.latency_p99_s * 1000:.0f} ms "
        f"(target <= {TARGET_P99_S * 1000:.0f} ms): {'OK' if result.ok else 'FAILED'}"
    )
    if result.reactor:
        print(f"reactor: longest gap {result.reactor.get('lag_max_s', 0) * 1000:.0f} ms, "
              f"{result.reactor.get('lag_over_100ms')} gap(s) over 100 ms")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
