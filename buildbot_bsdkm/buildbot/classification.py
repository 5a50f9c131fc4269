"""The Buildbot side's door to ``classify``: a finished stage command → ``StageFailure``.

Parsing and the infrastructure/real decision belong to the core; this only
gathers what the master saw (exit code, output, whether Buildbot timed the
command out) and hands it over.
"""

from __future__ import annotations

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
    """The core's classification; conservative (real, never retried) if the core cannot say."""
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
