"""``{secret: NAME}`` in ``bsdkm.yml``'s ``github:`` section, read through the master's own
``secretsProviders``: Buildbot's secret machinery, so ``SecretInAFile`` (the master's ``secrets/``),
``HashiCorpVaultKvSecretProvider``, ``SecretInPass`` or any provider the admin adds to
``master.cfg`` gives the token, the webhook secret and the App's key.

Providers run only inside the master, so a value is asked for when it is first needed, not when
the configuration loads: a name no provider gives is a ``CredentialsError`` then (the report is
kept, and ``AuthHealth`` says once that GitHub auth is failing), and the master's log names it at
start (``PullRequestBuilds.startService``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .request_errors import CredentialsError


@dataclass(frozen=True)
class SecretRef:
    """``{secret: NAME}``: a value only the master's secrets providers hold."""

    name: str

    def renderable(self) -> Any:
        """Buildbot's ``util.Secret``, for what takes a renderable (the change hook's secret)."""
        from buildbot.process.properties import Secret

        return Secret(self.name)


class MasterSecrets:
    """The running master's secrets providers (``tokens.SecretSource``); bound at service start."""

    def __init__(self) -> None:
        self.master: Any = None

    def bind(self, master: Any) -> None:
        self.master = master

    async def get(self, name: str) -> str:
        if self.master is None:
            raise CredentialsError(f"secret {name!r}: the master's secrets providers are not running yet")
        from buildbot.process.properties import Properties, Secret

        props = Properties()
        props.master = self.master
        try:
            value = await props.render(Secret(name))
        except KeyError:
            raise CredentialsError(f"secret {name!r} is given by none of the master's secretsProviders "
                                   "(a master made by `bsdkm-ci init master`: the file secrets/"
                                   f"{name}, mode 0600)") from None
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        if not text.strip():
            raise CredentialsError(f"secret {name!r} is empty")
        return text
