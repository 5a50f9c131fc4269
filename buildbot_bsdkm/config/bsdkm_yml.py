"""``bsdkm.yml`` → a typed, validated ``Config``.

Every error names the file, the line and the dotted key that is wrong, because
the person reading it is usually looking at a CI log, not at the file.
Relative paths in the file are taken relative to the file's directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..support.redact import redact_url
from ..support.resources import default_config_path as packaged_config_path
from ..support.yaml_reader import At, LocatedDict, LocatedError, compose, opt, read_text
from ..support.yaml_schema import (
    BOOLEAN,
    MAPPING,
    MEBIBYTES,
    STRING,
    STRINGS,
    Kind,
    Schema,
    Section,
    choice,
    integer,
    nullable,
    number,
    one_of,
    string,
)
from ..targets import FREEBSD_NAMES
from ..targets import NAMES as TARGET_NAMES
from ..triage.known import KNOWN_ISSUES, KnownIssues, read_known_issues
from .master import MASTER, MasterListen, read_master
from .workers import WORKERS

# The stages a ``timeouts:`` key may name (DEFAULT_TIMEOUTS); pipeline/stages.STAGES are the CLI's.
TIMEOUT_STAGES = ("fetch", "configure", "build", "load", "selftest", "benchmark", "unload", "collect")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


DEFAULT_CONSOLE_CAP_MIB = 64.0


class ConfigError(LocatedError):
    """A config that cannot be used; ``str()`` is ``file:line: key: problem``."""


# --------------------------------------------------------------------------- sources


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


# --------------------------------------------------------------------------- the rest


@dataclass(frozen=True)
class TargetConfig:
    name: str
    flags: tuple[str, ...]  # configure flags every variant gets on this target
    make_args: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)  # target-specific: kernel_version, kmod_dir


@dataclass(frozen=True)
class VariantConfig:
    name: str
    flags: tuple[str, ...]
    targets: tuple[str, ...]
    # Shell text put before each program the userspace target runs ("ulimit -v 8000;"): lets a test
    # starve the self-test for real.
    run_prefix: str | None = None
    cflags: tuple[str, ...] = ()
    enabled: bool = True  # False: runs only when asked for by name (--variant)


# How each round of an interleaved base/head measurement is ordered (pipeline/rounds.py says why).
ROUND_ORDERS = ("shuffled", "alternate")


@dataclass(frozen=True)
class BenchmarkConfig:
    min_runtime_s: float | None = 0.01  # BENCH_MIN_RUNTIME_SEC
    embedded: bool = True  # BENCH_EMBEDDED: smaller sizes
    ntimes: int | None = 1  # BENCH_NTIMES
    agreetimes: int | None = 1  # BENCH_AGREETIMES
    userspace_args: tuple[str, ...] = ("-aes-gcm", "-aes-cbc", "-sha256", "-rsa")
    extra_cflags: tuple[str, ...] = ()
    # Rounds of base, head benchmark runs when a base is built next to the head.
    repeats: int = 5
    # Each round's order: a coin flip (shuffled) or always base first (alternate): pipeline/rounds.py.
    round_order: str = "shuffled"
    # Rounds a side at most when the gate finds the first ``repeats`` too noisy to decide (the
    # policy's ``perf.resolve_pct``; pipeline/extend.py): as many again each time. ``repeats``: never.
    max_repeats: int = 15

    def cflags(self) -> list[str]:
        out: list[str] = []
        if self.embedded:
            out.append("-DBENCH_EMBEDDED")
        if self.min_runtime_s is not None:
            out.append(f"-DBENCH_MIN_RUNTIME_SEC={self.min_runtime_s:g}")
        if self.ntimes is not None:
            out.append(f"-DBENCH_NTIMES={self.ntimes}")
        if self.agreetimes is not None:
            out.append(f"-DBENCH_AGREETIMES={self.agreetimes}")
        return out + list(self.extra_cflags)


@dataclass(frozen=True)
class FreeBSDConfig:
    """``freebsd:`` where ``freebsd-kmod-qemu`` gets its kernels, loader and kernel sources.

    One of three: FreeBSD's distribution sets (``release`` for the release kernel, ``snapshot``
    for the debug kernel, from ``mirror``), a FreeBSD source tree with a built kernel (``src``,
    ``kernel``), or a directory of one's own kernels (``kit``). With none of them the target
    cannot run, and says so.
    """

    kit: Path | None = None  # a directory of one's own kernels (boot/, sysroot/)
    release: str | None = None  # "15.0-RELEASE": its GENERIC kernel is the release kernel
    # "16.0-CURRENT", or "CURRENT" (the newest the mirror lists): its GENERIC (INVARIANTS, WITNESS) is
    # the debug kernel
    snapshot: str | None = None
    mirror: str | None = None  # default https://download.freebsd.org; https:// or a directory
    arch: str = "amd64"
    manifest_sha256: str | None = None  # the release's MANIFEST, pinned (the mirror's is unsigned)
    src: Path | None = None  # a FreeBSD source tree (/usr/src)
    kernel: Path | None = None  # the kernel built from ``src``
    loader: Path | None = None  # the EFI loader booting it (default /boot/loader_simp.efi)
    kernel_kind: str = "release"  # which of ``kernels:`` the ``src`` kernel is

    @property
    def configured(self) -> bool:
        return bool(self.kit or self.release or self.snapshot or self.src)


@dataclass(frozen=True)
class RetryConfig:
    max_infra_retries: int = 2
    backoff_s: tuple[float, ...] = (30.0, 120.0)
    infra_patterns: tuple[str, ...] = ()  # added to classify.DEFAULT_INFRA_PATTERNS
    real_patterns: tuple[str, ...] = ()  # added to classify.DEFAULT_REAL_PATTERNS


@dataclass(frozen=True)
class ReleaseConfig:
    """``release:``: the release-candidate run (``bsdkm-ci release``, Buildbot's tag scheduler)."""

    tag_pattern: str = "v*-stable"  # tags (fnmatch) that start a release-candidate build
    freebsd_releases: tuple[str, ...] = ("13.5", "14.3", "15.0")  # declared; each needs a worker tag
    arch: str = "amd64"  # worker tags are freebsd-<release>-<arch>
    repeats: int = 3  # candidate/previous measurements, interleaved
    software_variant: str = "noasm"  # speedups are every other variant against this one
    previous: str | None = None  # SOURCE a pushed release tag is compared with (debian:trixie/5.7.2)


DEFAULT_TIMEOUTS: dict[str, float] = {
    "fetch": 900.0,
    "configure": 300.0,
    "build": 1800.0,
    "load": 600.0,
    "selftest": 300.0,
    "benchmark": 600.0,
    "unload": 120.0,
    "collect": 60.0,
}


@dataclass(frozen=True)
class Config:
    source: SourceSpec = field(default_factory=DebianSource)
    targets: dict[str, TargetConfig] = field(default_factory=dict)
    variants: dict[str, VariantConfig] = field(default_factory=dict)
    benchmark: BenchmarkConfig = field(default_factory=BenchmarkConfig)
    timeouts: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TIMEOUTS))
    jobs: int = 2  # make -j
    parallel: int = 2  # (target, variant) builds at once
    policy: Path | None = None
    baseline: Path | None = None
    retry: RetryConfig = field(default_factory=RetryConfig)
    cache_dir: Path | None = None  # None: $BSDKM_CACHE, $XDG_CACHE_HOME/bsdkm-ci, ~/.cache/bsdkm-ci
    # Read by worker_config.parse_workers / github/settings.parse_settings, whose errors name the line
    workers: dict[str, Any] = field(default_factory=dict)  # a LocatedDict when read from a file
    github: dict[str, Any] = field(default_factory=dict)  # a LocatedDict when read from a file
    www: dict[str, Any] = field(default_factory=dict)  # web UI auth + public URL (buildbot/www_security.py)
    master: MasterListen = field(default_factory=MasterListen)  # a Buildbot master's ports and interfaces
    freebsd: FreeBSDConfig = field(default_factory=FreeBSDConfig)
    release: ReleaseConfig = field(default_factory=ReleaseConfig)
    known_issues: KnownIssues = field(default_factory=KnownIssues)  # triage/known.py
    path: Path | None = None  # the file this came from
    # What one boot may print on its console before the guest is stopped (a module printing in a
    # loop fills the worker's disk and memory otherwise); the run is then a real failure.
    console_cap_mib: float = DEFAULT_CONSOLE_CAP_MIB

    def timeout(self, stage: str) -> float:
        return self.timeouts.get(stage, DEFAULT_TIMEOUTS.get(stage, 600.0))

    @property
    def console_cap_bytes(self) -> int:
        return int(self.console_cap_mib * (1 << 20))

    def pairs(
        self, variants: list[str] | None = None, targets: list[str] | None = None
    ) -> list[tuple[str, str]]:
        """(target, variant) pairs to run, in file order; unknown names raise ConfigError."""
        where = str(self.path or "<config>")
        for v in variants or []:
            if v not in self.variants:
                raise ConfigError(
                    where, None, "variants", f"no variant {v!r} (have: {', '.join(self.variants)})"
                )
        for t in targets or []:
            if t not in self.targets:
                raise ConfigError(
                    where, None, "targets", f"no target {t!r} (have: {', '.join(self.targets)})"
                )
        out = []
        for vname, var in self.variants.items():
            if (variants and vname not in variants) or (not variants and not var.enabled):
                continue
            for t in var.targets:
                if targets and t not in targets:
                    continue
                out.append((t, vname))
        return out

    def selected_pairs(
        self, variants: list[str] | None = None, targets: list[str] | None = None
    ) -> list[tuple[str, str]]:
        """``pairs``, but a selection that matches nothing raises ConfigError naming what there is."""
        found = self.pairs(variants, targets)
        if found:
            return found
        names = variants or [n for n, v in self.variants.items() if v.enabled]
        have = "; ".join(f"{n}: {', '.join(self.variants[n].targets) or 'no targets'}" for n in names)
        wanted = f"target {', '.join(targets)}" if targets else "target"
        which = f"variant {', '.join(variants)}" if variants else "the enabled variants"
        raise ConfigError(str(self.path or "<config>"), None, "variants",
                          f"the selection runs nothing: {which} has no {wanted} "
                          f"(targets per variant: {have or 'none enabled'})")

    def configure_flags(self, target: str, variant: str) -> list[str]:
        """Target's common flags, then the variant's (which win over a target flag of the same name)."""
        common = list(self.targets[target].flags)
        own = list(self.variants[variant].flags)
        own_names = {f.split("=", 1)[0] for f in own}
        return [f for f in common if f.split("=", 1)[0] not in own_names] + own

    def cflags(self, target: str, variant: str) -> list[str]:
        # A target's own benchmark CFLAGS (targets.<t>.bench_cflags), e.g. shorter work under TCG.
        own = self.targets[target].options.get("bench_cflags") or () if target in self.targets else ()
        return self.benchmark.cflags() + [str(f) for f in own] + list(self.variants[variant].cflags)


