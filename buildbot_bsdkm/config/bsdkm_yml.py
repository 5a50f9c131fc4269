"""``bsdkm.yml`` → a typed, validated ``Config``.

Every error names the file, the line and the dotted key that is wrong, because
the person reading it is usually looking at a CI log, not at the file.
Relative paths in the file are taken relative to the file's directory. Each target's own options
are read here too, into the dataclass the target declares (``target_options.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yaml.nodes import ScalarNode, SequenceNode

from ..support.resources import default_config_path as packaged_config_path
from ..support.yaml_reader import At, LocatedDict, LocatedError, compose, file_path, opt, read_text
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
)
from ..targets import freebsd_names, registered
from ..triage.known import KNOWN_ISSUES, KnownIssues, read_known_issues
from .master import MASTER, MasterListen, read_master

# Sources are ``sources.py``'s; those imported ``as`` themselves are named here for this module's importers.
from .sources import DEFAULT_MIRROR as DEFAULT_MIRROR
from .sources import SOURCE, DebianSource, SourceSpec, read_source
from .sources import GitSource as GitSource
from .sources import LocalSource as LocalSource
from .sources import TarballSource as TarballSource
from .sources import usable_git_ref as usable_git_ref
from .target_options import COMMON, owned_sections, read_options, target_keys
from .workers import WORKERS

# The stages a ``timeouts:`` key may name (DEFAULT_TIMEOUTS); pipeline/stages.STAGES are the CLI's.
TIMEOUT_STAGES = ("fetch", "configure", "build", "load", "selftest", "benchmark", "unload", "collect")
DEFAULT_CONSOLE_CAP_MIB = 64.0


class ConfigError(LocatedError):
    """A config that cannot be used; ``str()`` is ``file:line: key: problem``."""


@dataclass(frozen=True)
class TargetConfig:
    """``targets.<name>``'s keys every target takes (its own options: ``Config.target_options``)."""

    name: str
    flags: tuple[str, ...]  # configure flags every variant gets on this target
    make_args: tuple[str, ...] = ()
    bench_cflags: tuple[str, ...] = ()  # the target's own benchmark CFLAGS (shorter work under TCG)
    bench_skipped: str | None = None  # what those leave out, said in the reports


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
    # policy's ``perf.resolve_pct``; perf/extend.py): as many again each time. ``repeats``: never.
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
    # Every registered target's options (its ``options_type``), read with the file: ``Target.options``
    target_options: dict[str, Any] = field(default_factory=dict)
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
        own = self.targets[target].bench_cflags if target in self.targets else ()
        return self.benchmark.cflags() + list(own) + list(self.variants[variant].cflags)


# --------------------------------------------------------------------------- YAML walking


def _patterns(at: At) -> tuple[str, ...]:
    """Like ``At.strings`` but a lone string stays whole (regexes contain spaces)."""
    if isinstance(at.node, ScalarNode):
        return (at.string(),)
    return at.strings()


# --------------------------------------------------------------------------- what each section accepts
# The tables the loader reads each section with (allowed keys, each value's reader) and that
# ``json_schema`` turns into the JSON Schema editors check bsdkm.yml with.

_VARIANT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
# Configure flags start with "--": a list of them, or one string of them.
_FLAG: Schema = {"type": "string", "pattern": r"^--"}
_FLAGS = Kind({"anyOf": [{"type": "string", "pattern": r"^\s*--\S*(\s+--\S*)*\s*$"},
                         {"type": "array", "items": _FLAG}]}, At.strings)
_PATTERNS = Kind(STRINGS.schema, _patterns)  # regular expressions: a lone one stays whole
_SCALAR: Schema = {"type": ["string", "number"]}  # as written: 5.10 is a version, not a float

# Each target's keys are ``COMMON`` and its own (``target_options``); the registered targets are read
# when a file is, never at import, so ``json_schema`` lists the names and each one's keys.
TARGETS = Section(each=Kind(nullable(COMMON.schema())))
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
    "release": RELEASE.kind(),
    "known_issues": KNOWN_ISSUES,
    "console_cap_mib": MEBIBYTES,
}, required=("targets", "variants"))


def top_keys() -> tuple[str, ...]:
    """The keys a ``bsdkm.yml`` may have: the core's, then the sections targets own (``freebsd``)."""
    return (*CONFIG.keys, *owned_sections(registered(), CONFIG.keys))


# --------------------------------------------------------------------------- sections


def _targets(at: At, base: Path, top: dict[str, At]) -> tuple[dict[str, TargetConfig], dict[str, Any]]:
    """``targets:``, and every registered target's options: its keys there, and the section it owns."""
    known = registered()
    out, given = {}, {}
    for name, t in TARGETS.mapping(at).items():
        if name not in known:
            raise t.name_error(f"unknown target (known: {', '.join(known)})")
        m = {} if t.is_null() else target_keys(known[name].options_type).mapping(t)
        out[name] = TargetConfig(name=name, flags=COMMON.get(m, "flags", ()),
                                 make_args=COMMON.get(m, "make_args", ()),
                                 bench_cflags=COMMON.get(m, "bench_cflags", ()),
                                 bench_skipped=COMMON.get(m, "bench_skipped", None))
        given[name] = m
    options = {name: read_options(t.options_type, given.get(name, {}), base, top)
               for name, t in known.items()}
    return out, options


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
        if "--enable-freebsdkm-crypto-register" in flags and set(vt) - set(freebsd_names()):
            raise m["targets"].error("--enable-freebsdkm-crypto-register only works on "
                                     + " and ".join(freebsd_names()))
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


def parse_config(text: str, source: str = "<config>", base: Path | None = None) -> Config:
    """Parse config text; ``source`` names it in errors, ``base`` anchors relative paths."""
    base = base or Path.cwd()
    root = compose(text, source, ConfigError)
    if root is None:
        raise ConfigError(source, None, "", "the file is empty")
    top = At.root(root, source, ConfigError)
    m = top.mapping(top_keys())
    top.require(m, *CONFIG.required)
    targets, options = _targets(m["targets"], base, m)
    return Config(
        source=read_source(m["source"], base) if "source" in m else DebianSource(),
        targets=targets,
        target_options=options,
        variants=_variants(m["variants"], targets),
        benchmark=_benchmark(m["benchmark"]) if "benchmark" in m else BenchmarkConfig(),
        timeouts=_timeouts(m["timeouts"]) if "timeouts" in m else dict(DEFAULT_TIMEOUTS),
        jobs=CONFIG.get(m, "jobs", 2),
        parallel=CONFIG.get(m, "parallel", 2),
        policy=opt(m, "policy", lambda a: file_path(base, a.string()), None),
        baseline=opt(m, "baseline", lambda a: file_path(base, a.string()), None),
        retry=_retry(m["retry"]) if "retry" in m else RetryConfig(),
        cache_dir=opt(m, "cache_dir", lambda a: file_path(base, a.string()), None),
        workers=opt(m, "workers", At.located, LocatedDict(file=source, key="workers")),
        github=opt(m, "github", At.located, LocatedDict(file=source, key="github")),
        www=opt(m, "www", At.located, {}),  # located: www_security names file:line
        master=opt(m, "master", read_master, MasterListen()),
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
