"""The JSON Schema of ``bsdkm.yml``, drawn from the tables the loader reads it with (``CONFIG``, and
each registered target's options: its keys under ``targets.<name>`` and the section it owns).

Editors check a ``bsdkm.yml`` against it (``# yaml-language-server: $schema=...``). The package
ships it (``bsdkm-ci schema`` writes it out); ``scripts/config_schema.py`` makes the shipped file
from here, adding the keys of the sections a shell checks (``github:``, ``www:``) and each key's
words from the configuration reference, and the suite checks the file is what it makes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..support.yaml_schema import Schema, fields_section
from ..targets import registered
from .bsdkm_yml import CONFIG
from .target_options import owned_sections, target_schema

DIALECT = "http://json-schema.org/draft-07/schema#"  # what yaml-language-server and most editors read
SCHEMA_ID = "https://raw.githubusercontent.com/wolfSSL/bsdkm-ci/v1/bsdkm.schema.json"
SCHEMA_FILE = "bsdkm.schema.json"
NAME = "<name>"  # a key the user names (``variants.<name>.flags``), as the reference writes it


def _object(schema: Schema) -> Schema:
    """The object schema itself, where ``schema`` may be it or null (``anyOf``)."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "object":
            return branch  # type: ignore[no-any-return]
    raise ValueError(f"not an object schema: {schema}")


def _documented(path: str, descriptions: Mapping[str, str]) -> str:
    """The reference's key for ``path``: a target's key is written once for all (``targets.<name>.cpu``)."""
    head, _, rest = path.partition(".")
    name, _, key = rest.partition(".")
    if path not in descriptions and head == "targets" and name and key:
        return f"{head}.{NAME}.{key}"
    return path


def _describe(schema: Any, path: str, descriptions: Mapping[str, str]) -> None:
    if not isinstance(schema, dict):
        return
    term = _documented(path, descriptions)
    if term in descriptions:
        schema["description"] = descriptions[term]
    for branch in schema.get("anyOf", []):
        _describe(branch, path, {k: v for k, v in descriptions.items() if k != term})
    for key, sub in schema.get("properties", {}).items():
        _describe(sub, f"{path}.{key}" if path else key, descriptions)
    if isinstance(schema.get("additionalProperties"), dict):
        _describe(schema["additionalProperties"], f"{path}.{NAME}" if path else NAME, descriptions)


def config_schema(shell_keys: Mapping[str, Iterable[str]] | None = None,
                  descriptions: Mapping[str, str] | None = None) -> Schema:
    """``bsdkm.yml``'s schema: ``shell_keys`` the keys each shell-checked section accepts,
    ``descriptions`` the words for each dotted key (``variants.<name>.flags``)."""
    known = registered()
    body = CONFIG.schema()
    each = {name: target_schema(t.options_type) for name, t in known.items()}
    body["properties"]["targets"] = {"type": "object", "properties": each, "additionalProperties": False}
    for key, (_, options_type) in owned_sections(known, CONFIG.keys).items():
        body["properties"][key] = fields_section(options_type).schema()
    body = json.loads(json.dumps(body))  # every part its own: kinds share their dicts
    for section, keys in (shell_keys or {}).items():
        _object(body["properties"][section])["propertyNames"] = {"enum": sorted(keys)}
    _describe(body, "", descriptions or {})
    return {"$schema": DIALECT, "$id": SCHEMA_ID, "title": "bsdkm.yml",
            "description": "bsdkm-ci's configuration: what to build, where to run it, how to judge it.",
            **body}


def fragment_schema(schema: Schema) -> Schema:
    """``schema`` for a part of a ``bsdkm.yml`` (some of its sections, as a page shows them)."""
    part = copy.deepcopy(schema)
    part.pop("required", None)
    return part
