"""The one YAML reader of the core: nodes walked with their file, line and dotted key.

``bsdkm.yml`` (``config.py``) and policy files (``policy/rules.py``) are read through it, so both
word a problem the same way and every error is ``file:line: key: problem``: the person reading it
is usually looking at a CI log, not at the file. Wording: ``must be <what>, not <what was given>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

T = TypeVar("T")
_constructor = SafeConstructor()


class LocatedError(ValueError):
    """A document that cannot be used; ``str()`` is ``file:line: key: problem``.

    Subclasses name their kind of document: ``TOP`` is how the key of the whole document is shown
    (empty: ``file:line: problem``, no key), ``FILE_KEY``/``NOT_FOUND`` the key and wording of a file
    that is not there.
    """

    TOP = ""
    FILE_KEY = ""
    NOT_FOUND = "no such file"

    def __init__(self, file: str, line: int | None, key: str, problem: str) -> None:
        self.file, self.line, self.key, self.problem = file, line, key, problem
        where = f"{file}:{line}: " if file and line is not None else (f"{file}: " if file else "")
        named = key or self.TOP
        super().__init__(f"{where}{named}: {problem}" if named else f"{where}{problem}")

    @property
    def source(self) -> str:
        return self.file


class LocatedDict(dict[str, Any]):
    """A mapping read as plain data that still knows the file and line of each key under it.

    For sections whose checks belong to a shell (``workers:``, ``github:``): the shell gets plain
    data, and its errors still name ``file:line``. ``lines`` maps dotted keys as ``At`` names them
    (``workers.w1.password``) to the line the key was written on.
    """

    def __init__(self, data: Any = (), *, file: str = "", key: str = "",
                 lines: dict[str, int] | None = None) -> None:
        super().__init__(data)
        self.file, self.key, self.lines = file, key, dict(lines or {})

    def line(self, key: str) -> int | None:
        """The line of ``key`` (dotted, from the document's top), else of its nearest parent."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0] if "." in key else ""
        return None


def located(data: Any, key: str) -> tuple[str, int | None]:
    """``(file, line)`` of dotted ``key`` when ``data`` is a ``LocatedDict``; ``("", None)`` otherwise."""
    if isinstance(data, LocatedDict):
        return data.file, data.line(key)
    return "", None


def read_text(path: str | Path, error: type[LocatedError]) -> str:
    """The file's text; ``error`` (no line) when it is missing or unreadable."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(str(p), None, error.FILE_KEY, error.NOT_FOUND) from None
    except (OSError, UnicodeDecodeError) as e:
        raise error(str(p), None, error.FILE_KEY, f"cannot read: {e}") from None


def compose(text: str, source: str, error: type[LocatedError]) -> Node | None:
    """The document's root node (None for an empty document); ``error`` at the line of a syntax error."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else None
        raise error(source, line, "yaml", f"not valid YAML: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise error(source, None, "yaml", f"not valid YAML: {e}") from None


def load_plain(text: str, source: str, error: type[LocatedError]) -> Any:
    """The document as plain Python values (safe types only); ``error`` at the line of a syntax error.

    For a shell that edits a document and writes it back (``dump``) rather than reading settings."""
    root = compose(text, source, error)
    return None if root is None else yaml.SafeLoader("").construct_document(root)


def dump(doc: Any) -> str:
    """``doc`` as YAML text in the order its keys were given (what ``load_plain`` reads back)."""
    return yaml.safe_dump(doc, sort_keys=False)


def node_kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return f"the value {node.value!r}" if node.value != "" else "nothing"


def _show(v: Any) -> str:
    return "nothing" if v is None else repr(v)


class At:
    """A YAML node with the file and dotted key it came from; its readers raise ``error`` at its line."""

    def __init__(self, node: Node, key: str, file: str, error: type[LocatedError],
                 key_node: Node | None = None, top: str = "") -> None:
        self.node, self.key, self.file, self.error_type = node, key, file, error
        self.key_node = key_node  # where the key itself was written, for errors about the name
        self.top = top  # the key errors about the whole document carry

    @classmethod
    def root(cls, node: Node, file: str, error: type[LocatedError], top: str = "") -> At:
        return cls(node, "", file, error, top=top)

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, problem: str) -> LocatedError:
        return self.error_type(self.file, self.line, self.key or self.top, problem)

    def name_error(self, problem: str) -> LocatedError:
        line = self.key_node.start_mark.line + 1 if self.key_node is not None else self.line
        return self.error_type(self.file, line, self.key or self.top, problem)

    def child(self, node: Node, name: str, key_node: Node | None = None) -> At:
        return At(node, f"{self.key}.{name}" if self.key else name, self.file, self.error_type, key_node)

    def _at(self, node: Node, key: str) -> At:
        return At(node, key, self.file, self.error_type, top=self.top)

    def is_null(self) -> bool:
        return isinstance(self.node, ScalarNode) and self.node.tag == "tag:yaml.org,2002:null"

    # -- shapes ---------------------------------------------------------------------------

    def value(self) -> Any:
        """The plain Python value (safe loader: no tags that build objects)."""
        try:
            return _constructor.construct_object(self.node, deep=True)
        except yaml.YAMLError as e:  # e.g. a !!python/object tag the safe loader refuses
            raise self.error(f"unusable value: {getattr(e, 'problem', None) or e}") from None

    def mapping(self, allowed: Iterable[str] | None = None) -> dict[str, At]:
        """Keys (names as written, each once, of ``allowed`` when given) to their values, in file order."""
        if not isinstance(self.node, MappingNode):
            raise self.error(f"must be a mapping, not {node_kind(self.node)}")
        known = tuple(allowed) if allowed is not None else None
        out: dict[str, At] = {}
        for knode, vnode in self.node.value:
            if not isinstance(knode, ScalarNode):
                raise self._at(knode, self.key).error(f"keys must be plain names, not {node_kind(knode)}")
            name = str(knode.value)  # as written: a variant called 2024 or a key "no" is that name
            at = self.child(vnode, name, knode)
            if name in out:
                raise self._at(knode, at.key).error("given twice")
            if known is not None and name not in known:
                raise self._at(knode, at.key).error(f"unknown key (allowed: {', '.join(known)})")
            out[name] = at
        return out

    def sequence(self) -> list[At]:
        """The items of a list, keyed ``key[i]``."""
        if not isinstance(self.node, SequenceNode):
            raise self.error(f"must be a list, not {node_kind(self.node)}")
        return [self._at(item, f"{self.key}[{i}]") for i, item in enumerate(self.node.value)]

    def scalar(self) -> Any:
        if not isinstance(self.node, ScalarNode):
            raise self.error(f"must be a single value, not {node_kind(self.node)}")
        return self.value()

    def require(self, fields: dict[str, At], *names: str) -> None:
        """Every one of ``names`` is among this mapping's ``fields``; else the error is at the mapping."""
        for name in names:
            if name not in fields:
                raise self.error(f"missing key {name!r}")

    def plain(self) -> dict[str, Any]:
        """A mapping as plain data, after its shape and duplicate keys were checked with lines."""
        self.mapping()
        return dict(self.value())

    def located(self) -> LocatedDict:
        """``plain()``, keeping the line of every key under this mapping (``LocatedDict``)."""
        lines: dict[str, int] = {}

        def walk(at: At) -> None:
            if isinstance(at.node, MappingNode):
                for sub in at.mapping().values():
                    lines[sub.key] = sub.key_node.start_mark.line + 1 if sub.key_node else sub.line
                    walk(sub)
            elif isinstance(at.node, SequenceNode):
                for item in at.sequence():
                    lines[item.key] = item.line
                    walk(item)

        data = self.plain()
        walk(self)
        lines.setdefault(self.key, self.line)
        return LocatedDict(data, file=self.file, key=self.key, lines=lines)

    # -- values ---------------------------------------------------------------------------

    def string(self) -> str:
        v = self.scalar()
        if not isinstance(v, str) or not v.strip():
            raise self.error(f"must be a non-empty string, not {_show(v)}")
        return v

    def boolean(self) -> bool:
        v = self.scalar()
        if not isinstance(v, bool):
            raise self.error(f"must be true or false, not {_show(v)}")
        return v

    def number(self, *, minimum: float = 0.0, positive: bool = False) -> float:
        """A number of at least ``minimum`` (above it when ``positive``); as written (int or float)."""
        v = self.scalar()
        if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
            raise self.error(f"must be a number, not {_show(v)}")
        if positive and v <= minimum:
            raise self.error(f"must be greater than {minimum:g}, not {v}")
        if v < minimum:
            raise self.error(f"must be at least {minimum:g}, not {v}")
        return v

    def mebibytes(self) -> float:
        """A size in MiB: a finite number above 0 (``0.5`` is 512 KiB)."""
        v = self.number(positive=True)
        if math.isinf(v):
            raise self.error("must be a finite number of MiB, not infinity")
        return v

    def integer(self, *, minimum: int = 0) -> int:
        v = self.scalar()
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"must be a whole number, not {_show(v)}")
        if v < minimum:
            what = "a positive whole number (at least 1)" if minimum == 1 else f"at least {minimum}"
            raise self.error(f"must be {what}, not {v}")
        return v

    def choice(self, choices: Iterable[str]) -> str:
        allowed = tuple(choices)
        v = self.scalar()
        if v not in allowed:
            raise self.error(f"must be one of {', '.join(allowed)}, not {_show(v)}")
        return str(v)

    def names(self) -> tuple[str, ...]:
        """One non-empty string or a list of them; a lone string stays whole."""
        if isinstance(self.node, ScalarNode):
            return (self.string(),)
        return tuple(item.string() for item in self.sequence())

    def strings(self) -> tuple[str, ...]:
        """A list of strings; a single string is split on whitespace (``flags: --a --b``)."""
        if isinstance(self.node, ScalarNode):
            return tuple(self.string().split())
        if not isinstance(self.node, SequenceNode):
            raise self.error(f"must be a list of strings, not {node_kind(self.node)}")
        out = []
        for item in self.sequence():
            if not isinstance(item.node, ScalarNode):
                raise item.error(f"must be a string, not {node_kind(item.node)}")
            out.append(item.string())
        return tuple(out)


def opt(m: dict[str, At], key: str, read: Callable[[At], T], default: T) -> T:
    """``read(m[key])``, or ``default`` when the key is absent or null."""
    at = m.get(key)
    if at is None or at.is_null():
        return default
    return read(at)


def file_path(base: Path, written: str) -> Path:
    """A path as a document writes it: ``~`` expanded, a relative one taken from the file's directory."""
    path = Path(written).expanduser()
    return path if path.is_absolute() else base / path
