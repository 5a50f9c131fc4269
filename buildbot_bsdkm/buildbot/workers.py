"""``bsdkm.yml``'s ``workers:`` block, validated, and which worker can run which target.

```yaml
workers:
  fbsd143:
    password: {secret: fbsd143-password}   # or {env: VAR}; never a literal in a shared file
    tags: [freebsd-14.3-amd64]
    max_builds: 1
  qemu1:
    password: {env: BSDKM_QEMU1_PASSWORD}
    tags: [linux-qemu]
```

A worker runs ``userspace`` anywhere; ``freebsd-kmod`` needs a ``freebsd-*`` tag,
``linux-kmod-qemu`` a ``linux-qemu`` tag, unless ``targets:`` lists them explicitly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

WORKER_KEYS = ("password", "tags", "targets", "max_builds", "properties")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class WorkerConfigError(ValueError):
    """``workers:`` cannot be used; the message names the dotted key."""


@dataclass(frozen=True)
class PasswordRef:
    """Where a worker's password comes from; the value itself is never kept in the config."""

    kind: str  # "secret" | "env"
    name: str

    def describe(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    password: PasswordRef
    tags: tuple[str, ...] = ()
    targets: tuple[str, ...] | None = None  # None: derived from tags
    max_builds: int = 1
    properties: Mapping[str, Any] | None = None

    def can_run(self, target: str) -> bool:
        if self.targets is not None:
            return target in self.targets
        if target == "freebsd-kmod":
            return any(t.startswith("freebsd-") for t in self.tags)
        if target in ("linux-kmod-qemu", "freebsd-kmod-qemu"):  # both boot QEMU on a Linux worker
            return "linux-qemu" in self.tags
        return True


def _password(key: str, raw: Any) -> PasswordRef:
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((kind, name),) = raw.items()
        if kind in ("secret", "env") and isinstance(name, str) and name.strip():
            return PasswordRef(kind, name.strip())
    raise WorkerConfigError(
        f"{key}.password: expected {{secret: NAME}} or {{env: VARIABLE}} (a literal password does not "
        "belong in bsdkm.yml)"
    )


def _strings(key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = raw.split()
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise WorkerConfigError(f"{key}: expected a list of names, got {raw!r}")
    return tuple(raw)


def parse_worker(name: Any, raw: Any) -> WorkerSpec:
    key = f"workers.{name}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise WorkerConfigError(f"{key}: worker names are letters, digits, '.', '_' and '-'")
    if not isinstance(raw, Mapping):
        raise WorkerConfigError(f"{key}: expected a mapping with password/tags, got {raw!r}")
    unknown = sorted(set(raw) - set(WORKER_KEYS))
    if unknown:
        raise WorkerConfigError(f"{key}: unknown key(s) {', '.join(map(str, unknown))} "
                                f"(allowed: {', '.join(WORKER_KEYS)})")
    if "password" not in raw:
        raise WorkerConfigError(f"{key}: missing key 'password'")
    max_builds = raw.get("max_builds", 1)
    if isinstance(max_builds, bool) or not isinstance(max_builds, int) or max_builds < 1:
        raise WorkerConfigError(f"{key}.max_builds: expected a positive integer, got {max_builds!r}")
    props = raw.get("properties")
    if props is not None and not isinstance(props, Mapping):
        raise WorkerConfigError(f"{key}.properties: expected a mapping, got {props!r}")
    return WorkerSpec(
        name=name,
        password=_password(key, raw["password"]),
        tags=_strings(f"{key}.tags", raw.get("tags", [])),
        targets=_strings(f"{key}.targets", raw["targets"]) if "targets" in raw else None,
        max_builds=max_builds,
        properties=dict(props) if props else None,
    )


def parse_workers(block: Any) -> list[WorkerSpec]:
    """The ``workers:`` mapping → specs, in file order."""
    if block is None:
        return []
    if not isinstance(block, Mapping):
        raise WorkerConfigError(f"workers: expected a mapping of worker name to settings, got {block!r}")
    return [parse_worker(name, raw) for name, raw in block.items()]


def resolve_env_password(ref: PasswordRef, environ: Mapping[str, str] | None = None) -> str:
    """The password behind an ``env:`` reference; the error names the variable, never a value."""
    env = os.environ if environ is None else environ
    value = env.get(ref.name, "")
    if not value:
        raise WorkerConfigError(f"worker password: environment variable {ref.name} is not set or empty")
    return value
