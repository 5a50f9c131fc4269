"""``{secret: NAME}`` read through the master's own secrets manager (Buildbot's ``Secret``)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest
from buildbot.secrets.secret import SecretDetails
from twisted.internet import defer
from twisted.python import log

from buildbot_bsdkm.github.hook import BsdkmGitHubEventHandler, WebhookSecretUnavailable
from buildbot_bsdkm.github.master_secrets import MasterSecrets, SecretRef
from buildbot_bsdkm.github.request_errors import CredentialsError


class Manager:
    """What ``master.namedServices['secrets']`` answers: the providers' value, or None."""

    def __init__(self, **values: str) -> None:
        self.values = values

    def get(self, name: str) -> defer.Deferred[SecretDetails | None]:
        value = self.values.get(name)
        return defer.succeed(SecretDetails("SecretInAFile", name, value) if value is not None else None)


def master(**values: str) -> Any:
    return SimpleNamespace(namedServices={"secrets": Manager(**values)})


def _run(coro: Any) -> Any:
    got: list[Any] = []
    defer.ensureDeferred(coro).addBoth(got.append)
    if hasattr(got[0], "raiseException"):
        got[0].raiseException()
    return got[0]


def test_a_secret_is_read_through_the_masters_providers() -> None:
    secrets = MasterSecrets()
    with pytest.raises(CredentialsError, match="not running yet"):
        _run(secrets.get("gh-token"))
    secrets.bind(master(**{"gh-token": "ghp_x"}))
    assert _run(secrets.get("gh-token")) == "ghp_x"
    with pytest.raises(CredentialsError, match=r"'other' is given by none of the master's secretsProviders"):
        _run(secrets.get("other"))
    secrets.bind(master(**{"gh-token": "  "}))
    with pytest.raises(CredentialsError, match="is empty"):
        _run(secrets.get("gh-token"))


def test_a_webhook_secret_no_provider_gives_is_a_500_with_one_clear_line() -> None:
    handler = BsdkmGitHubEventHandler(SecretRef("github-webhook").renderable(), True,
                                      controller=SimpleNamespace())
    handler.master = master()
    lines: list[str] = []
    observer = lines.append
    log.addObserver(observer)
    try:
        request = SimpleNamespace(content=io.BytesIO(b"{}"), getHeader=lambda name: None)
        got: list[Any] = []
        handler.process(request).addBoth(got.append)
    finally:
        log.removeObserver(observer)
    assert got[0].check(WebhookSecretUnavailable) and not got[0].check(ValueError)  # 500, not 400
    text = " ".join(" ".join(map(str, e.get("message", ()))) for e in lines)
    assert "github.webhook_secret: secret key github-webhook is not found in any provider" in text
