"""The errors of a GitHub request, shared by the client and the token sources it asks."""

from __future__ import annotations


class GitHubError(Exception):
    """A request that did not succeed; ``transient`` says a later re-send may work."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


class Superseded(GitHubError):
    """Retrying stopped because a newer report for the same slot is waiting."""

    def __init__(self, message: str) -> None:
        super().__init__(message, None, transient=False)
