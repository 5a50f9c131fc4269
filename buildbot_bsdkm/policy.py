"""Threshold policy: YAML rules turned into pass/fail checks over run results.

A policy file (see ``policies/default.yml`` for the documented default) holds:

``metric``      ``auto`` (default), ``per_second`` or ``cycles``. ``auto`` gates on throughput
                unless a run's log says its benchmark clock is quantised (the FreeBSD module's
                whole-second timer), in which case the TSC-based cycles are used instead.
``selftests``   every failed wolfCrypt self-test is a failed check (default true).
``complete``    an incomplete log or a failed pipeline stage is an error check (default true).
``required``    benchmarks that must be present (glob patterns) in every run that has a wolfCrypt
                benchmark or kernel log (self-test-only and ``openssl speed`` runs are exempt).
``floors``      absolute minimum throughput (``min`` + ``unit``) or maximum cycles (``max_cycles``).
``regressions`` maximum drop versus a baseline results document, in percent, per item or
                as the geometric mean over every matching item (``aggregate: geomean``).
                ``limit: fixed`` (the default for a rule) fails a drop above ``max_pct``;
                ``limit: learned`` judges every item from all repeats of both sides with a limit
                learned from the measured noise (``buildbot_bsdkm/perf/gate.py``), ``max_pct``
                being a floor below which a drop never fails, and ``detect_pct`` the change the
                item must be able to resolve (else it is ``inconclusive``, reported, not failed).
``perf``        settings of learned limits: ``alpha`` (false alarms per run, all items together),
                ``tail``, ``min_repeats`` (per side; fewer is ``inconclusive``), ``min_history``,
                ``window``, ``prior_dof``, ``power``, ``clock_tolerance`` (see ``policies/default.yml``),
                ``confirm`` (re-measure a regression's base and head before failing, ``perf/confirm.py``).
``speedups``    minimum ratio accelerated / software variant on the same target.
``crossovers``  offload-vs-software comparison across block sizes; reports the crossover block
                size and can require it to be at most ``max_block`` bytes. With ``paths: true`` it
                compares two paths of one run (the lkcapi variant's AF_ALG benchmark, ``offload.py``)
                and can also require ``max_slower_pct`` (never slower than that at any block size).

Every rule takes ``pattern`` (an fnmatch glob over benchmark names) and optionally
``variants`` / ``targets`` to limit where it applies. For item regressions the first rule
whose pattern and scope match a benchmark applies, so list specific patterns before ``*``.
"""

from __future__ import annotations

import fnmatch
import math
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import kernel_health, offload
from .model import RATE_UNITS, BenchKind, Benchmark, LogFormat, LogResult, RunResult
from .perf import clock as perf_clock
from .perf import drift as perf_drift
from .perf import fingerprint as perf_fingerprint
from .perf import gate as perf_gate


def _packaged_default_policy() -> Path:
    """``policies/default.yml`` as package data: found in a checkout and in an installed wheel."""
    from .resources import default_policy_path

    return default_policy_path()


DEFAULT_POLICY_PATH = _packaged_default_policy()

METRICS = ("auto", "per_second", "cycles")
PER_SECOND = "per_second"
CYCLES = "cycles"

KIND_SELFTEST = "selftest"
KIND_COMPLETE = "complete"
KIND_BENCHMARK = "benchmark"  # a benchmark item that printed "Benchmark X failed: <code>"
KIND_FLOOR = "floor"
KIND_REGRESSION = "regression"
KIND_SPEEDUP = "speedup"
KIND_REQUIRED = "required"
KIND_CROSSOVER = "crossover"
NO_CHECKS = "the gate evaluated 0 checks (no results, or a policy that checks nothing): not a pass"


class PolicyError(ValueError):
    """A policy file that cannot be used; the message names file, line and key."""

    def __init__(self, source: str, line: int | None, key: str, problem: str) -> None:
        self.source = source
        self.line = line
        self.key = key
        self.problem = problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {key}: {problem}")


# ---------------------------------------------------------------------------
# Rules


@dataclass(frozen=True)
class Scope:
    """Which runs a rule applies to; empty tuples mean every variant / target."""

    variants: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()

    def covers(self, run: RunResult) -> bool:
        return (not self.variants or run.variant in self.variants) and (
            not self.targets or run.target in self.targets
        )


@dataclass(frozen=True)
class FloorRule:
    pattern: str
    scope: Scope = Scope()
    min_value: float | None = None  # in ``unit``
    unit: str | None = None
    max_cycles: float | None = None


@dataclass(frozen=True)
class RegressionRule:
    pattern: str
    max_pct: float
    scope: Scope = Scope()
    metric: str = "auto"
    aggregate: str = "item"  # "item" or "geomean"
    limit: str = "fixed"  # "fixed": max_pct is the limit; "learned": perf gate, max_pct is a floor
    detect_pct: float | None = None  # learned: an item that cannot resolve this is inconclusive


@dataclass(frozen=True)
class SpeedupRule:
    pattern: str
    accelerated: str
    software: str
    min_ratio: float
    targets: tuple[str, ...] = ()
    metric: str = "auto"


@dataclass(frozen=True)
class RequiredRule:
    pattern: str
    scope: Scope = Scope()


@dataclass(frozen=True)
class CrossoverRule:
    pattern: str
    accelerated: str
    software: str
    targets: tuple[str, ...] = ()
    max_block: int | None = None
    metric: str = "auto"
    paths: bool = False  # accelerated/software name paths inside one run (offload.py), not variants
    max_slower_pct: float | None = None  # paths: accelerated never slower than this at any block size


@dataclass
class Policy:
    source: str = "<default>"
    metric: str = "auto"
    selftests: bool = True
    complete: bool = True
    required: list[RequiredRule] = field(default_factory=list)
    floors: list[FloorRule] = field(default_factory=list)
    regressions: list[RegressionRule] = field(default_factory=list)
    speedups: list[SpeedupRule] = field(default_factory=list)
    crossovers: list[CrossoverRule] = field(default_factory=list)
    kernel: kernel_health.KernelRules = field(default_factory=kernel_health.KernelRules)
    perf: perf_gate.Settings = field(default_factory=perf_gate.Settings)
    clock_tolerance: float = perf_clock.TOLERANCE


# ---------------------------------------------------------------------------
# Checks and the verdict


