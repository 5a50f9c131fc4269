"""The one exception pipeline stages raise: it carries a classified ``StageFailure``."""

from __future__ import annotations

from ...model import FailureCategory, StageFailure


class StageError(Exception):
    """A stage could not finish; ``failure`` says why and who is to blame."""

    def __init__(self, failure: StageFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def infra_error(stage: str, reason: str, message: str, evidence: list[str] | None = None) -> StageError:
    return _error(FailureCategory.INFRASTRUCTURE, stage, reason, message, evidence)


def real_error(stage: str, reason: str, message: str, evidence: list[str] | None = None) -> StageError:
    return _error(FailureCategory.REAL, stage, reason, message, evidence)


def _error(category: FailureCategory, stage: str, reason: str, message: str,
           evidence: list[str] | None) -> StageError:
    return StageError(StageFailure(stage=stage, message=message, category=category, reason=reason,
                                   evidence=list(evidence or [])))
