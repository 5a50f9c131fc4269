"""The rules of a policy file and their loading (``file:line: key: problem`` errors, ``yaml_reader``).

The schema is described in ``policy/__init__.py`` and ``policies/default.yml``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yaml.nodes import MappingNode, ScalarNode

from ..model import RATE_UNITS, RunResult
from ..perf import clock as perf_clock
from ..perf import gate as perf_gate
from ..support.resources import default_policy_path
from ..support.yaml_reader import At, LocatedError, compose, node_kind, read_text
from ..triage.policy_section import TriageRules
from ..triage.policy_section import read_rules as read_triage_rules
from . import kernel_health
from .bisect_settings import BisectPolicy, read_bisect_settings
from .instruction_settings import INSTRUCTIONS, InstructionSettings, read_instruction_settings

DEFAULT_POLICY_PATH = default_policy_path()  # policies/default.yml as package data (checkout or wheel)

METRICS = ("auto", "per_second", "cycles")
PER_SECOND = "per_second"
CYCLES = "cycles"


class PolicyError(LocatedError):
    """A policy file that cannot be used; the message names file, line and key."""

    TOP = "(top level)"
    FILE_KEY = "file"
    NOT_FOUND = "no such policy file"


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
    paths: bool = False  # accelerated/software name paths in one run (report/offload_paths.py), not variants
    max_slower_pct: float | None = None  # paths: accelerated never slower than this at any block size


@dataclass
class Policy:
    source: str = "<default>"
    # How reports name it (``policy_label``): never a path of the machine that judged.
    label: str = ""
    metric: str = "auto"
    selftests: bool = True
    complete: bool = True
    required: list[RequiredRule] = field(default_factory=list)
    floors: list[FloorRule] = field(default_factory=list)
    regressions: list[RegressionRule] = field(default_factory=list)
    speedups: list[SpeedupRule] = field(default_factory=list)
    crossovers: list[CrossoverRule] = field(default_factory=list)
    kernel: kernel_health.KernelRules = field(default_factory=kernel_health.KernelRules)
    # Which triaged failures fail (triage/policy_section.py).
    triage: TriageRules = field(default_factory=TriageRules)
    perf: perf_gate.Settings = field(default_factory=perf_gate.Settings)
    clock_tolerance: float = perf_clock.TOLERANCE
    instructions: InstructionSettings = field(default_factory=InstructionSettings)  # the counted workload
    bisect: BisectPolicy = field(default_factory=BisectPolicy)  # evidence bsdkm-ci bisect needs
    inconclusive: str = "pass"  # perf.inconclusive: "fail" makes unjudged gated items fail the exit status

# ---------------------------------------------------------------------------
# Loading


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
             "speedups", "crossovers", "perf", "kernel", "instructions", "bisect",
             "triage")  # kernel: kernel_health.py's gate
_SCOPE_KEYS = ("pattern", "variants", "targets")


def _glob(at: At) -> str:
    pattern = at.string()
    problem = glob_problem(pattern)
    if problem:
        raise at.error(f"bad glob {pattern!r}: {problem}")
    return pattern


def _number(at: At, *, positive: bool = False) -> float:
    return float(at.number(positive=positive))


def _scope(f: dict[str, At]) -> Scope:
    return Scope(f["variants"].names() if "variants" in f else (),
                 f["targets"].names() if "targets" in f else ())


def _metric(f: dict[str, At]) -> str:
    return f["metric"].choice(METRICS) if "metric" in f else "auto"


def _read_required(at: At) -> RequiredRule:
    if isinstance(at.node, ScalarNode):
        return RequiredRule(_glob(at))
    f = at.mapping(_SCOPE_KEYS)
    at.require(f, "pattern")
    return RequiredRule(_glob(f["pattern"]), _scope(f))


def _read_floor(at: At) -> FloorRule:
    f = at.mapping((*_SCOPE_KEYS, "min", "unit", "max_cycles"))
    at.require(f, "pattern")
    if ("min" in f) == ("max_cycles" in f):
        raise at.error("give exactly one of 'min' (with 'unit') or 'max_cycles'")
    min_value = unit = max_cycles = None
    if "min" in f:
        at.require(f, "unit")
        min_value = _number(f["min"])
        unit = f["unit"].choice(RATE_UNITS)
    elif "unit" in f:
        raise f["unit"].error("only goes with 'min'")
    else:
        max_cycles = _number(f["max_cycles"], positive=True)
    return FloorRule(_glob(f["pattern"]), _scope(f), min_value, unit, max_cycles)


def _read_regression(at: At) -> RegressionRule:
    f = at.mapping((*_SCOPE_KEYS, "max_pct", "metric", "aggregate", "limit", "detect_pct"))
    at.require(f, "pattern", "max_pct")
    limit = f["limit"].choice(("fixed", "learned")) if "limit" in f else "fixed"
    counted = "metric" in f and f["metric"].scalar() == INSTRUCTIONS
    if counted and limit == "learned":  # a count does not scatter: there is no noise to learn
        raise f["limit"].error("metric: instructions takes a fixed limit (max_pct), not 'learned'")
    if "detect_pct" in f and limit != "learned":
        raise f["detect_pct"].error("only goes with 'limit: learned'")
    return RegressionRule(
        limit=limit,
        detect_pct=_number(f["detect_pct"], positive=True) if "detect_pct" in f else None,
        pattern=_glob(f["pattern"]),
        max_pct=_number(f["max_pct"]),
        scope=_scope(f),
        metric=INSTRUCTIONS if counted else _metric(f),
        aggregate=f["aggregate"].choice(("item", "geomean")) if "aggregate" in f else "item",
    )


def _read_speedup(at: At) -> SpeedupRule:
    f = at.mapping(("pattern", "accelerated", "software", "min", "targets", "metric"))
    at.require(f, "pattern", "accelerated", "software", "min")
    return SpeedupRule(
        pattern=_glob(f["pattern"]),
        accelerated=f["accelerated"].string(),
        software=f["software"].string(),
        min_ratio=_number(f["min"], positive=True),
        targets=f["targets"].names() if "targets" in f else (),
        metric=_metric(f),
    )


def _read_crossover(at: At) -> CrossoverRule:
    f = at.mapping(("pattern", "accelerated", "software", "max_block", "targets", "metric", "paths",
                    "max_slower_pct"))
    at.require(f, "pattern", "accelerated", "software")
    on_paths = "paths" in f and f["paths"].boolean()
    if "max_slower_pct" in f and not on_paths:
        raise f["max_slower_pct"].error("is only understood with paths: true")
    return CrossoverRule(
        paths=on_paths,
        max_slower_pct=_number(f["max_slower_pct"]) if "max_slower_pct" in f else None,
        pattern=_glob(f["pattern"]),
        accelerated=f["accelerated"].string(),
        software=f["software"].string(),
        targets=f["targets"].names() if "targets" in f else (),
        max_block=f["max_block"].integer(minimum=1) if "max_block" in f else None,
        metric=_metric(f),
    )


def _read_list(at: At, read: Callable[[At], Any]) -> list:
    if isinstance(at.node, ScalarNode) and at.node.value in ("", "~", "null"):
        return []
    return [read(item) for item in at.sequence()]


_PERF_KEYS = {"alpha": float, "tail": float, "min_repeats": int, "min_history": int, "window": int,
              "prior_dof": float, "power": float, "clock_tolerance": float, "reduce": str, "bootstrap": int,
              "confirm": bool, "center": str, "resolve_pct": float,
              "gross_ratio": float, "inconclusive": str}
# The choices of the str keys: how a side is reduced, and what a repeat's deviation is measured from.
_PERF_CHOICES = {"reduce": ("median", "best", "second"), "center": ("auto", "median", "best", "second"),
                 "inconclusive": ("pass", "fail")}


def _read_perf(at: At, policy: Policy) -> None:
    f = at.mapping(_PERF_KEYS)
    values: dict[str, Any] = {}
    for name, kind in _PERF_KEYS.items():
        if name not in f:
            continue
        if kind is bool:
            values[name] = f[name].boolean()
        elif kind is str:
            values[name] = f[name].choice(_PERF_CHOICES[name])
        elif kind is int:
            values[name] = f[name].integer(minimum=1)
        else:
            v = _number(f[name], positive=name != "prior_dof")
            if name in ("alpha", "power") and not v < 1:
                raise f[name].error(f"must be below 1, not {v:g}")
            values[name] = v
    if "gross_ratio" in values and not values["gross_ratio"] > 1:
        raise f["gross_ratio"].error(
            f"must be above 1 (a ratio between two runs), not {values['gross_ratio']:g}")
    policy.inconclusive = values.pop("inconclusive", policy.inconclusive)
    tolerance = values.pop("clock_tolerance", None)
    if tolerance is not None:
        policy.clock_tolerance = tolerance
    policy.perf = perf_gate.Settings(**values)


_LISTS: dict[str, Callable[[At], Any]] = {"required": _read_required, "floors": _read_floor,
                                          "regressions": _read_regression, "speedups": _read_speedup,
                                          "crossovers": _read_crossover}


def parse_policy(text: str, source: str = "<policy>") -> Policy:
    """Parse policy YAML; PolicyError names the source, line and key of the first problem."""
    root = compose(text, source, PolicyError)
    if root is None:
        return Policy(source=source)
    top = At.root(root, source, PolicyError, top=PolicyError.TOP)
    if not isinstance(root, MappingNode):
        raise top.error(f"a policy must be a mapping of keys, not {node_kind(root)}")
    f = top.mapping(_TOP_KEYS)
    if "version" in f and f["version"].scalar() != 1:
        raise f["version"].error("only version 1 is understood")
    policy = Policy(source=source)
    if "metric" in f:
        policy.metric = f["metric"].choice(METRICS)
    if "selftests" in f:
        policy.selftests = f["selftests"].boolean()
    if "complete" in f:
        policy.complete = f["complete"].boolean()
    for key, read in _LISTS.items():
        if key in f:
            setattr(policy, key, _read_list(f[key], read))
    if "kernel" in f:
        policy.kernel = kernel_health.read_rules(f["kernel"])
    if "triage" in f:
        policy.triage = read_triage_rules(f["triage"])
    if "perf" in f:
        _read_perf(f["perf"], policy)
    if "instructions" in f:
        policy.instructions = read_instruction_settings(f["instructions"])
    if "bisect" in f:
        policy.bisect = read_bisect_settings(f["bisect"])
    return policy


def load_policy(path: str | Path | None = None, *, config_dir: Path | None = None) -> Policy:
    """Read a policy file (the documented default when ``path`` is None); ``config_dir``: the
    directory of the config that names it, which reports name it relative to."""
    p = Path(path) if path is not None else DEFAULT_POLICY_PATH
    policy = parse_policy(read_text(p, PolicyError), str(p))
    policy.label = policy_label(p, config_dir)
    return policy


def policy_label(path: str | Path, config_dir: Path | None = None) -> str:
    """How a report names the policy it was judged by, without a path of this machine (a PR comment
    is public): a packaged policy as ``policies/NAME (packaged)``, another relative to the config
    that names it, else relative to the working directory when below it, else by its file name."""
    p = Path(path)
    resolved = p.resolve()
    packaged = DEFAULT_POLICY_PATH.parent
    if resolved.is_relative_to(packaged):
        return f"policies/{resolved.relative_to(packaged).as_posix()} (packaged)"
    if config_dir is not None:
        return Path(os.path.relpath(resolved, config_dir.resolve())).as_posix()
    if resolved.is_relative_to(Path.cwd()):
        return resolved.relative_to(Path.cwd()).as_posix()
    return p.name