@dataclass
class Check:
    """One gate applied to one run (``variant`` on ``target``)."""

    variant: str
    target: str
    name: str
    kind: str
    passed: bool
    message: str
    value: float | None = None
    unit: str | None = None
    baseline: float | None = None
    delta_pct: float | None = None
    threshold: float | None = None
    error: bool = False  # the input was unusable (incomplete log, lost stage), not a measured failure
    metric: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    item: int | None = None  # index into the run's ``benchmarks`` when the check is about one item

    @property
    def run_label(self) -> str:
        return f"{self.target}/{self.variant}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        """``to_dict`` back; ValueError naming the problem when ``d`` is not a check."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a check is a mapping, not {type(d).__name__}")
        try:
            return cls(**d)
        except TypeError as e:
            raise ValueError(f"malformed check: {e}") from None


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    policy_source: str = "<default>"
    perf: list[dict[str, Any]] = field(default_factory=list)  # learned-limit gate, one entry per run

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def errors(self) -> list[Check]:
        return [c for c in self.checks if c.error and not c.passed]

    @property
    def regressions(self) -> list[Check]:
        return [c for c in self.failures if c.kind == KIND_REGRESSION]

    def of_kind(self, kind: str) -> list[Check]:
        return [c for c in self.checks if c.kind == kind]

    def summary(self) -> str:
        if self.passed:
            return f"PASS: {len(self.checks)} checks passed"
        kinds = sorted({c.kind for c in self.failures})
        return f"FAIL: {len(self.failures)} of {len(self.checks)} checks failed ({', '.join(kinds)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "summary": self.summary(),
            "policy": self.policy_source,
            "notes": list(self.notes),
            "checks": [c.to_dict() for c in self.checks],
            "perf": list(self.perf),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        """``to_dict`` back (``passed`` and ``summary`` are derived again); ValueError when malformed."""
        if not isinstance(d, Mapping) or not isinstance(d.get("checks"), list):
            raise ValueError("not a verdict document (no 'checks' list)")
        perf = d.get("perf") or []
        if not isinstance(perf, list):
            raise ValueError("verdict 'perf' is not a list")
        return cls(
            checks=[Check.from_dict(c) for c in d["checks"]],
            notes=[str(n) for n in d.get("notes") or []],
            policy_source=str(d.get("policy", "<default>")),
            perf=[dict(p) for p in perf if isinstance(p, Mapping)],
        )


# ---------------------------------------------------------------------------
# Loading: a YAML node walker that keeps line numbers for every error


class _Reader:
    """Turns YAML nodes into typed values, raising PolicyError with the node's line."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._constructor = yaml.constructor.SafeConstructor()

    def fail(self, node: yaml.Node | None, key: str, problem: str) -> PolicyError:
        line = node.start_mark.line + 1 if node is not None else None
        return PolicyError(self.source, line, key, problem)

    def mapping(self, node: yaml.Node, key: str, allowed: Iterable[str]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, key, f"must be a mapping, not {_node_kind(node)}")
        known = set(allowed)
        out: dict[str, yaml.Node] = {}
        for k, v in node.value:
            name = self.construct(k, key)
            if not isinstance(name, str):
                raise self.fail(k, key, f"keys must be strings, not {name!r}")
            path = f"{key}.{name}" if key else name
            if name not in known:
                raise self.fail(k, path, f"unknown key (allowed: {', '.join(sorted(known))})")
            if name in out:
                raise self.fail(k, path, "given twice")
            out[name] = v
        return out

    def sequence(self, node: yaml.Node, key: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, key, f"must be a list, not {_node_kind(node)}")
        return list(node.value)

    def scalar(self, node: yaml.Node, key: str) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            raise self.fail(node, key, f"must be a single value, not {_node_kind(node)}")
        return self.construct(node, key)

    def construct(self, node: yaml.Node, key: str) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.YAMLError as e:  # e.g. a !!python/object tag the safe loader refuses
            problem = getattr(e, "problem", None) or e
            raise self.fail(node, key or "(top level)", f"unusable value: {problem}") from None

    def string(self, node: yaml.Node, key: str) -> str:
        value = self.scalar(node, key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(node, key, f"must be a non-empty string, not {value!r}")
        return value

    def boolean(self, node: yaml.Node, key: str) -> bool:
        value = self.scalar(node, key)
        if not isinstance(value, bool):
            raise self.fail(node, key, f"must be true or false, not {value!r}")
        return value

    def number(self, node: yaml.Node, key: str, *, positive: bool = False) -> float:
        value = self.scalar(node, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise self.fail(node, key, f"must be a number, not {value!r}")
        if value < 0 or (positive and value == 0):
            raise self.fail(node, key, f"must be {'greater than' if positive else 'at least'} 0, not {value}")
        return float(value)

    def integer(self, node: yaml.Node, key: str) -> int:
        value = self.scalar(node, key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(node, key, f"must be a positive whole number, not {value!r}")
        return value

    def choice(self, node: yaml.Node, key: str, choices: Iterable[str]) -> str:
        allowed = tuple(choices)
        value = self.scalar(node, key)
        if value not in allowed:
            raise self.fail(node, key, f"must be one of {', '.join(allowed)}, not {value!r}")
        return str(value)

    def glob(self, node: yaml.Node, key: str) -> str:
        pattern = self.string(node, key)
        problem = glob_problem(pattern)
        if problem:
            raise self.fail(node, key, f"bad glob {pattern!r}: {problem}")
        return pattern

    def names(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        if isinstance(node, yaml.ScalarNode):
            return (self.string(node, key),)
        return tuple(self.string(item, key) for item in self.sequence(node, key))


def _node_kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return f"the value {node.value!r}"


def glob_problem(pattern: str) -> str | None:
    """Why an fnmatch pattern is malformed, or None; fnmatch itself silently accepts anything."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            if pattern[j : j + 1] == "!":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1  # a leading ']' is a member of the set, as in fnmatch
            close = pattern.find("]", j)
            if close == -1:
                return f"'[' at position {i + 1} is never closed"
            i = close
        elif pattern[i] == "]":
            return f"']' at position {i + 1} has no opening '['"
        i += 1
    return None


_TOP_KEYS = ("version", "metric", "selftests", "complete", "required", "floors", "regressions",
             "speedups", "crossovers", "perf")
_TOP_KEYS = (*_TOP_KEYS, "kernel")  # kernel_health.py: the kernel-trouble gate
_SCOPE_KEYS = ("pattern", "variants", "targets")


def _scope(r: _Reader, fields: dict[str, yaml.Node], key: str) -> Scope:
    variants = r.names(fields["variants"], f"{key}.variants") if "variants" in fields else ()
    targets = r.names(fields["targets"], f"{key}.targets") if "targets" in fields else ()
    return Scope(variants, targets)


def _require(r: _Reader, node: yaml.Node, fields: dict[str, yaml.Node], key: str, *names: str) -> None:
    for name in names:
        if name not in fields:
            raise r.fail(node, key, f"missing required key '{name}'")


def _read_required(r: _Reader, node: yaml.Node, key: str) -> RequiredRule:
    if isinstance(node, yaml.ScalarNode):
        return RequiredRule(r.glob(node, key))
    fields = r.mapping(node, key, _SCOPE_KEYS)
    _require(r, node, fields, key, "pattern")
    return RequiredRule(r.glob(fields["pattern"], f"{key}.pattern"), _scope(r, fields, key))