# --------------------------------------------------------------------------- YAML walking


def _patterns(at: At) -> tuple[str, ...]:
    """Like ``At.strings`` but a lone string stays whole (regexes contain spaces)."""
    if isinstance(at.node, ScalarNode):
        return (at.string(),)
    return at.strings()


def _resolve(base: Path, p: str) -> Path:
    path = Path(p).expanduser()
    return path if path.is_absolute() else (base / path)


# --------------------------------------------------------------------------- what each section accepts
# The tables the loader reads each section with (allowed keys, each value's reader) and that
# ``json_schema`` turns into the JSON Schema editors check bsdkm.yml with.

_HTTP = r"^https?://"
_SHA256 = r"^[0-9a-fA-F]{64}$"
RELEASE_NAME = r"\d+\.\d+-(?:RELEASE|BETA\d*|RC\d*|STABLE|CURRENT)"
# CURRENT alone: the newest *-CURRENT the mirror lists, so the name need not change when main moves on.
SNAPSHOT_NAME = r"(?:\d+\.\d+-(?:CURRENT|STABLE|PRERELEASE)|CURRENT)"
_VARIANT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# Configure flags start with "--": a list of them, or one string of them.
_FLAG: Schema = {"type": "string", "pattern": r"^--"}
_FLAGS = Kind({"anyOf": [{"type": "string", "pattern": r"^\s*--\S*(\s+--\S*)*\s*$"},
                         {"type": "array", "items": _FLAG}]}, At.strings)
