"""The token protocol: what the GitHub client and the credentials it speaks with ask of each other.

The client (``client.py``) asks a ``TokenSource`` for the Authorization header before every attempt.
A source that has to call GitHub to get one (a GitHub App's installation tokens, ``app_auth.py``)
calls it back through the small ``ApiCaller`` side of the client. Both sides import this module and
neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .auth_health import AuthHealth


@dataclass(frozen=True)
class ApiResponse:
    status: int
    data: Any
    headers: dict[str, str]


class ApiCaller(Protocol):
    """What a token source may call on the client: one API call, with or without our credentials."""

    async def request(self, method: str, path: str, body: Any = None, *, idempotent: bool = True,
                      authorization: str | None = None, quiet: bool = False) -> ApiResponse:
        """``authorization``: this header instead of the token's (the App's JWT, for its own calls)."""
        ...


class TokenSource(Protocol):
    """What the client asks for the Authorization header, and whom it is."""

    refreshable: bool
    health: AuthHealth  # whether GitHub takes these credentials (one notice per change)

    async def authorization(self, client: ApiCaller) -> str:
        """The Authorization header; ``errors.CredentialsError`` when it cannot be had."""
        ...

    def refused(self, authorization: str) -> None: ...

    async def login(self, client: ApiCaller) -> str | None: ...

    def secrets(self) -> tuple[str, ...]: ...


class SecretSource(Protocol):
    """Where a ``{secret: NAME}`` of ``bsdkm.yml`` is read at run time (the master's secretsProviders,
    ``master_secrets.MasterSecrets``); ``errors.CredentialsError`` when none gives it."""

    async def get(self, name: str) -> str: ...