def _read_floor(r: _Reader, node: yaml.Node, key: str) -> FloorRule:
    fields = r.mapping(node, key, (*_SCOPE_KEYS, "min", "unit", "max_cycles"))
    _require(r, node, fields, key, "pattern")
    if ("min" in fields) == ("max_cycles" in fields):
        raise r.fail(node, key, "give exactly one of 'min' (with 'unit') or 'max_cycles'")
    min_value = unit = max_cycles = None
    if "min" in fields:
        _require(r, node, fields, key, "unit")
        min_value = r.number(fields["min"], f"{key}.min")
        unit = r.choice(fields["unit"], f"{key}.unit", RATE_UNITS)
    elif "unit" in fields:
        raise r.fail(fields["unit"], f"{key}.unit", "only goes with 'min'")
    else:
        max_cycles = r.number(fields["max_cycles"], f"{key}.max_cycles", positive=True)
    return FloorRule(r.glob(fields["pattern"], f"{key}.pattern"), _scope(r, fields, key),
                     min_value, unit, max_cycles)


def _read_regression(r: _Reader, node: yaml.Node, key: str) -> RegressionRule:
    fields = r.mapping(node, key, (*_SCOPE_KEYS, "max_pct", "metric", "aggregate", "limit", "detect_pct"))
    _require(r, node, fields, key, "pattern", "max_pct")
    limit = r.choice(fields["limit"], f"{key}.limit", ("fixed", "learned")) if "limit" in fields else "fixed"
    if "detect_pct" in fields and limit != "learned":
        raise r.fail(fields["detect_pct"], f"{key}.detect_pct", "only goes with 'limit: learned'")
    return RegressionRule(
        limit=limit,
        detect_pct=(r.number(fields["detect_pct"], f"{key}.detect_pct", positive=True)
                    if "detect_pct" in fields else None),
        pattern=r.glob(fields["pattern"], f"{key}.pattern"),
        max_pct=r.number(fields["max_pct"], f"{key}.max_pct"),
        scope=_scope(r, fields, key),
        metric=r.choice(fields["metric"], f"{key}.metric", METRICS) if "metric" in fields else "auto",
        aggregate=(r.choice(fields["aggregate"], f"{key}.aggregate", ("item", "geomean"))
                   if "aggregate" in fields else "item"),
    )


def _read_speedup(r: _Reader, node: yaml.Node, key: str) -> SpeedupRule:
    fields = r.mapping(node, key, ("pattern", "accelerated", "software", "min", "targets", "metric"))
    _require(r, node, fields, key, "pattern", "accelerated", "software", "min")
    return SpeedupRule(
        pattern=r.glob(fields["pattern"], f"{key}.pattern"),
        accelerated=r.string(fields["accelerated"], f"{key}.accelerated"),
        software=r.string(fields["software"], f"{key}.software"),
        min_ratio=r.number(fields["min"], f"{key}.min", positive=True),
        targets=r.names(fields["targets"], f"{key}.targets") if "targets" in fields else (),
        metric=r.choice(fields["metric"], f"{key}.metric", METRICS) if "metric" in fields else "auto",
    )


def _read_crossover(r: _Reader, node: yaml.Node, key: str) -> CrossoverRule:
    fields = r.mapping(node, key, ("pattern", "accelerated", "software", "max_block", "targets", "metric",
                                   "paths", "max_slower_pct"))
    _require(r, node, fields, key, "pattern", "accelerated", "software")
    on_paths = "paths" in fields and r.boolean(fields["paths"], f"{key}.paths")
    if "max_slower_pct" in fields and not on_paths:
        raise r.fail(fields["max_slower_pct"], f"{key}.max_slower_pct", "is only understood with paths: true")
    return CrossoverRule(
        paths=r.boolean(fields["paths"], f"{key}.paths") if "paths" in fields else False,
        max_slower_pct=(r.number(fields["max_slower_pct"], f"{key}.max_slower_pct")
                        if "max_slower_pct" in fields else None),
        pattern=r.glob(fields["pattern"], f"{key}.pattern"),
        accelerated=r.string(fields["accelerated"], f"{key}.accelerated"),
        software=r.string(fields["software"], f"{key}.software"),
        targets=r.names(fields["targets"], f"{key}.targets") if "targets" in fields else (),
        max_block=r.integer(fields["max_block"], f"{key}.max_block") if "max_block" in fields else None,
        metric=r.choice(fields["metric"], f"{key}.metric", METRICS) if "metric" in fields else "auto",
    )


def _read_list(r: _Reader, node: yaml.Node, key: str, read: Callable[[_Reader, yaml.Node, str], Any]) -> list:
    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return []
    return [read(r, item, f"{key}[{i}]") for i, item in enumerate(r.sequence(node, key))]


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse policy YAML; PolicyError names the source, line and key of the first problem."""
    r = _Reader(source)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise PolicyError(source, mark.line + 1 if mark else None, "yaml", str(e.problem or e)) from None
    except yaml.YAMLError as e:
        raise PolicyError(source, None, "yaml", str(e)) from None
    if root is None:
        return Policy(source=source)
    if not isinstance(root, yaml.MappingNode):
        raise r.fail(root, "(top level)", f"a policy must be a mapping of keys, not {_node_kind(root)}")
    fields = r.mapping(root, "", _TOP_KEYS)
    if "version" in fields and r.scalar(fields["version"], "version") != 1:
        raise r.fail(fields["version"], "version", "only version 1 is understood")
    policy = Policy(source=source)
    if "metric" in fields:
        policy.metric = r.choice(fields["metric"], "metric", METRICS)
    if "selftests" in fields:
        policy.selftests = r.boolean(fields["selftests"], "selftests")
    if "complete" in fields:
        policy.complete = r.boolean(fields["complete"], "complete")
    readers = {"required": _read_required, "floors": _read_floor, "regressions": _read_regression,
               "speedups": _read_speedup, "crossovers": _read_crossover}
    for key, read in readers.items():
        if key in fields:
            setattr(policy, key, _read_list(r, fields[key], key, read))
    if "kernel" in fields:
        policy.kernel = kernel_health.read_rules(r, fields["kernel"])
    if "perf" in fields:
        _read_perf(r, fields["perf"], policy)
    return policy


_PERF_KEYS = {"alpha": float, "tail": float, "min_repeats": int, "min_history": int, "window": int,
              "prior_dof": float, "power": float, "clock_tolerance": float, "reduce": str, "bootstrap": int,
              "confirm": bool}


def _read_perf(r: _Reader, node: yaml.Node, policy: Policy) -> None:
    fields = r.mapping(node, "perf", _PERF_KEYS)
    values: dict[str, Any] = {}
    for name, kind in _PERF_KEYS.items():
        if name not in fields:
            continue
        key = f"perf.{name}"
        if kind is bool:
            values[name] = r.boolean(fields[name], key)
            continue
        if kind is str:
            values[name] = r.choice(fields[name], key, ("median", "best", "second"))
            continue
        if kind is int:
            values[name] = r.integer(fields[name], key)
            continue
        v = r.number(fields[name], key, positive=name != "prior_dof")
        if name in ("alpha", "power") and not v < 1:
            raise r.fail(fields[name], key, f"must be below 1, not {v:g}")
        values[name] = v
    tolerance = values.pop("clock_tolerance", None)
    if tolerance is not None:
        policy.clock_tolerance = tolerance
    policy.perf = perf_gate.Settings(**values)


def load_policy(path: str | Path | None = None) -> Policy:
    """Read a policy file (the documented default when ``path`` is None)."""
    p = Path(path) if path is not None else DEFAULT_POLICY_PATH
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError(str(p), None, "file", "no such policy file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PolicyError(str(p), None, "file", f"cannot be read: {e}") from None
    return parse_policy(text, str(p))


# ---------------------------------------------------------------------------
# Measurements: which number a gate reads, and how it is shown


@dataclass(frozen=True)
class _Item:
    """A benchmark with the block size it ran at (from the item or its log's header)."""

    bench: Benchmark
    block: int | None
    index: int  # position in RunResult.benchmarks

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.bench.name, self.block)