_PATTERNS = Kind(STRINGS.schema, _patterns)  # regular expressions: a lone one stays whole
_SCALAR: Schema = {"type": ["string", "number"]}  # as written: 5.10 is a version, not a float

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
TARGET = Section({"flags": STRINGS, "make_args": STRINGS}, more=True)  # and the target's own options
TARGETS = Section(each=Kind(nullable(TARGET.schema())), choices=TARGET_NAMES)
VARIANT = Section({"flags": _FLAGS, "targets": STRINGS.given(), "run_prefix": STRING, "cflags": STRINGS,
                   "enabled": BOOLEAN}, required=("targets",))
VARIANTS = Section(each=VARIANT.kind(), names=_VARIANT_NAME, extra={"minProperties": 1})
BENCHMARK = Section({
    "min_runtime_s": number(),
    "embedded": BOOLEAN,
    "ntimes": integer(1),
    "agreetimes": integer(1),
    "userspace_args": STRINGS,
    "extra_cflags": STRINGS,
    "repeats": integer(1),
    "round_order": choice(ROUND_ORDERS),
    "max_repeats": integer(1),
})
TIMEOUTS = Section({stage: number(minimum=1.0).given() for stage in TIMEOUT_STAGES})
RETRY = Section({
    "max_infra_retries": integer(0),
    "backoff_s": Kind({"anyOf": [{"type": "number", "minimum": 0},
                                 {"type": "array", "items": {"type": "number", "minimum": 0}}]}, null=False),
    "infra_patterns": _PATTERNS,
    "real_patterns": _PATTERNS,
})
RELEASE = Section({
    "tag_pattern": STRING,
    # 14.3 unquoted is a YAML float: read as written
    "freebsd_releases": Kind({"anyOf": [_SCALAR, {"type": "array", "items": _SCALAR}]}, null=False),
    "arch": STRING,
    "repeats": integer(1),
    "software_variant": STRING,
    "previous": STRING,
})
FREEBSD = Section({
    "kit": STRING,
    "release": string(At.string, f"^{RELEASE_NAME}$"),
    "snapshot": string(At.string, f"^{SNAPSHOT_NAME}$"),
    "mirror": STRING,
    "arch": STRING,
    "manifest_sha256": string(At.string, r"^[0-9a-f]{64}$"),
    "src": STRING,
    "kernel": STRING,
    "loader": STRING,
    "kernel_kind": choice(("debug", "release")),
})
FREEBSD_KEYS = FREEBSD.keys
CONFIG = Section({
    "source": SOURCE.kind(),
    "targets": TARGETS.kind(),
    "variants": VARIANTS.kind(),
    "benchmark": BENCHMARK.kind(),
    "timeouts": TIMEOUTS.kind(),
    "jobs": integer(1),
    "parallel": integer(1),
    "policy": STRING,
    "baseline": STRING,
    "retry": RETRY.kind(),
    "cache_dir": STRING,
    "workers": WORKERS.kind(null=True),
    "github": MAPPING,  # github/settings.py checks it (``json_schema`` adds its keys)
    "www": MAPPING,  # buildbot/www_security.py checks it
    "master": MASTER.kind(read_master, null=True),
    "freebsd": FREEBSD.kind(),
    "release": RELEASE.kind(),
    "known_issues": KNOWN_ISSUES,
    "console_cap_mib": MEBIBYTES,
}, required=("targets", "variants"))
TOP_KEYS = CONFIG.keys


