"""Fault simulation, a test helper: many builds through the real retry policy with injected
infrastructure failures.

Each simulated attempt fails its fetch with probability ``network_failure_rate`` using
real network-error output, classified by the real ``classify``; a build whose code is
broken fails its self-test for real (a real wolfCrypt failure log) on every attempt
that gets past fetch. ``decide`` drives the loop exactly as ``BoundedRetryBuild`` does,
with no manual retry. Used by the retry tests and to produce ``buildbot/README.md``'s numbers.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from buildbot_bsdkm.model import LogResult
from buildbot_bsdkm.retry.classify_failure import classify
from buildbot_bsdkm.retry.decision import (
    Attempt,
    AttemptVerdict,
    RetryDecision,
    RetrySettings,
    decide,
    worker_lost_failure,
)

NETWORK_ERRORS = (
    "curl: (6) Could not resolve host: deb.debian.org",
    "curl: (7) Failed to connect to deb.debian.org port 80: Connection refused",
    "curl: (28) Connection timed out after 30001 milliseconds",
    "fatal: unable to access 'https://github.com/wolfSSL/wolfssl/': Could not resolve host: github.com",
)


@dataclass(frozen=True)
class SimulatedBuild:
    index: int
    broken: str | None  # "selftest" / "panic": the code under test really fails, every time
    expected: AttemptVerdict
    decision: RetryDecision

    @property
    def attempts(self) -> int:
        return len(self.decision.history)

    @property
    def real_retries(self) -> int:
        """Retries that followed a real failure."""
        hist = self.decision.history
        return sum(1 for a in hist[:-1] if a.is_real)

    @property
    def right(self) -> bool:
        return self.decision.verdict == self.expected

    @property
    def gave_up(self) -> bool:
        """Infrastructure failed every allowed attempt: reported as such, neither pass nor fail."""
        return self.decision.verdict == AttemptVerdict.INFRASTRUCTURE and all(
            a.is_infrastructure for a in self.decision.history)


@dataclass
class SimulationReport:
    builds: list[SimulatedBuild] = field(default_factory=list)

    @property
    def right(self) -> int:
        return sum(b.right for b in self.builds)

    @property
    def gave_up(self) -> int:
        return sum(b.gave_up for b in self.builds)

    @property
    def wrong(self) -> int:
        return sum(not b.right and not b.gave_up for b in self.builds)

    @property
    def attempts(self) -> int:
        return sum(b.attempts for b in self.builds)

    @property
    def infra_failures(self) -> int:
        return sum(1 for b in self.builds for a in b.decision.history if a.is_infrastructure)

    @property
    def max_real_retries(self) -> int:
        return max((b.real_retries for b in self.builds), default=0)

    def verdicts(self) -> Counter[str]:
        return Counter(b.decision.verdict.value for b in self.builds)

    def lines(self) -> list[str]:
        return [
            f"builds: {len(self.builds)}, right verdict: {self.right}, gave up on infrastructure: "
            f"{self.gave_up}, wrong: {self.wrong}, attempts: {self.attempts}, "
            f"infrastructure failures injected and retried: {self.infra_failures}, "
            f"most retries after a real failure: {self.max_real_retries}",
            "verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(self.verdicts().items())),
        ]


def _attempt(number: int, worker: str, rng: random.Random, rate: float, broken: str | None,
             selftest_log: LogResult) -> Attempt:
    if rng.random() < rate:
        failure = classify("fetch", exit_code=2, output=rng.choice(NETWORK_ERRORS) + "\n")
        return Attempt.failing(number, worker, failure)
    if broken == "selftest":
        failure = classify("load", exit_code=1, output="", log_results=[selftest_log])
        return Attempt.failing(number, worker, failure)
    if broken == "panic":  # the worker vanished while the module was loading
        return Attempt.failing(number, worker, worker_lost_failure("load"))
    return Attempt.passing(number, worker)


def _broken_kind(i: int, every: int) -> str | None:
    if every <= 0:
        return None
    if i % every == every - 1:
        return "selftest"
    if i % every == every // 2 - 1:
        return "panic"
    return None


def simulate(
    n_builds: int,
    network_failure_rate: float,
    settings: RetrySettings,
    *,
    selftest_failure_log: LogResult,
    broken_every: int = 10,
    workers: tuple[str, ...] = ("w1", "w2"),
    seed: int = 0,
) -> SimulationReport:
    """Run ``n_builds`` through the policy; two in every ``broken_every`` builds fail for real
    (a self-test failure, a panic while loading)."""
    rng = random.Random(seed)
    report = SimulationReport()
    for i in range(n_builds):
        broken = _broken_kind(i, broken_every)
        history: list[Attempt] = []
        worker = workers[i % len(workers)]
        while True:
            history.append(_attempt(len(history) + 1, worker, rng, network_failure_rate, broken,
                                    selftest_failure_log))
            decision = decide(history, settings)
            if not decision.retry:
                break
            worker = next((w for w in workers if w not in decision.avoid_workers), workers[0])
        expected = AttemptVerdict.FAILED if broken else AttemptVerdict.PASSED
        report.builds.append(SimulatedBuild(i, broken, expected, decision))
    return report