def _items(run: RunResult) -> list[_Item]:
    pairs = [(b, log) for log in run.logs for b in log.benchmarks]
    return [_Item(b, _block_of(b, log), i) for i, (b, log) in enumerate(pairs)]


def _block_of(b: Benchmark, log: LogResult) -> int | None:
    if b.block_size is not None:
        return b.block_size
    block = log.metadata.get("block_bytes")
    return int(block) if isinstance(block, int | float) and not isinstance(block, bool) else None


def _rate(b: Benchmark) -> float | None:
    if b.failed:
        return None
    if b.per_second > 0:
        return b.per_second
    factor = RATE_UNITS.get(b.unit)
    return b.value * factor if factor and b.value > 0 else None


def measure(b: Benchmark, metric: str) -> float | None:
    """The number a gate compares: normalised rate (higher is better) or cycles (lower is better)."""
    if metric == CYCLES:
        return b.cycles if b.cycles is not None and b.cycles > 0 and not b.failed else None
    return _rate(b)


def display_unit(b: Benchmark, metric: str) -> str:
    if metric == CYCLES:
        return b.cycles_unit or ("cycles/op" if b.kind == BenchKind.ASYMMETRIC else "cycles/byte")
    if b.unit in RATE_UNITS:
        return b.unit
    return "ops/s" if b.kind == BenchKind.ASYMMETRIC else "bytes/s"


def shown(b: Benchmark, metric: str, value: float) -> float:
    """``value`` (normalised) in the unit ``display_unit`` names."""
    if metric == CYCLES:
        return value
    return value / RATE_UNITS[display_unit(b, metric)]