# --------------------------------------------------------------------------- sections


def _source(at: At, base: Path) -> SourceSpec:
    m = SOURCE.mapping(at)
    if len(m) != 1:
        raise at.error(f"give exactly one of debian, git, tarball, local (got {len(m)})")
    kind, body = next(iter(m.items()))
    if kind == "local":
        if isinstance(body.node, MappingNode):
            d = LOCAL_DIR.mapping(body)
            body.require(d, *LOCAL_DIR.required)
            return LocalSource(_resolve(base, LOCAL_DIR.get(d, "path", "")))
        return LocalSource(_resolve(base, body.string()))
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
            loc = str(_resolve(base, loc))
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


def _targets(at: At) -> dict[str, TargetConfig]:
    out = {}
    for name, t in TARGETS.mapping(at).items():
        if name not in TARGET_NAMES:
            raise t.name_error(f"unknown target (known: {', '.join(TARGET_NAMES)})")
        if t.is_null():
            out[name] = TargetConfig(name=name, flags=())
            continue
        m = TARGET.mapping(t)
        flags = TARGET.get(m, "flags", ())
        make_args = TARGET.get(m, "make_args", ())
        options = {k: v.value() for k, v in m.items() if k not in TARGET.keys}
        out[name] = TargetConfig(name=name, flags=flags, make_args=make_args, options=options)
    return out


