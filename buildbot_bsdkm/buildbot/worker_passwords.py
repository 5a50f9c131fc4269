"""The Buildbot side of ``bsdkm.yml``'s ``workers:`` block: the password behind an ``env:`` reference.

The block itself is read by the core (``buildbot_bsdkm/config/workers.py``: ``WorkerSpec``,
``parse_workers``, errors naming ``file:line``); its names are re-exported here for the shell.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..config.workers import (
    NAME_RE,
    WORKER_KEYS,
    PasswordRef,
    WorkerConfigError,
    WorkerSpec,
    parse_worker,
    parse_workers,
)

__all__ = ["NAME_RE", "WORKER_KEYS", "PasswordRef", "WorkerConfigError", "WorkerSpec", "parse_worker",
           "parse_workers", "resolve_env_password"]


def resolve_env_password(ref: PasswordRef, environ: Mapping[str, str] | None = None) -> str:
    """The password behind an ``env:`` reference; the error names the variable, never a value."""
    env = os.environ if environ is None else environ
    value = env.get(ref.name, "")
    if not value:
        raise WorkerConfigError("", None, "worker password",
                                f"environment variable {ref.name} is not set or empty")
    return value
