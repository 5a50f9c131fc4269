"""The Buildbot side's door to ``classify``: a finished stage command → ``StageFailure``.

The worker classifies its own failures (it has the logs) and records them in the stage's
``state.json`` (``contract.stage_outcome`` reads it). What is left for the master is what the
worker could not record: the command timed out, died, or never started. This gathers what the
master saw (exit code, output, whether Buildbot timed the command out) and hands it to the core.
"""

from __future__ import annotations

from typing import Any

from ..model import FailureCategory, LogResult, StageFailure
from ..parsers import parse_text
from ..retry.classify_failure import DEFAULT_PATTERNS, Patterns, classify


def _log_results(output: str, stage: str) -> list[LogResult]:
    """What the stage printed, parsed, so classify can tell "hung after complete" from "hung"."""
    try:
        return [parse_text(output, f"{stage}-stdio")]
    except Exception:  # noqa: BLE001 - unparseable output is simply no evidence
        return []


def _own_lines(output: str) -> str:
    """The stage command's own lines: its progress and the CI's errors, without the ``FAILED`` line
    and evidence that quote what the PR's code printed (a compiler's line, the module's console)."""
    return "\n".join(line for line in output.splitlines() if not line.startswith(("FAILED ", "  evidence: ")))


def patterns_of(retry_config: Any) -> Patterns:
    """``bsdkm.yml``'s retry patterns (a ``bsdkm_yml.RetryConfig``) as classify's ``Patterns``."""
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
    """The core's classification of what the master saw of a stage the worker left no record of."""
    return classify(
        stage,
        exit_code=exit_code,
        output=output,
        harness=_own_lines(output),
        log_results=_log_results(output, stage),
        timed_out=timed_out,
        timeout_s=timeout_s,
        patterns=patterns_of(patterns),
    )


def logs_lost(stage: str, message: str) -> StageFailure:
    """The stage's files never reached the master (or arrived unreadable): infrastructure."""
    return StageFailure(stage=stage, message=message, category=FailureCategory.INFRASTRUCTURE,
                        reason="logs-lost")


def missing_results(stage: str, what: str) -> StageFailure:
    """The stage said it finished but ``what`` could not be read back: logs lost."""
    return logs_lost(stage, f"{what} could not be read back from the worker")
