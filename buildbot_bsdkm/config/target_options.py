"""Each target's own keys in ``bsdkm.yml``, read into the dataclass the target declares.

``targets.<name>`` holds the keys every target takes (``COMMON``), which the core reads, and the
target's own: the ``option`` fields of its ``options_type``. A target may also own a top-level
section, a ``section`` field of its options (``freebsd:`` is ``freebsd-kmod-qemu``'s). Both are read
when the config loads, through the same reader as the rest of the file, so a bad option names its
file and line before anything is fetched.

An options dataclass whose keys depend on one another, or that holds paths (relative to the
file's directory), says so in a classmethod ``from_yaml(values, keys, base)``: ``values`` as each
key's kind read them, ``keys`` the keys as written (their lines), ``base`` the file's directory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..support.yaml_reader import At
from ..support.yaml_schema import (
    STRING,
    STRINGS,
    Schema,
    Section,
    fields_section,
    nullable,
    read_fields,
    section_fields,
)
from ..targets import Registered, TargetPluginError

# The keys of ``targets.<name>`` every target takes; the core reads them (``TargetConfig``).
COMMON = Section({
    "flags": STRINGS,  # configure flags every variant gets on this target
    "make_args": STRINGS,
    "bench_cflags": STRINGS,  # the target's own benchmark CFLAGS (shorter work under TCG)
    "bench_skipped": STRING,  # what those CFLAGS leave out, said in the reports
})


@dataclass(frozen=True)
class NoOptions:
    """The options of a target that has none of its own."""


def target_keys(options_type: type[Any]) -> Section:
    """The keys ``targets.<name>`` takes for a target with these options: the common ones, then its own."""
    own = fields_section(options_type).fields
    return Section({**COMMON.fields, **own})


def target_schema(options_type: type[Any]) -> Schema:
    """``targets.<name>``'s JSON Schema (null: the target with every default)."""
    return nullable(target_keys(options_type).schema())


def owned_sections(targets: Mapping[str, Registered],
                   core: Iterable[str]) -> dict[str, tuple[str, type[Any]]]:
    """Top-level keys that targets own: each key's target and the dataclass its section is read into.

    A target may not take a key of the core's (``core``) or another target's.
    """
    taken = set(core)
    out: dict[str, tuple[str, type[Any]]] = {}
    for name, target in targets.items():
        for key, options_type in section_fields(target.options_type).items():
            if key in taken or key in out:
                owner = out[key][0] if key in out else "bsdkm.yml itself"
                raise TargetPluginError(f"target {name}: its section {key!r} is {owner}'s already")
            out[key] = (name, options_type)
    return out


def read_options(options_type: type[Any], keys: dict[str, At], base: Path,
                 sections: Mapping[str, At] | None = None) -> Any:
    """``options_type`` from the keys as written (``keys``) and the top-level ``sections`` it owns."""
    values = read_fields(options_type, keys)
    for key, section_type in section_fields(options_type).items():
        at = (sections or {}).get(key)
        values[key] = section_type() if at is None or at.is_null() else read_section(section_type, at, base)
    build = getattr(options_type, "from_yaml", None)
    return build(values, keys, base) if build is not None else options_type(**values)


def read_section(options_type: type[Any], at: At, base: Path) -> Any:
    """A whole section (a mapping of ``option`` keys) read into ``options_type``."""
    return read_options(options_type, fields_section(options_type).mapping(at), base)
