"""What both shells write to GitHub, without Twisted: the marker of the one report comment and a commit
status description cut to GitHub's limit.

Kept apart from the publisher so the Action's judging steps (``action outputs``, ``gate``) run on the
base install, which has no GitHub client.
"""

from __future__ import annotations

REPORT_MARKER = "<!-- bsdkm-ci:pr-report -->"
STATUS_DESCRIPTION_LIMIT = 140  # GitHub answers 422 above this


def short_description(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= STATUS_DESCRIPTION_LIMIT else line[: STATUS_DESCRIPTION_LIMIT - 1] + "…"
