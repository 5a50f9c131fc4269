"""The keys ``bsdkm.yml`` and policy files accept, drawn from the loaders themselves.

No list is kept by hand: every loader section reads its mapping through
``yaml_reader.At.mapping(allowed)``, so recording those calls while the real loader reads probe
documents shows what it accepts. The probe starts from a minimal valid document and sets each key
it has seen allowed to an empty mapping, a one-item list of one, or a name of a free-form mapping
(``variants.<name>``), until nothing new is found. A key another helper adds to a loader is found
the same way, without touching this file.

The sections a shell validates (``workers:``, ``github:``, ``www:``) are plain data for the loader;
their keys come from the registries those shells check against.

A reference page documents a key as a MyST definition-list term: a line holding only the dotted
key in backticks (``variants.<name>.flags``, ``regressions[].max_pct``), followed by ``: text``.
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from buildbot_bsdkm.support import yaml_reader

Path_ = tuple[str | int, ...]
FREE = None  # a mapping whose keys are names the user chooses

# Names tried under a free-form mapping: each real target (targets: and kernel.targets: want one; each
# target has keys of its own) and a plain one (variants).
def _name_candidates() -> tuple[str, ...]:
    from buildbot_bsdkm.targets import names

    return (*names(), "v")


_MAX_DEPTH = 6
_TERM = re.compile(r"^`([^`\s]+)`\s*$")


def _parse_key(raw: str) -> Path_:
    out: list[str | int] = []
    for part in raw.split("."):
        m = re.fullmatch(r"([^\[]*)((?:\[\d+\])*)", part)
        name, idx = (m.group(1), m.group(2)) if m else (part, "")
        if name:
            out.append(name)
        out.extend(int(i) for i in re.findall(r"\[(\d+)\]", idx))
    return tuple(out)


class KeyTree:
    """Normalised paths (``variants.<name>``, ``regressions[]``) → allowed keys, or FREE."""

    def __init__(self) -> None:
        self.sections: dict[str, tuple[str, ...] | None] = {}

    def normalise(self, path: Path_) -> str:
        out = ""
        for seg in path:
            if isinstance(seg, int):
                out += "[]"
            elif out in self.sections and self.sections[out] is FREE:
                out = f"{out}.<name>" if out else "<name>"
            else:
                out = f"{out}.{seg}" if out else seg
        return out

    def record(self, path: Path_, allowed: tuple[str, ...] | None) -> bool:
        key = self.normalise(path)
        old = self.sections.get(key, "missing")
        if old == "missing":
            self.sections[key] = allowed
            return True
        if old is not None and allowed is not None and set(allowed) - set(old):
            self.sections[key] = tuple(dict.fromkeys((*old, *allowed)))
            return True
        return False

    def required(self) -> set[str]:
        """Every accepted key, dotted: what a reference page must document."""
        return {f"{section}.{k}" if section else k
                for section, allowed in self.sections.items() if allowed is not None for k in allowed}

    def accepts(self, key: str) -> bool:
        """True when the loader takes ``key`` (as a page writes it: ``<...>`` for a chosen name)."""
        prefix = ""
        for part in re.findall(r"\[\]|[^.\[\]]+", key):
            if part == "[]":
                prefix += "[]"
                continue
            allowed = self.sections.get(prefix, "missing")
            if allowed == "missing":
                return False
            if allowed is FREE:
                prefix = f"{prefix}.<name>" if prefix else "<name>"
            elif part in allowed:
                prefix = f"{prefix}.{part}" if prefix else part
            else:
                return False
        return True


def _set(doc: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node: Any = doc
    for i, seg in enumerate(path):
        last = i == len(path) - 1
        nxt = path[i + 1] if not last else None
        if isinstance(seg, int):
            while len(node) <= seg:
                node.append({})
            if last:
                node[seg] = value
            elif not isinstance(node[seg], dict | list):
                node[seg] = [] if isinstance(nxt, int) else {}
            node = node[seg]
        else:
            if last:
                node[seg] = value
            elif not isinstance(node.get(seg), dict | list):
                node[seg] = [] if isinstance(nxt, int) else {}
            node = node[seg]
    return doc


def probe(load: Callable[[str], Any], base: dict[str, Any]) -> KeyTree:
    """Every mapping ``load`` reads with ``At.mapping``, found by growing ``base`` key by key."""
    tree = KeyTree()
    seen_raw: dict[Path_, tuple[str, ...] | None] = {}
    original = yaml_reader.At.mapping

    def recording(self: yaml_reader.At, allowed: Iterable[str] | None = None) -> dict[str, Any]:
        known = tuple(allowed) if allowed is not None else None
        path = _parse_key(self.key) if self.key else ()
        seen_raw.setdefault(path, known)
        tree.record(path, known)
        return original(self, known)

    def attempt(doc: dict[str, Any]) -> None:
        # A probe document is meant to be refused partway: what was read before the refusal counts.
        with contextlib.suppress(Exception):
            load(yaml.safe_dump(doc, sort_keys=False))

    yaml_reader.At.mapping = recording  # type: ignore[method-assign]
    try:
        attempt(base)
        done: set[Path_] = set()
        while True:
            todo = [p for p in seen_raw if p not in done and len(p) < _MAX_DEPTH]
            if not todo:
                break
            for path in todo:
                done.add(path)
                allowed = seen_raw[path]
                if allowed is FREE and path[:-1] in seen_raw and seen_raw[path[:-1]] is FREE:
                    continue  # plain data under plain data: nothing more to find
                children = allowed if allowed is not None else _name_candidates()
                for k in children:
                    for shape in ({}, [{}], None):
                        attempt(_set(base, (*path, k), copy.deepcopy(shape)))
    finally:
        yaml_reader.At.mapping = original  # type: ignore[method-assign]
    return tree


def config_tree() -> KeyTree:
    from buildbot_bsdkm.buildbot import www_security
    from buildbot_bsdkm.config import bsdkm_yml as config
    from buildbot_bsdkm.config import workers as worker_config
    from buildbot_bsdkm.github import settings

    base = {"targets": {"userspace": None}, "variants": {"v": {"targets": ["userspace"]}}}
    tree = probe(lambda text: config.parse_config(text, "probe.yml", Path("/nonexistent")), base)
    # Sections the loader keeps as plain data: their shells' registries say what they accept.
    tree.sections["workers"] = FREE
    tree.sections["workers.<name>"] = tuple(worker_config.WORKER_KEYS)
    tree.sections["github"] = tuple(sorted(settings.KNOWN_KEYS))
    tree.sections["www"] = tuple(sorted(www_security.KNOWN_KEYS))
    for key in [k for k in tree.sections if k.startswith(("workers.<name>.", "github.", "www."))]:
        del tree.sections[key]
    return tree


def policy_tree() -> KeyTree:
    from buildbot_bsdkm.policy import rules

    return probe(lambda text: rules.parse_policy(text, "probe.yml"), {})


def documented(text: str) -> set[str]:
    """The keys a reference page documents (definition-list terms holding one backticked key)."""
    lines = text.splitlines()
    out = set()
    for i, line in enumerate(lines[:-1]):
        m = _TERM.match(line)
        if m and lines[i + 1].startswith(": "):
            out.add(m.group(1))
    return out


def drift(tree: KeyTree, text: str) -> tuple[list[str], list[str]]:
    """(accepted keys the page lacks, keys the page names that the loader refuses)."""
    doc = documented(text)
    missing = sorted(tree.required() - doc)
    refused = sorted(k for k in doc if not tree.accepts(k))
    return missing, refused
