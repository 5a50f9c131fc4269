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


class CredentialsError(GitHubError):
    """Our own credentials could not be had, or GitHub refused them.

    Always worth a re-send: a reinstalled App, a clock put right or a renewed token makes the same
    report go through, so a delivery that failed this way stays in the outbox.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message, status, transient=True)
