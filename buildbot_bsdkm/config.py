"""``bsdkm.yml`` → a typed, validated ``Config``.

Every error names the file, the line and the dotted key that is wrong, because
the person reading it is usually looking at a CI log, not at the file.
Relative paths in the file are taken relative to the file's directory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

KNOWN_TARGETS = ("userspace", "linux-kmod-qemu", "freebsd-kmod", "freebsd-kmod-qemu")
KERNEL_TARGETS = ("linux-kmod-qemu", "freebsd-kmod", "freebsd-kmod-qemu")
FREEBSD_TARGETS = ("freebsd-kmod", "freebsd-kmod-qemu")
# The stages a ``timeouts:`` key may name (DEFAULT_TIMEOUTS); pipeline/stages.STAGES are the CLI's.
TIMEOUT_STAGES = ("fetch", "configure", "build", "load", "selftest", "benchmark", "unload", "collect")
DEFAULT_MIRROR = "http://deb.debian.org/debian"


class ConfigError(ValueError):
    """A config that cannot be used; ``str()`` is ``file:line: key: problem``."""

    def __init__(self, file: str, line: int | None, key: str, problem: str) -> None:
        self.file, self.line, self.key, self.problem = file, line, key, problem
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {key or '<top>'}: {problem}")


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
        return f"git:{self.url}@{self.ref}"


@dataclass(frozen=True)
class TarballSource:
    location: str  # a path or an http(s) URL
    sha256: str | None = None

    @property
    def is_url(self) -> bool:
        return bool(re.match(r"^(https?|ftp)://", self.location))

    def describe(self) -> str:
        return f"tarball:{self.location}"


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


@dataclass(frozen=True)
class BenchmarkConfig:
    min_runtime_s: float | None = 0.01  # BENCH_MIN_RUNTIME_SEC
    embedded: bool = True  # BENCH_EMBEDDED: smaller sizes
    ntimes: int | None = 1  # BENCH_NTIMES
    agreetimes: int | None = 1  # BENCH_AGREETIMES
    userspace_args: tuple[str, ...] = ("-aes-gcm", "-aes-cbc", "-sha256", "-rsa")
    extra_cflags: tuple[str, ...] = ()
    # Rounds of base, head benchmark runs when a base is built next to the head (issue 9).
    repeats: int = 5

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
    """``freebsd:`` the FreeBSD kit (kernels, loader, sysroot) ``freebsd-kmod-qemu`` builds and boots."""

    kit: Path | None = None  # None: ../shared/freebsd beside the checkout
    # Or a release's distribution sets (kernel.txz, base.txz, src.txz + MANIFEST) from a mirror.
    release: str | None = None  # "15.0-RELEASE"
    mirror: str | None = None  # default https://download.freebsd.org/releases; a URL or a directory
    arch: str = "amd64"


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
    workers: dict[str, Any] = field(default_factory=dict)  # Buildbot shell validates the contents
    github: dict[str, Any] = field(default_factory=dict)  # GitHub shell validates the contents
    www: dict[str, Any] = field(default_factory=dict)  # web UI auth + public URL (buildbot/www_security.py)
    freebsd: FreeBSDConfig = field(default_factory=FreeBSDConfig)
    release: ReleaseConfig = field(default_factory=ReleaseConfig)
    path: Path | None = None  # the file this came from

    def timeout(self, stage: str) -> float:
        return self.timeouts.get(stage, DEFAULT_TIMEOUTS.get(stage, 600.0))

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

T = TypeVar("T")
_constructor = SafeConstructor()


class _At:
    """A YAML node with the file and dotted key it came from, for precise errors."""

    def __init__(self, node: Node, key: str, file: str, key_node: Node | None = None) -> None:
        self.node, self.key, self.file = node, key, file
        self.key_node = key_node  # where the key itself was written, for errors about the name

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def error(self, problem: str) -> ConfigError:
        return ConfigError(self.file, self.line, self.key, problem)

    def name_error(self, problem: str) -> ConfigError:
        line = self.key_node.start_mark.line + 1 if self.key_node is not None else self.line
        return ConfigError(self.file, line, self.key, problem)

    def child(self, node: Node, name: str, key_node: Node | None = None) -> _At:
        return _At(node, f"{self.key}.{name}" if self.key else name, self.file, key_node)

    def is_null(self) -> bool:
        return isinstance(self.node, ScalarNode) and self.node.tag == "tag:yaml.org,2002:null"

    def value(self) -> Any:
        try:
            return _constructor.construct_object(self.node, deep=True)
        except ConstructorError as e:
            raise self.error(f"cannot read value: {e.problem}") from None

    def mapping(self, allowed: tuple[str, ...] | None = None) -> dict[str, _At]:
        if not isinstance(self.node, MappingNode):
            raise self.error(f"expected a mapping, got {_kind(self.node)}")
        out: dict[str, _At] = {}
        for knode, vnode in self.node.value:
            if not isinstance(knode, ScalarNode):
                raise _At(knode, self.key, self.file).error("keys must be plain names")
            name = str(knode.value)
            at = self.child(vnode, name, knode)
            if name in out:
                raise _At(knode, at.key, self.file).error("key given twice")
            if allowed is not None and name not in allowed:
                raise _At(knode, at.key, self.file).error(f"unknown key (allowed: {', '.join(allowed)})")
            out[name] = at
        return out

    def string(self) -> str:
        v = self.value()
        if not isinstance(v, str) or not v.strip():
            raise self.error(f"expected a non-empty string, got {_show(v)}")
        return v

    def number(self, *, minimum: float = 0.0, integer: bool = False) -> float:
        v = self.value()
        if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not isinstance(v, int)):
            raise self.error(f"expected {'an integer' if integer else 'a number'}, got {_show(v)}")
        if v < minimum:
            raise self.error(f"must be at least {minimum:g}, got {v}")
        return v

    def integer(self, *, minimum: int = 0) -> int:
        return int(self.number(minimum=minimum, integer=True))

    def boolean(self) -> bool:
        v = self.value()
        if not isinstance(v, bool):
            raise self.error(f"expected true or false, got {_show(v)}")
        return v

    def strings(self) -> tuple[str, ...]:
        """A list of strings; a single string is split on whitespace (``flags: --a --b``)."""
        if isinstance(self.node, ScalarNode):
            return tuple(self.string().split())
        if not isinstance(self.node, SequenceNode):
            raise self.error(f"expected a list of strings, got {_kind(self.node)}")
        out = []
        for i, item in enumerate(self.node.value):
            at = _At(item, f"{self.key}[{i}]", self.file)
            if not isinstance(item, ScalarNode):
                raise at.error(f"expected a string, got {_kind(item)}")
            out.append(at.string())
        return tuple(out)

    def patterns(self) -> tuple[str, ...]:
        """Like ``strings`` but a lone string stays whole (regexes contain spaces)."""
        if isinstance(self.node, ScalarNode):
            return (self.string(),)
        return self.strings()

    def plain(self) -> dict[str, Any]:
        self.mapping()  # checks shape and duplicate keys, with lines
        v = self.value()
        return dict(v)


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return f"{node.value!r}" if node.value != "" else "nothing"


def _show(v: Any) -> str:
    return "nothing" if v is None else f"{type(v).__name__} {v!r}"


def _opt(m: dict[str, _At], key: str, read: Callable[[_At], T], default: T) -> T:
    at = m.get(key)
    if at is None or at.is_null():
        return default
    return read(at)


# --------------------------------------------------------------------------- sections


def _resolve(base: Path, p: str) -> Path:
    path = Path(p).expanduser()
    return path if path.is_absolute() else (base / path)


def _source(at: _At, base: Path) -> SourceSpec:
    m = at.mapping(("debian", "git", "tarball", "local"))
    if len(m) != 1:
        raise at.error(f"give exactly one of debian, git, tarball, local (got {len(m)})")
    kind, body = next(iter(m.items()))
    if kind == "local":
        if isinstance(body.node, MappingNode):
            return LocalSource(_resolve(base, body.mapping(("path",))["path"].string()))
        return LocalSource(_resolve(base, body.string()))
    if kind == "git":
        g = body.mapping(("url", "ref"))
        if "url" not in g:
            raise body.error("missing key 'url'")
        url = g["url"].string()
        ref = _opt(g, "ref", _At.string, "HEAD")
        if not usable_git_ref(ref):
            raise g["ref"].error(f"not a usable git ref: {ref!r}")
        return GitSource(url=url, ref=ref)
    if kind == "tarball":
        t = body.mapping(("path", "url", "sha256"))
        given = [k for k in ("path", "url") if k in t]
        if len(given) != 1:
            raise body.error("give exactly one of 'path' or 'url'")
        loc = t[given[0]].string()
        if given[0] == "path":
            loc = str(_resolve(base, loc))
        elif not re.match(r"^(https?|ftp)://", loc):
            raise t["url"].error(f"not an http(s) URL: {loc!r}")
        sha = _opt(t, "sha256", _At.string, None)
        if sha is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
            raise t["sha256"].error("expected 64 hex digits")
        return TarballSource(location=loc, sha256=sha.lower() if sha else None)
    d = body.mapping(("suite", "package", "version", "mirror", "index_max_age_s"))
    version = _opt(d, "version", lambda a: str(a.value()), "5.9.2")
    mirror = _opt(d, "mirror", _At.string, DEFAULT_MIRROR).rstrip("/")
    if not re.match(r"^https?://", mirror):
        raise d["mirror"].error(f"not an http(s) URL: {mirror!r}")
    return DebianSource(
        suite=_opt(d, "suite", _At.string, "sid"),
        package=_opt(d, "package", _At.string, "wolfssl"),
        version=version,
        mirror=mirror,
        index_max_age_s=_opt(d, "index_max_age_s", _At.number, 6 * 3600.0),
    )


def _targets(at: _At) -> dict[str, TargetConfig]:
    out = {}
    for name, t in at.mapping().items():
        if name not in KNOWN_TARGETS:
            raise t.name_error(f"unknown target (known: {', '.join(KNOWN_TARGETS)})")
        if t.is_null():
            out[name] = TargetConfig(name=name, flags=())
            continue
        m = t.mapping()
        flags = _opt(m, "flags", _At.strings, ())
        make_args = _opt(m, "make_args", _At.strings, ())
        options = {k: v.value() for k, v in m.items() if k not in ("flags", "make_args")}
        out[name] = TargetConfig(name=name, flags=flags, make_args=make_args, options=options)
    return out


def _variants(at: _At, targets: dict[str, TargetConfig]) -> dict[str, VariantConfig]:
    out = {}
    for name, v in at.mapping().items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise v.name_error("variant names may use letters, digits, '.', '_' and '-' only")
        m = v.mapping(("flags", "targets", "run_prefix", "cflags", "enabled"))
        flags = _opt(m, "flags", _At.strings, ())
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
        if "--enable-freebsdkm-crypto-register" in flags and set(vt) - set(FREEBSD_TARGETS):
            raise m["targets"].error("--enable-freebsdkm-crypto-register only works on freebsd-kmod"
                                      " and freebsd-kmod-qemu")
        out[name] = VariantConfig(
            name=name,
            flags=flags,
            targets=vt,
            run_prefix=_opt(m, "run_prefix", _At.string, None),
            cflags=_opt(m, "cflags", _At.strings, ()),
            enabled=_opt(m, "enabled", _At.boolean, True),
        )
    if not out:
        raise at.error("no variants")
    return out


def _benchmark(at: _At) -> BenchmarkConfig:
    m = at.mapping(("min_runtime_s", "embedded", "ntimes", "agreetimes", "userspace_args", "extra_cflags",
                    "repeats"))
    d = BenchmarkConfig()
    return BenchmarkConfig(
        min_runtime_s=_opt(m, "min_runtime_s", _At.number, None if "min_runtime_s" in m else d.min_runtime_s),
        embedded=_opt(m, "embedded", _At.boolean, d.embedded),
        ntimes=_opt(m, "ntimes", lambda a: a.integer(minimum=1), None if "ntimes" in m else d.ntimes),
        agreetimes=_opt(
            m, "agreetimes", lambda a: a.integer(minimum=1), None if "agreetimes" in m else d.agreetimes
        ),
        userspace_args=_opt(m, "userspace_args", _At.strings, d.userspace_args),
        extra_cflags=_opt(m, "extra_cflags", _At.strings, ()),
        repeats=_opt(m, "repeats", lambda a: a.integer(minimum=1), d.repeats),
    )


def _timeouts(at: _At) -> dict[str, float]:
    out = dict(DEFAULT_TIMEOUTS)
    for name, v in at.mapping(TIMEOUT_STAGES).items():
        out[name] = v.number(minimum=1.0)
    return out


def _retry(at: _At) -> RetryConfig:
    m = at.mapping(("max_infra_retries", "backoff_s", "infra_patterns", "real_patterns"))
    backoff: tuple[float, ...] = RetryConfig().backoff_s
    if "backoff_s" in m:
        b = m["backoff_s"]
        if not isinstance(b.node, SequenceNode):
            backoff = (b.number(),)
        else:
            backoff = tuple(b.child(n, f"[{i}]").number() for i, n in enumerate(b.node.value))
    pats: dict[str, tuple[str, ...]] = {}
    for key in ("infra_patterns", "real_patterns"):
        pats[key] = _opt(m, key, _At.patterns, ())
        for i, p in enumerate(pats[key]):
            try:
                re.compile(p)
            except re.error as e:
                raise m[key].error(f"[{i}] is not a regular expression: {e}") from None
    return RetryConfig(
        max_infra_retries=_opt(m, "max_infra_retries", _At.integer, 2),
        backoff_s=backoff,
        infra_patterns=pats["infra_patterns"],
        real_patterns=pats["real_patterns"],
    )


def _release(at: _At) -> ReleaseConfig:
    m = at.mapping(("tag_pattern", "freebsd_releases", "arch", "repeats", "software_variant", "previous"))
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
        tag_pattern=_opt(m, "tag_pattern", _At.string, d.tag_pattern),
        freebsd_releases=releases,
        arch=_opt(m, "arch", _At.string, d.arch),
        repeats=_opt(m, "repeats", lambda a: a.integer(minimum=1), d.repeats),
        software_variant=_opt(m, "software_variant", _At.string, d.software_variant),
        previous=_opt(m, "previous", _At.string, None),
    )


RELEASE_NAME = r"\d+\.\d+-(?:RELEASE|BETA\d*|RC\d*|STABLE|CURRENT)"


def _freebsd(at: _At, base: Path) -> FreeBSDConfig:
    m = at.mapping(("kit", "release", "mirror", "arch"))
    kit = _opt(m, "kit", lambda a: _resolve(base, a.string()), None)
    if kit is not None and not kit.is_dir():
        raise m["kit"].error(f"{kit} is not a directory")
    release = _opt(m, "release", _At.string, None)
    if release is not None and not re.fullmatch(RELEASE_NAME, release):
        raise m["release"].error(f"{release!r} is not a FreeBSD release name like 15.0-RELEASE")
    if release is not None and kit is not None:
        raise m["release"].error("give either kit or release, not both")
    mirror = _opt(m, "mirror", _At.string, None)
    if mirror is not None and "://" not in mirror:
        mirror = str(_resolve(base, mirror))
    return FreeBSDConfig(kit=kit, release=release, mirror=mirror, arch=_opt(m, "arch", _At.string, "amd64"))


TOP_KEYS = (
    "source",
    "targets",
    "variants",
    "benchmark",
    "timeouts",
    "jobs",
    "parallel",
    "policy",
    "baseline",
    "retry",
    "cache_dir",
    "workers",
    "github",
    "www",
    "freebsd",
    "release",
)


def parse_config(text: str, source: str = "<config>", base: Path | None = None) -> Config:
    """Parse config text; ``source`` names it in errors, ``base`` anchors relative paths."""
    base = base or Path.cwd()
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        line = e.problem_mark.line + 1 if e.problem_mark else None
        raise ConfigError(source, line, "", f"not valid YAML: {e.problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(source, None, "", f"not valid YAML: {e}") from None
    if root is None:
        raise ConfigError(source, None, "", "the file is empty")
    top = _At(root, "", source)
    m = top.mapping(TOP_KEYS)
    for required in ("targets", "variants"):
        if required not in m:
            raise top.error(f"missing key {required!r}")
    targets = _targets(m["targets"])
    return Config(
        source=_source(m["source"], base) if "source" in m else DebianSource(),
        targets=targets,
        variants=_variants(m["variants"], targets),
        benchmark=_benchmark(m["benchmark"]) if "benchmark" in m else BenchmarkConfig(),
        timeouts=_timeouts(m["timeouts"]) if "timeouts" in m else dict(DEFAULT_TIMEOUTS),
        jobs=_opt(m, "jobs", lambda a: a.integer(minimum=1), 2),
        parallel=_opt(m, "parallel", lambda a: a.integer(minimum=1), 2),
        policy=_opt(m, "policy", lambda a: _resolve(base, a.string()), None),
        baseline=_opt(m, "baseline", lambda a: _resolve(base, a.string()), None),
        retry=_retry(m["retry"]) if "retry" in m else RetryConfig(),
        cache_dir=_opt(m, "cache_dir", lambda a: _resolve(base, a.string()), None),
        workers=_opt(m, "workers", _At.plain, {}),
        github=_opt(m, "github", _At.plain, {}),
        www=_opt(m, "www", _At.plain, {}),
        freebsd=_freebsd(m["freebsd"], base) if "freebsd" in m else FreeBSDConfig(),
        release=_release(m["release"]) if "release" in m else ReleaseConfig(),
        path=Path(source) if source != "<config>" else None,
    )


def load_config(path: str | Path) -> Config:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(p), None, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(str(p), None, "", f"cannot read: {e}") from None
    return parse_config(text, str(p), p.resolve().parent)


def default_config_path() -> Path:
    """The repository's ``bsdkm.yml`` (the main job's configuration), shipped as package data."""
    from .resources import default_config_path as packaged

    return packaged()
