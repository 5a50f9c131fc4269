"""The Buildbot side's door to ``classify``: a finished stage command → ``StageFailure``.

Parsing and the infrastructure/real decision belong to the core; this only
gathers what the master saw (exit code, output, whether Buildbot timed the
command out) and hands it over.
"""

from __future__ import annotations

import re
from typing import Any

from ..model import FailureCategory, LogResult, StageFailure


def _log_results(output: str, stage: str) -> list[LogResult]:
    """What the stage printed, parsed, so classify can tell "hung after complete" from "hung"."""
    try:
        from ..parsers import parse_text
    except ImportError:
        return []
    try:
        return [parse_text(output, f"{stage}-stdio")]
    except Exception:  # noqa: BLE001 - unparseable output is simply no evidence
        return []


# What ``bsdkm-ci stage`` prints when the core classified the failure on the worker, where the
# logs are: "FAILED load category=real reason=selftest: self-test failed: ECC (error -216)".
WORKER_VERDICT = re.compile(
    r"^FAILED (?P<stage>\S+) category=(?P<category>\S+) reason=(?P<reason>\S+): (?P<message>.*)$",
    re.MULTILINE,
)
EVIDENCE = re.compile(r"^  evidence: (?P<path>.+)$", re.MULTILINE)
SKIPPED = re.compile(r": skipped, stage '(?P<stage>[^']+)' failed")


def worker_reported_failure(output: str) -> StageFailure | None:
    """The classification ``bsdkm-ci stage`` made on the worker, if it printed one."""
    m = WORKER_VERDICT.search(output)
    if m is None:
        return None
    try:
        category = FailureCategory(m["category"])
    except ValueError:
        return None
    reason = None if m["reason"] == "None" else m["reason"]
    evidence = [e["path"].strip() for e in EVIDENCE.finditer(output)]
    return StageFailure(stage=m["stage"], message=m["message"].strip(), category=category, reason=reason,
                        evidence=evidence)


def skipped_after(output: str) -> str | None:
    """The earlier stage whose failure made ``bsdkm-ci stage`` refuse to run this one."""
    m = SKIPPED.search(output)
    return m["stage"] if m else None


def patterns_of(retry_config: Any) -> Any:
    """``bsdkm.yml``'s retry patterns (a ``config.RetryConfig``) as classify's ``Patterns``."""
    from ..classify import DEFAULT_PATTERNS, Patterns

    if retry_config is None:
        return DEFAULT_PATTERNS
    if isinstance(retry_config, Patterns):
        return retry_config
    return Patterns.with_extra(getattr(retry_config, "infra_patterns", ()),
                               getattr(retry_config, "real_patterns", ()))


def classify_stage(
    stage: str, *, exit_code: int | None, output: str, timed_out: bool, patterns: Any = None,
    timeout_s: float | None = None,
) -> StageFailure:
    """The core's classification: the worker's own when it printed one (it had the logs), else
    ``classify`` on what the master saw; conservative (real, never retried) if neither can say."""
    reported = worker_reported_failure(output)
    if reported is not None and not timed_out:
        return reported
    try:
        from ..classify import classify
    except ImportError as e:
        return StageFailure(
            stage=stage,
            message=f"{stage} failed (exit {exit_code}); no classifier available: {e}",
            category=FailureCategory.REAL,
            reason=None,
        )
    return classify(
        stage,
        exit_code=exit_code,
        output=output,
        log_results=_log_results(output, stage),
        timed_out=timed_out,
        timeout_s=timeout_s,
        patterns=patterns_of(patterns),
    )


def missing_results(stage: str, what: str) -> StageFailure:
    """The stage said it finished but its files never reached the master: logs lost."""
    return StageFailure(
        stage=stage,
        message=f"{what} could not be read back from the worker",
        category=FailureCategory.INFRASTRUCTURE,
        reason="logs-lost",
    )


def failure_to_dict(f: StageFailure) -> dict[str, Any]:
    return {
        "stage": f.stage,
        "category": FailureCategory(f.category).value,
        "reason": f.reason,
        "message": f.message,
        "evidence": list(f.evidence),
    }


def failure_from_dict(d: Any) -> StageFailure | None:
    """A ``bsdkm_failure`` build property back to a record; None if it is not one."""
    if not isinstance(d, dict) or "stage" not in d or "category" not in d:
        return None
    try:
        category = FailureCategory(d["category"])
    except ValueError:
        return None
    return StageFailure(
        stage=str(d["stage"]),
        message=str(d.get("message", "")),
        category=category,
        reason=d.get("reason"),
        evidence=list(d.get("evidence") or []),
    )