def _variants(at: At, targets: dict[str, TargetConfig]) -> dict[str, VariantConfig]:
    out = {}
    for name, v in VARIANTS.mapping(at).items():
        if not re.fullmatch(_VARIANT_NAME, name):
            raise v.name_error("variant names may use letters, digits, '.', '_' and '-' only")
        m = VARIANT.mapping(v)
        flags = VARIANT.get(m, "flags", ())
        bad = [f for f in flags if not f.startswith("--")]
        if bad:
            raise m["flags"].error(f"configure flags start with '--': {bad[0]!r}")
        if "targets" not in m:
            raise v.name_error("missing key 'targets' (where this variant runs)")
        vt = m["targets"].strings()
        if not vt:
            raise m["targets"].error("needs at least one target")
        for t in vt:
            if t not in targets:
                raise m["targets"].error(f"target {t!r} is not in 'targets' (have: {', '.join(targets)})")
        if "--enable-freebsdkm-crypto-register" in flags and set(vt) - set(FREEBSD_NAMES):
            raise m["targets"].error("--enable-freebsdkm-crypto-register only works on "
                                     + " and ".join(FREEBSD_NAMES))
        out[name] = VariantConfig(
            name=name,
            flags=flags,
            targets=vt,
            run_prefix=VARIANT.get(m, "run_prefix", None),
            cflags=VARIANT.get(m, "cflags", ()),
            enabled=VARIANT.get(m, "enabled", True),
        )
    if not out:
        raise at.error("no variants")
    return out


def _benchmark(at: At) -> BenchmarkConfig:
    m = BENCHMARK.mapping(at)
    d = BenchmarkConfig()

    def get(key: str) -> Any:  # given as null: "leave it out" where that means something, else the default
        nulled = key in m and key in ("min_runtime_s", "ntimes", "agreetimes")
        return BENCHMARK.get(m, key, None if nulled else getattr(d, key))

    return BenchmarkConfig(**{key: get(key) for key in BENCHMARK.keys})


def _timeouts(at: At) -> dict[str, float]:
    out = dict(DEFAULT_TIMEOUTS)
    for name, v in TIMEOUTS.mapping(at).items():
        out[name] = TIMEOUTS.fields[name].read(v)  # type: ignore[misc]
    return out


