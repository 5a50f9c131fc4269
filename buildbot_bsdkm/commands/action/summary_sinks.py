"""The Action's own sinks for the core's PR report (``report/sinks.py``): the job summary and the
workflow annotations. Its commit statuses and comment go through the GitHub sinks the Buildbot
reporter uses (``github/pr_sinks.py``), in ``status.py`` and ``comment.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...policy import Verdict
from ...report.pull_request import PullRequestReport
from ...report.sinks import PullRequestRef
from . import workflow as actions
from .workflow import Annotation


class JobSummary:
    """The report as the job's summary (``$GITHUB_STEP_SUMMARY``); nothing outside a workflow."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        path = actions.env_path(self.env, "GITHUB_STEP_SUMMARY")
        if path is not None and report.markdown:
            actions.append_step_summary(path, report.markdown)
        return True


class Annotations:
    """One ``::error``/``::warning`` line per failed check and note, at most ``limit`` a level."""

    def __init__(self, annotate: Callable[[Verdict], list[Annotation]], limit: int) -> None:
        self.annotate = annotate  # the verdict's annotations, located in the run's logs
        self.limit = limit

    async def deliver(self, report: PullRequestReport, where: PullRequestRef) -> bool:
        for line in actions.cap_annotations(self.annotate(report.verdict), self.limit).commands():
            print(line)
        return True
