"""What both shells write to GitHub, without Twisted: the marker of the one report comment and a commit
status description cut to GitHub's limit, as the core's PR report (``report/pull_request.py``) makes them.

Kept apart from the publisher so the Action's judging steps (``action outputs``, ``gate``) run on the
base install, which has no GitHub client.
"""

from __future__ import annotations

from ..report.commit_status import STATUS_DESCRIPTION_LIMIT, short_description
from ..report.pull_request import REPORT_MARKER

__all__ = ["REPORT_MARKER", "STATUS_DESCRIPTION_LIMIT", "short_description"]
