"""Known issues: failures with a tracker entry, matched by signature, that do not block a change.

``bsdkm.yml``::

    known_issues:                  # or: known_issues: known-issues.yml (a file with this list)
      - id: aesni-debug-kernel-malloc
        signatures: ["panic: malloc: called with spinlock or critical section held | AES_set_*"]
        targets: [freebsd-kmod-qemu]     # optional: every target
        variants: [intelasm]             # optional: every variant
        kernels: [debug]                 # optional: every kernel kind
        url: https://github.com/wolfSSL/wolfssl/issues/NNNN
        reason: why it fails, who fixes it
        until: "5.9.3"                   # a wolfSSL version (expired once that version is tested)
                                         # or a date, 2027-01-31 (expired after it)

Patterns are shell-style globs over the whole signature (``*`` any text, ``?`` one character).
Read through the one YAML reader, so every problem is ``file:line: key: problem``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from fnmatch import fnmatchcase
from pathlib import Path

from yaml.nodes import MappingNode, ScalarNode

from ..support.yaml_reader import At, LocatedError, compose, read_text
from ..support.yaml_schema import NAMES, STRING, Kind, Section, string
from ..targets import names as target_names

# One entry (the loader below checks what a schema cannot: dates, expiry, ids given twice).
ENTRY = Section({
    "id": STRING, "signatures": NAMES, "targets": NAMES.given(), "variants": NAMES.given(),
    "kernels": NAMES.given(), "url": string(At.string, r"^https?://\S+$"), "reason": STRING,
    "until": Kind({"type": ["string", "number"]}),  # a version (5.9.3) or a date (2027-01-31)
}, required=("id", "signatures", "url", "reason", "until"))
ENTRY_KEYS = ENTRY.keys
# ``known_issues:``: the list, or the name of a YAML file holding it.
KNOWN_ISSUES = Kind({"anyOf": [{"type": "string", "pattern": r"\S"},
                               {"type": "array", "items": ENTRY.schema()}]})
_VERSION = re.compile(r"^v?(\d+(?:\.\d+){1,3})(?:[-.]\w+)*$")
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")


class KnownIssueError(LocatedError):
    """A known-issue entry that cannot be used, or one that has expired."""

    TOP = "known_issues"
    FILE_KEY = "known_issues"


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``5.9.2`` / ``v5.9.2-stable`` -> (5, 9, 2); None for anything else."""
    m = _VERSION.match((text or "").strip())
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


@dataclass(frozen=True)
class KnownIssue:
    id: str
    signatures: tuple[str, ...]
    url: str
    reason: str
    until: str
    targets: tuple[str, ...] = ()  # empty: any
    variants: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    file: str = ""
    line: int | None = None

    def covers(self, target: str, variant: str, kernel: str = "") -> bool:
        return ((not self.targets or target in self.targets)
                and (not self.variants or variant in self.variants)
                and (not self.kernels or not kernel or kernel in self.kernels))

    def matches(self, signature: str) -> bool:
        return any(fnmatchcase(signature, p) for p in self.signatures)

    @property
    def until_date(self) -> date | None:
        return date.fromisoformat(self.until) if _DATE.match(self.until) else None

    def expired(self, versions: tuple[str, ...] = (), today: date | None = None) -> str | None:
        """Why the entry has expired (the version tested or the date), else None."""
        if (d := self.until_date) is not None:
            now = today or datetime.now(UTC).date()
            return f"its date {self.until} has passed (today is {now.isoformat()})" if now > d else None
        until = version_tuple(self.until)
        for v in versions:
            got = version_tuple(v)
            if until is not None and got is not None and got >= until:
                return f"wolfSSL {v} is tested, and the entry holds until {self.until}"
        return None

    def error(self, problem: str) -> KnownIssueError:
        return KnownIssueError(self.file, self.line, f"known_issues.{self.id}", problem)

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "url": self.url, "reason": self.reason, "until": self.until,
                "signatures": list(self.signatures), "targets": list(self.targets),
                "variants": list(self.variants), "kernels": list(self.kernels)}


