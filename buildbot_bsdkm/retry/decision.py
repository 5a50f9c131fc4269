"""Bounded retry: what to do after one attempt of a (target, variant) build.

Buildbot re-queues a RETRY result forever and calls a lost worker RETRY. Here
each attempt is recorded with the failure ``classify`` found, and ``decide``
looks at the whole history:

* infrastructure failures are retried up to ``max_infra_retries`` times, with
  backoff, preferably on a worker that has not failed this build yet, except those no attempt can
  change (``FINAL_INFRA_REASONS``: an input that disagrees with its pin), said at once;
* a real failure is never retried silently; a panic or hang while the module
  loads is retried once on a fresh worker, only to see whether it reproduces,
  and the verdict stays failed either way.

Pure: no Buildbot, no I/O, so the policy can be tested (and simulated) alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ..model import FailureCategory, FailureReason, StageFailure

# Real failures worth one reproducibility run: the machine (not the code we
# built) may be what went wrong, and a second worker tells the two apart.
REPRODUCE_REASONS = frozenset({FailureReason.PANIC, FailureReason.LOAD_TIMEOUT})

LOAD_STAGES = frozenset({"load"})

# Infrastructure failures that another attempt cannot change: inputs that are not what a pin or
# their own manifest says (a release's FreeBSD sets). Not the code's fault, so never ``real``; not
# transient either, so said at once instead of retried.
FINAL_INFRA_REASONS = frozenset({FailureReason.INTEGRITY})


class AttemptVerdict(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # real failure, reproduced or not retried
    FLAKY = "flaky"  # real failure once, passed once: still a failure
    INFRASTRUCTURE = "infrastructure"  # gave up after the retries the config allows
    RETRYING = "retrying"


class RetryConfigError(ValueError):
    """Retry settings that cannot be used; the message names the key."""


@dataclass(frozen=True)
class RetrySettings:
    max_infra_retries: int = 2
    backoff_s: tuple[float, ...] = (30.0, 120.0)  # delay before retry 1, 2, ...; the last repeats
    reproduce_reasons: frozenset[FailureReason] = REPRODUCE_REASONS

    def __post_init__(self) -> None:
        if isinstance(self.max_infra_retries, bool) or not isinstance(self.max_infra_retries, int):
            raise RetryConfigError(
                f"retry.max_infra_retries: expected an integer, got {self.max_infra_retries!r}"
            )
        if self.max_infra_retries < 0:
            raise RetryConfigError(
                f"retry.max_infra_retries: must be at least 0, got {self.max_infra_retries}"
            )
        if any(isinstance(b, bool) or not isinstance(b, int | float) or b < 0 for b in self.backoff_s):
            raise RetryConfigError(
                f"retry.backoff_s: expected non-negative numbers, got {list(self.backoff_s)!r}"
            )

    @classmethod
    def from_config(cls, retry: Any) -> RetrySettings:
        """From ``bsdkm_yml.RetryConfig`` (``bsdkm.yml``'s ``retry:`` block)."""
        return cls(max_infra_retries=retry.max_infra_retries, backoff_s=tuple(retry.backoff_s))

    def backoff(self, retry_number: int) -> float:
        """Seconds to wait before the ``retry_number``-th retry (1-based)."""
        if not self.backoff_s or retry_number < 1:
            return 0.0
        return float(self.backoff_s[min(retry_number, len(self.backoff_s)) - 1])


@dataclass(frozen=True)
class Attempt:
    """One build of the request: where it ran and how it ended."""

    number: int  # 1-based
    worker: str | None
    passed: bool
    stage: str | None = None  # stage that failed
    category: str | None = None  # FailureCategory value when failed
    reason: FailureReason | None = None
    message: str = ""

    @classmethod
    def passing(cls, number: int, worker: str | None) -> Attempt:
        return cls(number=number, worker=worker, passed=True, message="passed")

    @classmethod
    def failing(cls, number: int, worker: str | None, failure: StageFailure) -> Attempt:
        return cls(
            number=number,
            worker=worker,
            passed=False,
            stage=failure.stage,
            category=FailureCategory(failure.category).value,
            reason=failure.reason,
            message=failure.message,
        )

    @property
    def is_infrastructure(self) -> bool:
        return not self.passed and self.category == FailureCategory.INFRASTRUCTURE.value

    @property
    def is_real(self) -> bool:
        return not self.passed and not self.is_infrastructure

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reason"] = None if self.reason is None else self.reason.value
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        """From a build property; raises RetryConfigError naming a bad record."""
        try:
            return cls(
                number=int(d["number"]),
                worker=d.get("worker"),
                passed=bool(d["passed"]),
                stage=d.get("stage"),
                category=d.get("category"),
                reason=None if d.get("reason") is None else FailureReason(d["reason"]),
                message=str(d.get("message", "")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise RetryConfigError(f"attempt record {dict(d)!r} is malformed: {e}") from None

    def describe(self) -> str:
        where = f" on {self.worker}" if self.worker else ""
        if self.passed:
            return f"attempt {self.number}{where}: passed"
        kind = "infrastructure" if self.is_infrastructure else "real"
        reason = self.reason or "unknown"
        return f"attempt {self.number}{where}: {kind} failure ({reason}) at {self.stage}: {self.message}"


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    verdict: AttemptVerdict
    summary: str  # one line for the UI / PR
    delay_s: float = 0.0
    avoid_workers: tuple[str, ...] = ()  # prefer any other worker for the retry
    history: tuple[Attempt, ...] = field(default_factory=tuple)

    def history_dicts(self) -> list[dict[str, Any]]:
        return [a.to_dict() for a in self.history]


def worker_lost_failure(stage: str | None) -> StageFailure:
    """A lost worker: infrastructure, unless the module was loading (then the kernel is the suspect)."""
    if stage in LOAD_STAGES:
        return StageFailure(
            stage=stage,
            message="worker lost while the module was loading (kernel panic or hang?)",
            category=FailureCategory.REAL,
            reason=FailureReason.PANIC,  # classify's name for "the machine went away while the module loaded"
        )
    return StageFailure(
        stage=stage or "unknown",
        message=f"worker lost during {stage or 'the build'}",
        category=FailureCategory.INFRASTRUCTURE,
        reason=FailureReason.WORKER_LOST,
    )


def ci_exception_failure(stage: str | None, detail: str) -> StageFailure:
    """A Python exception on the CI side: nothing to do with wolfSSL."""
    return StageFailure(
        stage=stage or "unknown",
        message=f"CI exception: {detail}",
        category=FailureCategory.INFRASTRUCTURE,
        reason=FailureReason.CI_EXCEPTION,
    )


def decide(history: Sequence[Attempt], settings: RetrySettings) -> RetryDecision:
    """What to do after the last attempt in ``history`` (oldest first, non-empty)."""
    if not history:
        raise ValueError("decide() needs at least one attempt")
    hist = tuple(history)
    last = hist[-1]
    real = [a for a in hist if a.is_real]
    infra = [a for a in hist if a.is_infrastructure]
    if last.passed:
        return _after_pass(hist, real, infra)
    if last.is_infrastructure:
        return _after_infrastructure(hist, real, infra, settings)
    return _after_real(hist, real, settings)


def _retried_note(infra: list[Attempt]) -> str:
    if not infra:
        return ""
    reasons = ", ".join(a.reason or "unknown" for a in infra)
    n = len(infra)
    return f" after {n} infrastructure retr{'y' if n == 1 else 'ies'} ({reasons})"


def _after_pass(hist: tuple[Attempt, ...], real: list[Attempt], infra: list[Attempt]) -> RetryDecision:
    if real:
        first = real[0]
        return RetryDecision(
            retry=False,
            verdict=AttemptVerdict.FLAKY,
            summary="failed once, passed once: flaky, see logs "
            f"({first.reason} at {first.stage}: {first.message})",
            history=hist,
        )
    summary = "passed" + _retried_note(infra)
    return RetryDecision(retry=False, verdict=AttemptVerdict.PASSED, summary=summary, history=hist)


def _after_infrastructure(
    hist: tuple[Attempt, ...], real: list[Attempt], infra: list[Attempt], settings: RetrySettings
) -> RetryDecision:
    last = hist[-1]
    final = last.reason in FINAL_INFRA_REASONS
    if final and not real:
        return RetryDecision(
            retry=False,
            verdict=AttemptVerdict.INFRASTRUCTURE,
            summary=f"infrastructure failure ({last.reason}) at {last.stage}, not retried (another attempt "
            f"cannot change it): {last.message}",
            history=hist,
        )
    if not final and len(infra) <= settings.max_infra_retries:
        n = len(infra)
        return RetryDecision(
            retry=True,
            verdict=AttemptVerdict.RETRYING,
            summary=f"infrastructure failure ({last.reason}) at {last.stage}: retry {n} of "
            f"{settings.max_infra_retries}",
            delay_s=settings.backoff(n),
            avoid_workers=_failed_workers(hist),
            history=hist,
        )
    if real:  # the reproducibility run could not finish: the real failure still stands
        return RetryDecision(
            retry=False,
            verdict=AttemptVerdict.FAILED,
            summary=f"failed ({real[0].reason} at {real[0].stage}); reproducibility check lost to "
            f"infrastructure ({last.reason})",
            history=hist,
        )
    reasons = ", ".join(a.reason or "unknown" for a in infra)
    return RetryDecision(
        retry=False,
        verdict=AttemptVerdict.INFRASTRUCTURE,
        summary=f"infrastructure failure, gave up after {len(hist)} attempts ({reasons})",
        history=hist,
    )


def _after_real(hist: tuple[Attempt, ...], real: list[Attempt], settings: RetrySettings) -> RetryDecision:
    last = hist[-1]
    if len(real) == 1 and last.reason in settings.reproduce_reasons:
        return RetryDecision(
            retry=True,
            verdict=AttemptVerdict.RETRYING,
            summary=f"{last.reason} at {last.stage}: one more run on a fresh worker to check reproducibility",
            avoid_workers=_failed_workers(hist),
            history=hist,
        )
    if len(real) >= 2:
        return RetryDecision(
            retry=False,
            verdict=AttemptVerdict.FAILED,
            summary=f"failed twice: {last.reason} at {last.stage}: {last.message}",
            history=hist,
        )
    return RetryDecision(
        retry=False,
        verdict=AttemptVerdict.FAILED,
        summary=f"failed: {last.reason} at {last.stage}: {last.message}",
        history=hist,
    )


def _failed_workers(hist: Iterable[Attempt]) -> tuple[str, ...]:
    seen: list[str] = []
    for a in hist:
        if not a.passed and a.worker and a.worker not in seen:
            seen.append(a.worker)
    return tuple(seen)


def pick_worker(candidates: Sequence[str], avoid: Sequence[str]) -> str | None:
    """First candidate not in ``avoid``; else the one avoided longest ago; None when no candidate."""
    if not candidates:
        return None
    for name in candidates:
        if name not in avoid:
            return name
    order = {name: i for i, name in enumerate(avoid)}
    return min(candidates, key=lambda n: order.get(n, -1))
