"""The one exception pipeline stages raise: it carries a classified ``StageFailure``."""

from __future__ import annotations

from ...model import FailureCategory, StageFailure


class StageError(Exception):
    """A stage could not finish; ``failure`` says why and who is to blame."""

    def __init__(self, failure: StageFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def infra_error(stage: str, reason: str, message: str, evidence: list[str] | None = None) -> StageError:
    return StageError(
        StageFailure(
            stage=stage,
            message=message,
            category=FailureCategory.INFRASTRUCTURE,
            reason=reason,
            evidence=list(evidence or []),
        )
    )


def real_error(stage: str, reason: str, message: str, evidence: list[str] | None = None) -> StageError:
    return StageError(
        StageFailure(
            stage=stage,
            message=message,
            category=FailureCategory.REAL,
            reason=reason,
            evidence=list(evidence or []),
        )
    )