def fmt_num(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _metric_for(rule_metric: str, policy: Policy, *runs: RunResult) -> str:
    metric = rule_metric if rule_metric != "auto" else policy.metric
    if metric != "auto":
        return metric
    return CYCLES if any(r.clock_quantised for r in runs) else PER_SECOND


def _metric_note(metric: str, *runs: RunResult) -> str:
    if metric == CYCLES and any(r.clock_quantised for r in runs):
        return ", gated on cycles: benchmark clock is quantised"
    return ""


def matches(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


# ---------------------------------------------------------------------------
# Evaluation


# Logs in which wolfCrypt's benchmark prints; ``required`` rules apply only to runs with one,
# so a self-test-only run or an ``openssl speed`` run is not blamed for missing wolfCrypt items.
_WOLFCRYPT_BENCH_FORMATS = {LogFormat.WOLFCRYPT_BENCH, LogFormat.WOLFCRYPT_BENCH_CSV,
                            LogFormat.LINUX_KERNEL_LOG, LogFormat.FREEBSD_KERNEL_LOG}


class _Evaluation:
    """Applies one policy to a set of runs (and an optional baseline), collecting checks."""

    def __init__(self, runs: list[RunResult], policy: Policy, baseline: list[RunResult] | None,
                 history: list[RunResult] | None = None) -> None:
        self.runs = runs
        self.policy = policy
        self.baseline = baseline
        self.history = history or []
        self.verdict = Verdict(policy_source=policy.source)

    def run(self) -> Verdict:
        self._note_clocks()
        for run in self.runs:
            if self.policy.complete:
                self._complete(run)
            if self.policy.selftests:
                self._selftests(run)
            self._benchmark_errors(run)
            self._required(run)
            self._floors(run)
            for kc in kernel_health.checks(run, self.policy.kernel):
                self.add(run, **kc)
        if self.policy.regressions:
            self._regressions()
        for rule in self.policy.speedups:
            self._speedup(rule)
        for rule in self.policy.crossovers:
            self._crossover(rule)
        if not self.verdict.checks:  # judging nothing is no evidence of health (an emptied policy)
            self.verdict.checks.append(Check("*", "*", "checks", KIND_REQUIRED, False, NO_CHECKS, error=True))
        return self.verdict

    def add(self, run: RunResult, name: str, kind: str, passed: bool, message: str, **kw: Any) -> None:
        self.verdict.checks.append(Check(run.variant, run.target, name, kind, passed, message, **kw))

    def note(self, text: str) -> None:
        if text not in self.verdict.notes:
            self.verdict.notes.append(text)

    def _note_clocks(self) -> None:
        for run in self.runs:
            if not run.clock_quantised:
                continue
            res = max(log.clock_resolution or 0 for log in run.logs)
            how = ("throughput gates use cycles per byte/op instead"
                   if self.policy.metric == "auto" else f"policy metric is {self.policy.metric}")
            self.note(f"{run.target}/{run.variant}: benchmark clock is quantised ({res:g} s resolution): "
                      f"its throughput under-reports by up to one tick per item; {how}.")

    # -- stages, self-tests ------------------------------------------------

    def _complete(self, run: RunResult) -> None:
        if run.failure is not None:
            f = run.failure
            self.add(run, f"stage:{f.stage}", KIND_COMPLETE, False,
                     f"{f.stage} failed ({f.category}{', ' + f.reason if f.reason else ''}): {f.message}",
                     error=True)
        if not run.logs and run.failure is None:
            self.add(run, "logs", KIND_COMPLETE, False, "no logs were collected for this run", error=True)
        for log in run.logs:
            if log.complete:
                self.add(run, f"complete:{log.source}", KIND_COMPLETE, True, f"{log.source} is complete")
            else:
                reason = log.incomplete_reason or "the log ends before its closing line"
                self.add(run, f"complete:{log.source}", KIND_COMPLETE, False,
                         f"{log.source} is incomplete: {reason}", error=True)

    def _selftests(self, run: RunResult) -> None:
        for log in run.logs:
            for t in log.tests:
                detail = (t.error or "").strip()
                msg = (f"{t.name} self-test passed" if t.passed else
                       f"{t.name} self-test failed{': ' + detail if detail else ''}")
                self.add(run, t.name, KIND_SELFTEST, t.passed, msg,
                         value=float(t.code) if t.code is not None else None)
            if log.selftest_summary is False and not log.failed_tests:
                self.add(run, f"summary:{log.source}", KIND_SELFTEST, False,
                         f"{log.source}: the self-test reported failure without naming an algorithm")
            elif log.selftest_summary is True and not log.tests:
                self.add(run, f"summary:{log.source}", KIND_SELFTEST, True,
                         f"{log.source}: wolfCrypt self-test passed (summary line only)")

    def _benchmark_errors(self, run: RunResult) -> None:
        for i, b in enumerate(run.benchmarks):
            if b.failed:
                self.add(run, b.name, KIND_BENCHMARK, False, f"{b.name}: {b.error}", item=i)

    # -- per-run gates -----------------------------------------------------

    def _required(self, run: RunResult) -> None:
        if not any(log.format in _WOLFCRYPT_BENCH_FORMATS for log in run.logs):
            return
        names = [b.name for b in run.benchmarks]
        for rule in self.policy.required:
            if not rule.scope.covers(run):
                continue
            found = [n for n in names if matches(n, rule.pattern)]
            msg = (f"required benchmark {rule.pattern!r} present ({len(found)} item(s))" if found else
                   f"required benchmark {rule.pattern!r} is missing from {run.target}/{run.variant}")
            self.add(run, f"required:{rule.pattern}", KIND_REQUIRED, bool(found), msg,
                     value=float(len(found)))

    def _floors(self, run: RunResult) -> None:
        for rule in self.policy.floors:
            if not rule.scope.covers(run):
                continue
            for i, b in enumerate(run.benchmarks):
                if matches(b.name, rule.pattern) and not b.failed:
                    self._floor(run, rule, b, i)

    def _floor(self, run: RunResult, rule: FloorRule, b: Benchmark, index: int) -> None:
        if rule.max_cycles is not None:
            v = measure(b, CYCLES)
            unit = display_unit(b, CYCLES)
            if v is None:
                self.add(run, b.name, KIND_FLOOR, False, f"{b.name} has no cycles value to compare with "
                         f"the limit {fmt_num(rule.max_cycles)} {unit}", threshold=rule.max_cycles, unit=unit,
                         item=index)
                return
            ok = v <= rule.max_cycles
            word = "within" if ok else "above"
            self.add(run, b.name, KIND_FLOOR, ok,
                     f"{b.name} {fmt_num(v)} {unit} is {word} the limit {fmt_num(rule.max_cycles)} {unit}",
                     value=v, unit=unit, threshold=rule.max_cycles, metric=CYCLES, item=index)
            return
        assert rule.min_value is not None and rule.unit is not None
        rate = measure(b, PER_SECOND)
        if rate is None:
            return
        v = rate / RATE_UNITS[rule.unit]
        ok = v >= rule.min_value
        note = _metric_note(CYCLES, run) if run.clock_quantised else ""
        self.add(run, b.name, KIND_FLOOR, ok,
                 f"{b.name} {fmt_num(v)} {rule.unit} is {'at or above' if ok else 'below'} the floor "
                 f"{fmt_num(rule.min_value)} {rule.unit}"
                 + (" (throughput of a clock-quantised run under-reports)" if note else ""),
                 value=v, unit=rule.unit, threshold=rule.min_value, metric=PER_SECOND, item=index)

    # -- regressions against a baseline --------------------------------------

    def _regressions(self) -> None:
        if any(r.limit == "learned" for r in self.policy.regressions):
            self._learned_regressions()
        if not any(r.limit == "fixed" for r in self.policy.regressions):
            return
        if self.baseline is None:
            self.note("no baseline given: regression gates were not evaluated")
            return
        for run in self.runs:
            base = _baseline_values(self.baseline, run)
            if base is None:
                self.note(f"{run.target}/{run.variant}: not in the baseline; regression gates skipped")
                continue
            self._item_regressions(run, base)
            for rule in self.policy.regressions:
                if rule.aggregate == "geomean" and rule.limit == "fixed" and rule.scope.covers(run):
                    self._geomean_regression(run, rule, base)

    def _learned_regressions(self) -> None:
        groups: dict[tuple[str, str], list[RunResult]] = {}
        for run in self.runs:
            groups.setdefault((run.target, run.variant), []).append(run)
        for (target, variant), heads in groups.items():
            same = [r for r in self.baseline or [] if (r.target, r.variant) == (target, variant)]
            hist = [r for r in self.history if (r.target, r.variant) == (target, variant)]
            _LearnedGate(self, heads, same, hist).run()

    def _item_regressions(self, run: RunResult, base: _Baseline) -> None:
        item_rules = [r for r in self.policy.regressions
                      if r.aggregate == "item" and r.limit == "fixed" and r.scope.covers(run)]
        rule_of: dict[str, RegressionRule | None] = {}  # pattern matching once per distinct name
        for item in _items(run):
            name = item.bench.name
            if name not in rule_of:
                rule_of[name] = next((r for r in item_rules if matches(name, r.pattern)), None)
            rule = rule_of[name]
            if rule is None or item.bench.failed or not base.has(item.key):
                continue
            self._item_regression(run, rule, item, base)

    def _item_regression(self, run: RunResult, rule: RegressionRule, item: _Item, base: _Baseline) -> None:
        metric = _metric_for(rule.metric, self.policy, run)
        b = item.bench
        head = measure(b, metric)
        before = base.median(item.key, metric)
        if head is None or before is None:
            self.note(f"{run.target}/{run.variant}: {b.name} has no {metric} value in the run or the "
                      "baseline; its regression gate was not evaluated")
            return
        delta = (head - before) / before * 100.0
        worse = -delta if metric == PER_SECOND else delta
        ok = worse <= rule.max_pct
        unit = display_unit(b, metric)
        direction = "below" if delta < 0 else "above"
        msg = (f"{b.name} {fmt_num(shown(b, metric, head))} {unit} is {abs(delta):.1f}% {direction} "
               f"baseline {fmt_num(shown(b, metric, before))} {unit} "
               f"(limit {rule.max_pct:g}%{_metric_note(metric, run)})")
        self.add(run, b.name, KIND_REGRESSION, ok, msg, value=shown(b, metric, head), unit=unit,
                 baseline=shown(b, metric, before), delta_pct=round(delta, 2), threshold=rule.max_pct,
                 metric=metric, item=item.index)

    def _geomean_regression(self, run: RunResult, rule: RegressionRule, base: _Baseline) -> None:
        metric = _metric_for(rule.metric, self.policy, run)
        logs = []
        for item in _items(run):
            if not matches(item.bench.name, rule.pattern) or not base.has(item.key):
                continue
            head = measure(item.bench, metric)
            before = base.median(item.key, metric)
            if head is not None and before is not None:
                logs.append(math.log(head / before))
        if not logs:
            return
        change = (math.exp(sum(logs) / len(logs)) - 1.0) * 100.0
        worse = -change if metric == PER_SECOND else change
        ok = worse <= rule.max_pct
        what = "throughput" if metric == PER_SECOND else "cycles"
        msg = (f"geometric mean {what} of {len(logs)} items matching {rule.pattern!r} is "
               f"{abs(change):.1f}% {'below' if change < 0 else 'above'} baseline "
               f"(limit {rule.max_pct:g}%{_metric_note(metric, run)})")
        self.add(run, f"geomean:{rule.pattern}", KIND_REGRESSION, ok, msg, value=round(change, 2), unit="%",
                 delta_pct=round(change, 2), threshold=rule.max_pct, metric=metric,
                 detail={"items": len(logs)})

    # -- comparisons between two variants --------------------------------------

    def _pairs(self, accelerated: str, software: str, targets: tuple[str, ...]) -> Iterator[
            tuple[RunResult, RunResult]]:
        for acc in self.runs:
            if acc.variant != accelerated or (targets and acc.target not in targets):
                continue
            sw = next((r for r in self.runs if r.variant == software and r.target == acc.target), None)
            if sw is None:
                self.note(f"{acc.target}: no {software} run to compare {accelerated} with")
                continue
            yield acc, sw

    def _speedup(self, rule: SpeedupRule) -> None:
        for acc, sw in self._pairs(rule.accelerated, rule.software, rule.targets):
            metric = _metric_for(rule.metric, self.policy, acc, sw)
            soft = {i.key: i.bench for i in _items(sw)}
            compared = 0
            for item in _items(acc):
                if matches(item.bench.name, rule.pattern) and item.key in soft:
                    compared += self._speedup_check(rule, acc, sw, metric, item, soft[item.key])
            if not compared:
                self.note(f"{acc.target}: no benchmark matching {rule.pattern!r} in both "
                          f"{rule.accelerated} and {rule.software}")

    def _speedup_check(self, rule: SpeedupRule, acc: RunResult, sw: RunResult, metric: str,
                       item: _Item, slow: Benchmark) -> int:
        fast = item.bench
        a, s = measure(fast, metric), measure(slow, metric)
        if a is None or s is None:
            return 0
        ratio = a / s if metric == PER_SECOND else s / a
        ok = ratio >= rule.min_ratio
        msg = (f"{fast.name} {rule.accelerated} is {ratio:.2f}x {rule.software} "
               f"({fmt_num(shown(fast, metric, a))} vs {fmt_num(shown(fast, metric, s))} "
               f"{display_unit(fast, metric)}; minimum {rule.min_ratio:g}x{_metric_note(metric, acc, sw)})")
        self.add(acc, fast.name, KIND_SPEEDUP, ok, msg, value=round(ratio, 3), unit="x",
                 threshold=rule.min_ratio, metric=metric,
                 detail={"software": rule.software, "accelerated_value": shown(fast, metric, a),
                         "software_value": shown(fast, metric, s), "value_unit": display_unit(fast, metric)},
                 item=item.index)
        return 1

    def _crossover(self, rule: CrossoverRule) -> None:
        if rule.paths:  # paths of one run (the AF_ALG benchmark), see offload.py
            offload.evaluate_paths(self, rule)
            return
        for acc, sw in self._pairs(rule.accelerated, rule.software, rule.targets):
            metric = _metric_for(rule.metric, self.policy, acc, sw)
            # one block size says nothing about where the lines cross
            series = {f: r for f, r in _ratio_series(acc, sw, rule.pattern, metric).items() if len(r) > 1}
            if not series:
                self.note(f"{acc.target}: no benchmark matching {rule.pattern!r} ran at two or more block "
                          f"sizes in both {rule.accelerated} and {rule.software}")
            for family, ratios in sorted(series.items()):
                self._crossover_check(rule, acc, metric, family, ratios)

    def _crossover_check(self, rule: CrossoverRule, acc: RunResult, metric: str, family: str,
                         ratios: dict[int, float]) -> None:
        point = crossover_block(ratios)
        where = "never" if point is None else f"{point} bytes"
        ok = rule.max_block is None or (point is not None and point <= rule.max_block)
        steps = ", ".join(f"{size}: {ratio:.2f}x" for size, ratio in sorted(ratios.items()))
        limit = "" if rule.max_block is None else f"; limit {rule.max_block} bytes"
        msg = (f"{family}: {rule.accelerated} vs {rule.software} crossover {where} ({steps}{limit}"
               f"{_metric_note(metric, acc)})")
        self.add(acc, family, KIND_CROSSOVER, ok, msg, value=float(point) if point is not None else None,
                 unit="bytes", threshold=float(rule.max_block) if rule.max_block else None, metric=metric,
                 detail={"software": rule.software, "crossover": point if point is not None else "never",
                         "ratios": {str(k): round(v, 3) for k, v in sorted(ratios.items())}})


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


class _Baseline:
    """Baseline items of one (target, variant); repeats of an item are reduced to their median."""

    def __init__(self, runs: list[RunResult]) -> None:
        self._items: dict[tuple[str, int | None], list[Benchmark]] = {}
        for r in runs:
            for item in _items(r):
                self._items.setdefault(item.key, []).append(item.bench)
        self._medians: dict[tuple[tuple[str, int | None], str], float | None] = {}

    def has(self, key: tuple[str, int | None]) -> bool:
        return key in self._items

    def median(self, key: tuple[str, int | None], metric: str) -> float | None:
        cached = (key, metric)
        if cached not in self._medians:
            self._medians[cached] = _median([measure(b, metric) for b in self._items[key]])
        return self._medians[cached]


def _baseline_values(baseline: list[RunResult], run: RunResult) -> _Baseline | None:
    same = [r for r in baseline if r.target == run.target and r.variant == run.variant]
    return _Baseline(same) if same else None


_BLOCK_SUFFIX = re.compile(r"@\d+$")


def _ratio_series(acc: RunResult, sw: RunResult, pattern: str, metric: str) -> dict[str, dict[int, float]]:
    """family -> {block size: accelerated/software speed ratio} for items run at known block sizes."""
    soft = {(_BLOCK_SUFFIX.sub("", i.bench.name), i.block): i.bench for i in _items(sw) if i.block}
    out: dict[str, dict[int, float]] = {}
    for item in _items(acc):
        if item.block is None or not matches(item.bench.name, pattern):
            continue
        family = _BLOCK_SUFFIX.sub("", item.bench.name)
        other = soft.get((family, item.block))
        a = measure(item.bench, metric)
        s = measure(other, metric) if other is not None else None
        if a is None or s is None:
            continue
        out.setdefault(family, {})[item.block] = a / s if metric == PER_SECOND else s / a
    return out


def crossover_block(ratios: dict[int, float]) -> int | None:
    """Smallest block size from which the accelerated side is faster at every larger size; None = never."""
    point = None
    for size in sorted(ratios, reverse=True):
        if ratios[size] <= 1.0:
            break
        point = size
    return point


def evaluate(runs: list[RunResult], policy: Policy, baseline: list[RunResult] | None = None,
             history: list[RunResult] | None = None) -> Verdict:
    """Every check the policy asks for, over ``runs`` (and ``baseline`` for regression gates).

    Runs (and baseline runs) of one (target, variant) are repeats of one measurement, as is every
    benchmark log within a run. ``history``: healthy past runs of the same machine; learned-limit
    rules learn each item's spread from it, and use it as the base when ``baseline`` has no run.
    """
    return _Evaluation(runs, policy, baseline, history).run()


# ---------------------------------------------------------------------------
# Learned limits: results documents -> repeats for perf.gate, its verdicts -> checks


def bench_logs(runs: Iterable[RunResult]) -> list[LogResult]:
    """Every log with benchmark items: one repeat each."""
    return [log for run in runs for log in run.logs if log.benchmarks]


def fingerprint_problem(base: list[RunResult], head: list[RunResult]) -> str | None:
    """Why ``base`` must not be compared with ``head`` (different machine fingerprints), or None."""
    ids = {(r.target, r.variant): perf_fingerprint.of_run(r.metadata) for r in head}
    for r in base:
        want = ids.get((r.target, r.variant))
        got = perf_fingerprint.of_run(r.metadata)
        if want and got and want != got:
            fields = perf_fingerprint.differences(r.metadata["fingerprint"], next(
                h.metadata["fingerprint"] for h in head if (h.target, h.variant) == (r.target, r.variant)))
            return (f"{r.target}/{r.variant}: the baseline was measured on another machine fingerprint "
                    f"({got} vs {want}; differs in {', '.join(fields) or 'id'}): not comparable")
    return None


def same_machine(history: list[RunResult], head: list[RunResult]) -> tuple[list[RunResult], list[str]]:
    """History runs of the heads' fingerprints, and a note per run left out for another fingerprint."""
    ids = {(r.target, r.variant): perf_fingerprint.of_run(r.metadata) for r in head}
    kept: list[RunResult] = []
    refused: dict[tuple[str, str, str, str], int] = {}
    for r in history:
        want = ids.get((r.target, r.variant))
        got = perf_fingerprint.of_run(r.metadata)
        if want and got and want != got:
            key = (r.target, r.variant, got, want)
            refused[key] = refused.get(key, 0) + 1
            continue
        kept.append(r)
    notes = [f"{t}/{v}: {n} history run(s) left out: machine fingerprint {got} is not this run's {want}"
             for (t, v, got, want), n in refused.items()]
    return kept, notes


class _LearnedGate:
    """One (target, variant): every repeat of head and base (or history) through perf.gate."""

    def __init__(self, ev: _Evaluation, heads: list[RunResult], base: list[RunResult],
                 history: list[RunResult]) -> None:
        self.ev, self.heads, self.base, self.history = ev, heads, base, history
        self.run0 = heads[0]
        self.label = f"{self.run0.target}/{self.run0.variant}"
        rules = [r for r in ev.policy.regressions if r.limit == "learned" and r.scope.covers(self.run0)]
        self.item_rules = [r for r in rules if r.aggregate == "item"]
        self.geo_rule = next((r for r in rules if r.aggregate == "geomean"), None)
        self.metric = _metric_for(self.item_rules[0].metric if self.item_rules else "auto", ev.policy, *heads)

    def _rule(self, name: str) -> RegressionRule | None:
        return next((r for r in self.item_rules if matches(name, r.pattern)), None)

    def _clock(self, logs: list[LogResult]) -> list[perf_clock.ClockReport]:
        tolerance = self.ev.policy.clock_tolerance
        return [perf_clock.check_log([perf_clock.Timed(b.name, _rate(b) or 0.0, b.cycles)
                                      for b in log.benchmarks if not b.failed], tolerance)
                for log in logs]

    def _repeats(self, logs: list[LogResult], mis_timed: set[str]) -> list[dict[perf_gate.Key, float]]:
        out = []
        for log in logs:
            rep: dict[perf_gate.Key, float] = {}
            for b in log.benchmarks:
                rule = self._rule(b.name)
                if rule is None or b.failed:
                    continue
                metric = (CYCLES if b.name in mis_timed
                          else _metric_for(rule.metric, self.ev.policy, *self.heads))
                v = measure(b, metric)
                if v is not None:
                    rep[(b.name, _block_of(b, log))] = v if metric == PER_SECOND else 1.0 / v
            out.append(rep)
        return out

    def run(self) -> None:
        ev = self.ev
        if not self.item_rules and self.geo_rule is None:
            return
        problem = fingerprint_problem(self.base, self.heads)
        if problem:
            ev.add(self.run0, "fingerprint", KIND_REGRESSION, False, problem, error=True)
            return
        history, left_out = same_machine(self.history, self.heads)
        for n in left_out:
            ev.note(n)
        head_logs, base_logs, hist_logs = bench_logs(self.heads), bench_logs(self.base), bench_logs(history)
        if not head_logs:
            return
        settings = ev.policy.perf
        from_history = not base_logs
        if from_history:
            if not hist_logs:
                ev.note(f"{self.label}: no baseline and no history: learned regression gates not evaluated")
                return
            base_logs = hist_logs[-settings.window:]
            ev.note(f"{self.label}: no base build; compared with a window of {len(base_logs)} "
                    "history repeat(s)")
        head_clock, base_clock = self._clock(head_logs), self._clock(base_logs)
        mis_timed: dict[str, float] = {}
        for rep in [*head_clock, *base_clock]:
            for name in rep.mis_timed:
                mis_timed[name] = rep.deviation(name) or 0.0
        for name, dev in sorted(mis_timed.items()):
            ev.note(f"{self.label}: {name} is mis-timed: its implied clock (rate x cycles) is "
                    f"{dev * 100:+.0f}% off the run's median; gated on cycles")
        clock_diff = perf_clock.side_mismatch([c.clock_hz for c in base_clock if c.clock_hz],
                                              [c.clock_hz for c in head_clock if c.clock_hz])
        if clock_diff is not None:
            ev.note(f"{self.label}: base and head implied clocks differ by {clock_diff * 100:+.1f}% "
                    "(frequency scaling between the sides?): throughput changes may be the clock's")
        names = set(mis_timed)
        try:
            result = perf_gate.compare(
                self._repeats(base_logs, names), self._repeats(head_logs, names),
                [] if from_history else self._repeats(hist_logs, names),
                rule_for=self._item_rule, geomean_rule=self._geo_item_rule(), settings=settings,
                in_geomean=(lambda n: matches(n, self.geo_rule.pattern)) if self.geo_rule else None)
        except perf_gate.PerfInputError as e:
            ev.add(self.run0, "perf-input", KIND_REGRESSION, False, f"{self.label}: {e}", error=True)
            return
        self._checks(result, names)
        trend = self._trend(history[-settings.window:], result, names)
        ev.verdict.perf.append({
            "trend": trend,
            "target": self.run0.target, "variant": self.run0.variant, "verdict": result.verdict,
            "family": result.family, "z": round(result.z, 3), "alpha": settings.alpha, "metric": self.metric,
            "base_from": "history" if from_history else "baseline",
            "clock": {"base_hz": _med([c.clock_hz for c in base_clock]),
                      "head_hz": _med([c.clock_hz for c in head_clock]),
                      "mismatch": clock_diff, "mis_timed": sorted(names)},
            "items": [_item_json(r, self.run0, names) for r in result.items],
            "geomean": _item_json(result.geomean, self.run0, names) if result.geomean else None,
        })
        bad = [r.name for r in result.items if r.verdict == perf_gate.INCONCLUSIVE]
        if result.geomean and result.geomean.verdict == perf_gate.INCONCLUSIVE:
            bad.append("geomean")
        if bad:
            shown_names = ", ".join(bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
            ev.note(f"{self.label}: {len(bad)} item(s) inconclusive (not judged, not passed): {shown_names}")

    def _trend(self, history: list[RunResult], result: perf_gate.GateResult,
               mis_timed: set[str]) -> dict[str, Any]:
        """Per item: the best value of each history run (oldest first), this run's, and any drift."""
        if not history:
            return {}
        out: dict[str, Any] = {}
        for r in result.items:
            points = []
            for i, run in enumerate(history):
                reps = self._repeats(bench_logs([run]), mis_timed)
                values = [rep[(r.name, r.block)] for rep in reps if (r.name, r.block) in rep]
                if values:
                    commit = str(run.metadata.get("source_commit") or f"#{i + 1}")
                    points.append((commit[:12], max(values)))
            if len(points) < 2 or r.head_median is None:
                continue
            found = perf_drift.detect(points)
            out[r.name] = {"points": [[c, round(v, 6)] for c, v in points], "head": round(r.head_median, 6),
                           "verdict": r.verdict, "cycles": r.name in mis_timed,
                           "drift": ({"commit": found[-1].commit, "index": found[-1].index,
                                      "change": round(found[-1].change, 4)} if found else None)}
        return out

    def _item_rule(self, name: str) -> perf_gate.ItemRule | None:
        rule = self._rule(name)
        return None if rule is None else perf_gate.ItemRule(rule.max_pct, rule.detect_pct)

    def _geo_item_rule(self) -> perf_gate.ItemRule | None:
        g = self.geo_rule
        return None if g is None else perf_gate.ItemRule(g.max_pct, g.detect_pct)

    def _checks(self, result: perf_gate.GateResult, mis_timed: set[str]) -> None:
        index = {item.key: item for item in _items(self.run0)}
        for r in [*result.items, *([result.geomean] if result.geomean else [])]:
            item = index.get((r.name, r.block))
            b = item.bench if item else None
            metric = CYCLES if r.name in mis_timed else self.metric
            geo = r.name == perf_gate.GEOMEAN and self.geo_rule is not None
            name = f"geomean:{self.geo_rule.pattern}" if geo and self.geo_rule else r.name
            unit = display_unit(b, metric) if b is not None else "%"
            value = baseline = None
            if b is not None and r.head_median is not None and r.base_median is not None:
                hv, bv = (r.head_median, r.base_median) if metric == PER_SECOND else (
                    1.0 / r.head_median, 1.0 / r.base_median)
                value, baseline = shown(b, metric, hv), shown(b, metric, bv)
            elif geo and r.change is not None:
                value = round(r.change * 100, 2)
            self.ev.add(self.run0, name, KIND_REGRESSION, r.verdict != perf_gate.REGRESSION,
                        perf_message(name, r, metric), value=value, unit=unit, baseline=baseline,
                        delta_pct=round(r.change * 100, 2) if r.change is not None else None,
                        threshold=round(r.limit * 100, 2) if r.limit is not None else None, metric=metric,
                        detail={"verdict": r.verdict, "learned": True, **_item_json(r, self.run0, mis_timed)},
                        item=item.index if item else None)


def _med(values: list[float | None]) -> float | None:
    m = _median(values)
    return round(m) if m is not None else None


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x * 100:+.1f}%"


def perf_message(name: str, r: perf_gate.ItemResult, metric: str) -> str:
    """One line a human reads: change, interval, limit, minimum detectable change, verdict."""
    what = " (cycles)" if metric == CYCLES else ""
    if r.change is None:
        return f"{name}: {r.verdict}: {r.reason}"
    if r.limit is None:
        return (f"{name}{what}: {_pct(r.change)} over {r.n_base} vs {r.n_head} repeats: "
                f"{r.verdict}: {r.reason}")
    text = (f"{name}{what}: {_pct(r.change)} (interval {_pct(r.ci_low)} .. {_pct(r.ci_high)}; "
            f"limit -{r.limit * 100:.1f}%, min detectable {r.min_detectable * 100:.1f}%; "
            f"{r.n_base} vs {r.n_head} repeats): {r.verdict}")
    return text + (f": {r.reason}" if r.reason else "")


def _item_json(r: perf_gate.ItemResult, run: RunResult, mis_timed: set[str]) -> dict[str, Any]:
    """The per-item fields of the ``compare --json`` contract (relative numbers, throughput sense)."""
    def rnd(x: float | None) -> float | None:
        return None if x is None else round(x, 5)

    return {"name": r.name, "block": r.block, "target": run.target, "variant": run.variant,
            "change": rnd(r.change), "ci_low": rnd(r.ci_low), "ci_high": rnd(r.ci_high),
            "limit": rnd(r.limit),
            "min_detectable": rnd(r.min_detectable), "n_base": r.n_base, "n_head": r.n_head,
            "verdict": r.verdict, "reason": r.reason, "se": rnd(r.se), "noise_from": r.sigma_from,
            "mis_timed": r.name in mis_timed}