def _retry(at: At) -> RetryConfig:
    m = RETRY.mapping(at)
    backoff: tuple[float, ...] = RetryConfig().backoff_s
    if "backoff_s" in m:
        b = m["backoff_s"]
        items = b.sequence() if isinstance(b.node, SequenceNode) else [b]
        backoff = tuple(n.number() for n in items)
    pats: dict[str, tuple[str, ...]] = {}
    for key in ("infra_patterns", "real_patterns"):
        pats[key] = RETRY.get(m, key, ())
        for i, p in enumerate(pats[key]):
            try:
                re.compile(p)
            except re.error as e:
                raise m[key].error(f"[{i}] is not a regular expression: {e}") from None
    return RetryConfig(
        max_infra_retries=RETRY.get(m, "max_infra_retries", 2),
        backoff_s=backoff,
        infra_patterns=pats["infra_patterns"],
        real_patterns=pats["real_patterns"],
    )


def _release(at: At) -> ReleaseConfig:
    m = RELEASE.mapping(at)
    d = ReleaseConfig()
    releases = d.freebsd_releases
    if "freebsd_releases" in m:  # 14.3 unquoted is a YAML float: read each as written
        node = m["freebsd_releases"].node
        items = node.value if isinstance(node, SequenceNode) else [node]
        releases = tuple(str(n.value) for n in items if isinstance(n, ScalarNode))
    bad = [r for r in releases if not re.fullmatch(r"\d+\.\d+", r)]
    if bad:
        raise m["freebsd_releases"].error(f"a FreeBSD release is MAJOR.MINOR, got {bad[0]!r}")
    return ReleaseConfig(
        tag_pattern=RELEASE.get(m, "tag_pattern", d.tag_pattern),
        freebsd_releases=releases,
        arch=RELEASE.get(m, "arch", d.arch),
        repeats=RELEASE.get(m, "repeats", d.repeats),
        software_variant=RELEASE.get(m, "software_variant", d.software_variant),
        previous=RELEASE.get(m, "previous", None),
    )


def release_mirror_problem(mirror: str) -> str | None:
    """Why ``mirror`` cannot serve FreeBSD release sets (None: it can): over plain http anyone on
    the path can hand out their own sets with a MANIFEST that vouches for them."""
    if "://" not in mirror or mirror.startswith(("https://", "file://")):
        return None
    return f"{mirror!r} is not an https:// URL or a local directory (the sets' MANIFEST is unsigned)"


def _freebsd(at: At, base: Path) -> FreeBSDConfig:
    m = FREEBSD.mapping(at)

    def path(key: str, want_dir: bool) -> Path | None:
        value = opt(m, key, lambda a: _resolve(base, a.string()), None)
        if value is not None and not (value.is_dir() if want_dir else value.is_file()):
            raise m[key].error(f"{value} is not a {'directory' if want_dir else 'file'}")
        return value

    kit, src = path("kit", True), path("src", True)
    kernel, loader = path("kernel", False), path("loader", False)
    release = opt(m, "release", At.string, None)
    if release is not None and not re.fullmatch(RELEASE_NAME, release):
        raise m["release"].error(f"{release!r} is not a FreeBSD release name like 15.0-RELEASE")
    snapshot = opt(m, "snapshot", At.string, None)
    if snapshot is not None and not re.fullmatch(SNAPSHOT_NAME, snapshot):
        raise m["snapshot"].error(f"{snapshot!r} is not a FreeBSD snapshot name like 16.0-CURRENT, "
                                  "or CURRENT (the newest the mirror lists)")
    sets = [k for k in ("release", "snapshot") if k in m]
    chosen = [k for k, v in (("kit", kit), ("src", src), ("sets", sets)) if v]
    if len(chosen) > 1:
        key = "src" if src is not None and kit is not None else (sets[0] if sets else "src")
        raise m[key].error("give one of kit, src, or release/snapshot (the distribution sets)")
    if src is not None and kernel is None:
        raise m["src"].error("a source tree needs the kernel built from it: give freebsd.kernel too")
    for key in ("kernel", "loader", "kernel_kind"):
        if key in m and src is None:
            raise m[key].error("belongs to a source tree: give freebsd.src too")
    kind = opt(m, "kernel_kind", At.string, "release")
    if kind not in ("debug", "release"):
        raise m["kernel_kind"].error(f"{kind!r} is not debug or release")
    mirror = opt(m, "mirror", At.string, None)
    if mirror is not None and release_mirror_problem(mirror):
        raise m["mirror"].error(str(release_mirror_problem(mirror)))
    if mirror is not None and "://" not in mirror:
        mirror = str(_resolve(base, mirror))
    pin = opt(m, "manifest_sha256", At.string, None)
    if pin is not None and not re.fullmatch(r"[0-9a-f]{64}", pin):
        raise m["manifest_sha256"].error(f"must be the MANIFEST's SHA-256 (64 lowercase hex digits), "
                                         f"not {pin!r}")
    if pin is not None and release is None:
        # A snapshot is rebuilt, so its MANIFEST changes: only a release's can be pinned.
        raise m["manifest_sha256"].error("pins a release's MANIFEST: give freebsd.release too")
    return FreeBSDConfig(kit=kit, release=release, snapshot=snapshot, mirror=mirror,
                         arch=opt(m, "arch", At.string, "amd64"), manifest_sha256=pin, src=src, kernel=kernel,
                         loader=loader, kernel_kind=kind)