@dataclass(frozen=True)
class KnownIssues:
    entries: tuple[KnownIssue, ...] = ()
    source: str = ""  # the file they were read from
    problems: tuple[str, ...] = field(default=())

    def match(self, signature: str, target: str, variant: str, kernels: list[str]) -> KnownIssue | None:
        for e in self.entries:
            if e.matches(signature) and any(e.covers(target, variant, k) for k in kernels or [""]):
                return e
        return None

    def check_expiry(self, versions: tuple[str, ...] = (), today: date | None = None) -> None:
        """KnownIssueError naming the first expired entry."""
        for e in self.entries:
            why = e.expired(versions, today)
            if why:
                raise e.error(f"expired: {why}; fix the failure or renew the entry ({e.url})")


def read_known_issues(at: At, base: Path, today: date | None = None) -> KnownIssues:
    """``known_issues:`` of ``bsdkm.yml`` (a list, or the name of a YAML file holding one); a date
    ``until`` that has passed is an error here, a version one when that version is tested."""
    if isinstance(at.node, ScalarNode) and not at.is_null():
        path = Path(at.string())
        path = path if path.is_absolute() else base / path
        text = read_text(path, at.error_type)
        root = compose(text, str(path), at.error_type)
        if root is None:
            return KnownIssues((), str(path))
        inner = At.root(root, str(path), at.error_type, top="known_issues")
        if isinstance(root, MappingNode):  # the file may hold the section itself
            inner = inner.mapping(("known_issues",)).get("known_issues", inner)
        issues = _entries(inner)
        out = KnownIssues(issues, str(path))
    else:
        out = KnownIssues(_entries(at), at.file)
    for e in out.entries:
        if e.until_date is not None and (why := e.expired((), today)):
            raise at.error_type(e.file, e.line, f"known_issues.{e.id}.until",
                                f"expired: {why}; fix the failure or renew the entry ({e.url})")
    return out


def _entries(at: At) -> tuple[KnownIssue, ...]:
    if at.is_null():
        return ()
    out: list[KnownIssue] = []
    seen: set[str] = set()
    for item in at.sequence():
        m = item.mapping(ENTRY_KEYS)
        item.require(m, *ENTRY.required)
        ident = m["id"].string()
        if ident in seen:
            raise m["id"].error(f"id {ident!r} is given twice")
        seen.add(ident)
        patterns = m["signatures"].names()
        url = m["url"].string()
        if not re.match(r"^https?://\S+$", url):
            raise m["url"].error(f"must be an http(s) URL of the tracker entry, not {url!r}")
        until_at = m["until"]
        if not isinstance(until_at.node, ScalarNode):  # not .scalar(): YAML would build 2026-02-30
            raise until_at.error("must be a wolfSSL version (5.9.3) or a date (2027-01-31), not a list")
        until = str(until_at.node.value).strip()  # as written: 5.10 is no float 5.1
        if not (_DATE.match(until) or version_tuple(until)):
            raise until_at.error(f"must be a wolfSSL version (5.9.3) or a date (2027-01-31), not {until!r}")
        if _DATE.match(until):
            try:
                date.fromisoformat(until)
            except ValueError:
                raise until_at.error(f"is no calendar date: {until!r}") from None
        out.append(KnownIssue(
            id=ident, signatures=patterns, url=url, reason=m["reason"].string(), until=until,
            targets=_targets(m["targets"]) if "targets" in m else (),
            variants=m["variants"].names() if "variants" in m else (),
            kernels=m["kernels"].names() if "kernels" in m else (),
            file=item.file, line=item.line))
    return tuple(out)


def _targets(at: At) -> tuple[str, ...]:
    names, known = at.names(), target_names()
    for n in names:
        if n not in known:
            raise at.error(f"unknown target {n!r} (known: {', '.join(known)})")
    return names
