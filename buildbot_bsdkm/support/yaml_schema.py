"""What a YAML section accepts, said once: its keys and each key's kind of value, read and described.

A loader reads a section through its ``Section``: the allowed keys, and each value through its
``Kind``'s reader (``yaml_reader.At``). The same table is the section's JSON Schema (``schema()``),
which ``bsdkm-ci schema`` ships for editors, so an editor checking a file and the loader reading it
agree on the keys and their values. What the schema cannot say (one key's value against another's)
stays in the loader, which has the last word.

A dataclass can be such a table too: each field made with ``option(kind, default)`` is a key of its
own name (``fields_section``), so a target declares its options once, as the type its code reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .yaml_reader import At, opt

Schema = dict[str, Any]
NULL: Schema = {"type": "null"}


def nullable(schema: Schema) -> Schema:
    """``schema`` or null: an optional key given as null is read as absent (``opt``)."""
    return {"anyOf": [schema, NULL]} if schema else schema


@dataclass(frozen=True)
class Kind:
    """One key's value: its JSON Schema and its reader (None: the section is plain data a shell reads).

    ``null``: null may stand for the value (the loader reads it as absent, ``opt``).
    """

    schema: Schema
    read: Callable[[At], Any] | None = None
    null: bool = True

    def given(self) -> Kind:
        """This kind where null is no value: the loader reads the key whenever it is there."""
        return Kind(self.schema, self.read, null=False)


@dataclass(frozen=True)
class Section:
    """A mapping's keys, in the order errors list them, each with its ``Kind``.

    ``required``: keys it must have. ``names``: a mapping whose keys are names the user chooses
    (``variants:``), each value of kind ``each``; its keys then match ``names`` (a JSON Schema
    pattern) or are one of ``choices``.
    """

    fields: Mapping[str, Kind] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    more: bool = False  # keys beyond ``fields`` are allowed (a target's own options)
    each: Kind | None = None
    names: str | None = None
    choices: tuple[str, ...] = ()
    extra: Schema = field(default_factory=dict)  # what else the schema says (one of two keys, ...)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.fields)

    def mapping(self, at: At) -> dict[str, At]:
        """The section's keys as written; an unknown one is an error listing the allowed ones."""
        return at.mapping(None if self.more or self.each is not None else self.keys)

    def get(self, m: dict[str, At], key: str, default: Any) -> Any:
        """The value of ``key`` read by its kind, or ``default`` when absent or null."""
        read = self.fields[key].read
        if read is None:
            raise TypeError(f"{key}: a plain-data key has no reader")
        return opt(m, key, read, default)

    def kind(self, read: Callable[[At], Any] | None = None, null: bool = False) -> Kind:
        """This section as the value of a key of another, read by ``read``."""
        return Kind(self.schema(), read, null)

    def schema(self) -> Schema:
        out: Schema = {"type": "object"}
        if self.fields:
            out["properties"] = {k: (nullable(v.schema) if v.null and k not in self.required else v.schema)
                                 for k, v in self.fields.items()}
        if self.required:
            out["required"] = list(self.required)
        if self.each is not None:
            out["additionalProperties"] = self.each.schema
            if self.names is not None:
                out["propertyNames"] = {"pattern": self.names}
            elif self.choices:
                out["propertyNames"] = {"enum": list(self.choices)}
        elif not self.more:
            out["additionalProperties"] = False
        return {**out, **self.extra}


# --------------------------------------------------------------------------- kinds of values

STRING = Kind({"type": "string", "pattern": r"\S"}, At.string)  # not empty, not only spaces
BOOLEAN = Kind({"type": "boolean"}, At.boolean)
MEBIBYTES = Kind({"type": "number", "exclusiveMinimum": 0}, At.mebibytes)
# A list of strings, or one string of whitespace-separated words (``flags: --a --b``).
_WORD: Schema = {"type": "string", "pattern": r"\S"}
STRINGS = Kind({"anyOf": [_WORD, {"type": "array", "items": _WORD}]}, At.strings)
# One name, or a list of names; a lone string stays whole.
NAMES = Kind({"anyOf": [_WORD, {"type": "array", "items": _WORD}]}, At.names)
# The plain data of a mapping, for a section its shell checks (``github:``, ``www:``).
MAPPING = Kind({"type": "object"}, At.located)


def integer(minimum: int = 0, maximum: int | None = None,
            read: Callable[[At], Any] | None = None) -> Kind:
    schema: Schema = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        schema["maximum"] = maximum
    return Kind(schema, read or (lambda at: at.integer(minimum=minimum)))


def number(minimum: float = 0.0, positive: bool = False) -> Kind:
    schema: Schema = {"type": "number", ("exclusiveMinimum" if positive else "minimum"): minimum}
    return Kind(schema, lambda at: at.number(minimum=minimum, positive=positive))


def choice(values: Iterable[str]) -> Kind:
    allowed = tuple(values)
    return Kind({"enum": list(allowed)}, lambda at: at.choice(allowed))


def string(read: Callable[[At], Any], pattern: str = r"\S") -> Kind:
    """A string read by ``read`` (a path, a URL, an address), whose form ``pattern`` says."""
    return Kind({"type": "string", "pattern": pattern}, read)


def one_of(*schemas: Schema, read: Callable[[At], Any] | None = None) -> Kind:
    return Kind({"anyOf": list(schemas)}, read)


# --------------------------------------------------------------------------- dataclasses as sections

KIND = "yaml_kind"  # a dataclass field's metadata: the kind of the YAML key of its name
SECTION = "yaml_section"  # a field read from a section of its own name (its type: a dataclass of options)


def option(kind: Kind, default: Any = None) -> Any:
    """A dataclass field read from the key of its own name by ``kind``; absent or null: ``default``."""
    return field(default=default, metadata={KIND: kind})


def section(options_type: type[Any]) -> Any:
    """A dataclass field holding a whole section, itself a dataclass of ``option`` fields."""
    return field(default_factory=options_type, metadata={SECTION: options_type})


def fields_section(options_type: type[Any], **more: Any) -> Section:
    """The keys a dataclass's ``option`` fields make, in field order (``more``: other Section settings)."""
    kinds = {f.name: f.metadata[KIND] for f in dataclasses.fields(options_type) if KIND in f.metadata}
    return Section(kinds, **more)


def section_fields(options_type: type[Any]) -> dict[str, type[Any]]:
    """The fields made with ``section``: the section's name, and its dataclass."""
    return {f.name: f.metadata[SECTION] for f in dataclasses.fields(options_type) if SECTION in f.metadata}


def read_fields(options_type: type[Any], m: dict[str, At]) -> dict[str, Any]:
    """Each ``option`` field's value from the keys ``m`` (as ``Section.mapping`` gave them), by its kind."""
    table = fields_section(options_type)
    defaults = {f.name: f.default for f in dataclasses.fields(options_type) if KIND in f.metadata}
    return {name: table.get(m, name, defaults[name]) for name in table.keys}
