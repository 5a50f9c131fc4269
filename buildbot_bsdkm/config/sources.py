"""Where wolfSSL comes from (``source:`` in ``bsdkm.yml``): each kind of source, and its reader."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from yaml.nodes import MappingNode

from ..support.redact import redact_url
from ..support.yaml_reader import At, file_path
from ..support.yaml_schema import STRING, Kind, Schema, Section, number, one_of, string

DEFAULT_MIRROR = "http://deb.debian.org/debian"
_HTTP = r"^https?://"
_SHA256 = r"^[0-9a-fA-F]{64}$"
_SCALAR: Schema = {"type": ["string", "number"]}  # as written: 5.10 is a version, not a float


@dataclass(frozen=True)
class DebianSource:
    """wolfSSL's upstream tarball as Debian's source archive carries it."""

    suite: str = "sid"
    package: str = "wolfssl"
    version: str | None = "5.9.2"  # upstream version to insist on; None = what the index lists
    mirror: str = DEFAULT_MIRROR
    index_max_age_s: float = 6 * 3600.0  # a cached Sources.xz older than this is read again

    def describe(self) -> str:
        return f"debian:{self.suite}/{self.package}" + (f"={self.version}" if self.version else "")


@dataclass(frozen=True)
class GitSource:
    url: str
    ref: str = "HEAD"  # branch, tag, commit, refs/pull/N/head or refs/pull/N/merge
    # The commit ``ref`` must resolve to (a PR build's head sha): a PR pushed to after its build
    # was queued must not have its newer, possibly unapproved, head built under the old one's name.
    commit: str | None = None
    # A work tree of its own for this source: the perf gate's base ("base") is often the same
    # repository as the head, fetched next to it, and must not check out over the head's tree.
    slot: str = ""

    def describe(self) -> str:
        return f"git:{redact_url(self.url)}@{self.ref}"  # a label: shown and written, never fetched


@dataclass(frozen=True)
class TarballSource:
    location: str  # a path or an http(s) URL
    sha256: str | None = None

    @property
    def is_url(self) -> bool:
        return bool(re.match(r"^(https?|ftp)://", self.location))

    def describe(self) -> str:
        return f"tarball:{redact_url(self.location)}"


@dataclass(frozen=True)
class LocalSource:
    path: Path

    def describe(self) -> str:
        return f"local:{self.path}"


SourceSpec = DebianSource | GitSource | TarballSource | LocalSource


def usable_git_ref(ref: str) -> bool:
    """A ref ``git fetch`` gets as a ref: a leading '-' would be read as an option, '..' as a range."""
    return bool(re.match(r"^[\w./+-]+$", ref)) and ".." not in ref and not ref.startswith("-")


# --------------------------------------------------------------------------- what source: accepts

DEBIAN = Section({
    "suite": STRING,
    "package": STRING,
    "version": Kind(_SCALAR, lambda a: str(a.value())),
    "mirror": string(At.string, _HTTP),
    "index_max_age_s": number(),
})
GIT = Section({"url": STRING, "ref": STRING}, required=("url",))
TARBALL = Section({"path": STRING, "url": string(At.string, r"^(https?|ftp)://"),
                   "sha256": string(At.string, _SHA256)},
                  extra={"oneOf": [{"required": ["path"]}, {"required": ["url"]}]})
LOCAL_DIR = Section({"path": STRING}, required=("path",))
SOURCE = Section({
    "debian": DEBIAN.kind(),
    "git": GIT.kind(),
    "tarball": TARBALL.kind(),
    "local": one_of({"type": "string", "pattern": r"\S"}, LOCAL_DIR.schema()).given(),
}, extra={"minProperties": 1, "maxProperties": 1})


def read_source(at: At, base: Path) -> SourceSpec:
    """``source:``: exactly one of debian, git, tarball, local; relative paths from the file's ``base``."""
    m = SOURCE.mapping(at)
    if len(m) != 1:
        raise at.error(f"give exactly one of debian, git, tarball, local (got {len(m)})")
    kind, body = next(iter(m.items()))
    if kind == "local":
        if isinstance(body.node, MappingNode):
            d = LOCAL_DIR.mapping(body)
            body.require(d, *LOCAL_DIR.required)
            return LocalSource(file_path(base, LOCAL_DIR.get(d, "path", "")))
        return LocalSource(file_path(base, body.string()))
    if kind == "git":
        g = GIT.mapping(body)
        body.require(g, *GIT.required)
        url = GIT.get(g, "url", "")
        ref = GIT.get(g, "ref", "HEAD")
        if not usable_git_ref(ref):
            raise g["ref"].error(f"not a usable git ref: {ref!r}")
        return GitSource(url=url, ref=ref)
    if kind == "tarball":
        t = TARBALL.mapping(body)
        given = [k for k in ("path", "url") if k in t]
        if len(given) != 1:
            raise body.error("give exactly one of 'path' or 'url'")
        loc = t[given[0]].string()
        if given[0] == "path":
            loc = str(file_path(base, loc))
        elif not re.match(r"^(https?|ftp)://", loc):
            raise t["url"].error(f"not an http(s) URL: {loc!r}")
        sha = TARBALL.get(t, "sha256", None)
        if sha is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
            raise t["sha256"].error(f"must be 64 hex digits, not {sha!r}")
        return TarballSource(location=loc, sha256=sha.lower() if sha else None)
    d = DEBIAN.mapping(body)
    default = DebianSource()
    mirror = DEBIAN.get(d, "mirror", DEFAULT_MIRROR).rstrip("/")
    if not re.match(_HTTP, mirror):
        raise d["mirror"].error(f"not an http(s) URL: {mirror!r}")
    return DebianSource(
        suite=DEBIAN.get(d, "suite", default.suite),
        package=DEBIAN.get(d, "package", default.package),
        version=DEBIAN.get(d, "version", default.version),
        mirror=mirror,
        index_max_age_s=DEBIAN.get(d, "index_max_age_s", default.index_max_age_s),
    )