def parse_config(text: str, source: str = "<config>", base: Path | None = None) -> Config:
    """Parse config text; ``source`` names it in errors, ``base`` anchors relative paths."""
    base = base or Path.cwd()
    root = compose(text, source, ConfigError)
    if root is None:
        raise ConfigError(source, None, "", "the file is empty")
    top = At.root(root, source, ConfigError)
    m = top.mapping(TOP_KEYS)
    top.require(m, *CONFIG.required)
    targets = _targets(m["targets"])
    return Config(
        source=_source(m["source"], base) if "source" in m else DebianSource(),
        targets=targets,
        variants=_variants(m["variants"], targets),
        benchmark=_benchmark(m["benchmark"]) if "benchmark" in m else BenchmarkConfig(),
        timeouts=_timeouts(m["timeouts"]) if "timeouts" in m else dict(DEFAULT_TIMEOUTS),
        jobs=CONFIG.get(m, "jobs", 2),
        parallel=CONFIG.get(m, "parallel", 2),
        policy=opt(m, "policy", lambda a: _resolve(base, a.string()), None),
        baseline=opt(m, "baseline", lambda a: _resolve(base, a.string()), None),
        retry=_retry(m["retry"]) if "retry" in m else RetryConfig(),
        cache_dir=opt(m, "cache_dir", lambda a: _resolve(base, a.string()), None),
        workers=opt(m, "workers", At.located, LocatedDict(file=source, key="workers")),
        github=opt(m, "github", At.located, LocatedDict(file=source, key="github")),
        www=opt(m, "www", At.located, {}),  # located: www_security names file:line
        master=opt(m, "master", read_master, MasterListen()),
        freebsd=_freebsd(m["freebsd"], base) if "freebsd" in m else FreeBSDConfig(),
        release=_release(m["release"]) if "release" in m else ReleaseConfig(),
        known_issues=read_known_issues(m["known_issues"], base) if "known_issues" in m else KnownIssues(),
        console_cap_mib=CONFIG.get(m, "console_cap_mib", DEFAULT_CONSOLE_CAP_MIB),
        path=Path(source) if source != "<config>" else None,
    )


def load_config(path: str | Path) -> Config:
    p = Path(path)
    text = read_text(p, ConfigError)
    return parse_config(text, str(p), p.resolve().parent)


def default_config_path() -> Path:
    """The repository's ``bsdkm.yml`` (the main job's configuration), shipped as package data."""
    return packaged_config_path()
