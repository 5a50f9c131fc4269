"""``bsdkm.yml``'s ``workers:`` block → typed ``WorkerSpec``\\ s, and which worker can run which target.

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

A worker runs ``userspace`` anywhere; ``freebsd-kmod`` needs a ``freebsd-*`` tag, the QEMU targets
a ``linux-qemu`` tag (each target's ``worker_tag``, ``targets.py``), unless ``targets:`` lists them
explicitly.
Pure (the core): the Buildbot shell (``buildbot/worker_passwords.py``, ``master_config.py``) turns the specs
into workers. Errors are ``file:line: workers.<name>...: problem`` when the block came from a file
(``config.py`` keeps it as a ``LocatedDict``), ``workers.<name>...: problem`` for plain data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..support.yaml_reader import LocatedError, located
from ..support.yaml_schema import NAMES, STRING, Kind, Section
from ..targets import get as target_row

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# What a worker's entry holds (read here as plain data; the table is its JSON Schema too).
_PASSWORD = Kind({"type": "object", "properties": {"secret": STRING.schema, "env": STRING.schema},
                  "additionalProperties": False, "minProperties": 1, "maxProperties": 1}, null=False)
WORKER = Section({"password": _PASSWORD, "tags": NAMES.given(), "targets": NAMES.given(),
                  "max_builds": Kind({"type": "integer", "minimum": 1}, null=False),
                  "properties": Kind({"type": "object"})}, required=("password",))
WORKER_KEYS = WORKER.keys
WORKERS = Section(each=WORKER.kind(), names=NAME_RE.pattern)


class WorkerConfigError(LocatedError):
    """``workers:`` cannot be used; the message names the dotted key (and the line, from a file)."""

    def __init__(self, file: str, line: int | None = None, key: str = "", problem: str | None = None) -> None:
        if problem is None:  # the one-line form: WorkerConfigError("workers.x: what is wrong")
            key, _, problem = file.partition(": ")
            file = ""
        super().__init__(file, line, key, problem)


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
        facts = target_row(target)
        return facts is None or facts.runs_on(self.tags)  # the tag its row asks for (QEMU, FreeBSD)


class _Block:
    """The ``workers:`` data with where it came from, so each error can name its line."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def error(self, key: str, problem: str, *, at: str | None = None) -> WorkerConfigError:
        """The error about ``key``, at the line of ``at`` (a key under it) or of ``key`` itself."""
        file, line = located(self.data, at or key)
        return WorkerConfigError(file, line, key, problem)


def _password(block: _Block, key: str, raw: Any) -> PasswordRef:
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((kind, name),) = raw.items()
        if kind in ("secret", "env") and isinstance(name, str) and name.strip():
            return PasswordRef(kind, name.strip())
    raise block.error(f"{key}.password", "expected {secret: NAME} or {env: VARIABLE} (a literal password "
                      "does not belong in bsdkm.yml)")


def _strings(block: _Block, key: str, raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = raw.split()
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise block.error(key, f"expected a list of names, got {raw!r}")
    return tuple(raw)


def _worker(block: _Block, name: Any, raw: Any) -> WorkerSpec:
    key = f"workers.{name}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise block.error(key, "worker names are letters, digits, '.', '_' and '-'")
    if not isinstance(raw, Mapping):
        raise block.error(key, f"expected a mapping with password/tags, got {raw!r}")
    unknown = sorted(set(raw) - set(WORKER_KEYS))
    if unknown:
        raise block.error(key, f"unknown key(s) {', '.join(map(str, unknown))} (allowed: "
                          f"{', '.join(WORKER_KEYS)})", at=f"{key}.{unknown[0]}")
    if "password" not in raw:
        raise block.error(key, "missing key 'password'")
    max_builds = raw.get("max_builds", 1)
    if isinstance(max_builds, bool) or not isinstance(max_builds, int) or max_builds < 1:
        raise block.error(f"{key}.max_builds", f"expected a positive integer, got {max_builds!r}")
    props = raw.get("properties")
    if props is not None and not isinstance(props, Mapping):
        raise block.error(f"{key}.properties", f"expected a mapping, got {props!r}")
    return WorkerSpec(
        name=name,
        password=_password(block, key, raw["password"]),
        tags=_strings(block, f"{key}.tags", raw.get("tags", [])),
        targets=_strings(block, f"{key}.targets", raw["targets"]) if "targets" in raw else None,
        max_builds=max_builds,
        properties=dict(props) if props else None,
    )


def parse_worker(name: Any, raw: Any) -> WorkerSpec:
    """One entry of ``workers:`` (plain data: errors name the key, not a line)."""
    return _worker(_Block(None), name, raw)


def parse_workers(block: Any) -> list[WorkerSpec]:
    """The ``workers:`` mapping (``Config.workers``) → specs, in file order."""
    if block is None:
        return []
    where = _Block(block)
    if not isinstance(block, Mapping):
        raise where.error("workers", f"expected a mapping of worker name to settings, got {block!r}")
    return [_worker(where, name, raw) for name, raw in block.items()]
