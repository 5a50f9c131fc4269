"""Threshold policy: YAML rules turned into pass/fail checks over run results.

The package: ``rules`` (the loaded policy, ``parse_policy``/``load_policy``), the package's top
``checks.py`` (``Check``, ``Verdict``, ``CheckKind``), ``measure`` (which number a gate reads;
baselines), ``evaluation`` (``evaluate``) over the gates: ``run_gates`` (one run), ``regressions``
(fixed limits), ``learned`` (learned limits, ``perf/gate.py``), ``comparisons`` (two variants),
``paths`` (two paths of one run).

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
                Runs of a target whose benchmark is no performance measurement (QEMU TCG:
                ``perf_measurement`` in ``buildbot_bsdkm/targets.py``) are never regression-gated:
                ``evaluate`` uses no baseline or history for them and notes why.
``perf``        settings of learned limits: ``alpha`` (false alarms per run, all items together),
                ``tail``, ``min_repeats`` (per side; fewer is ``inconclusive``), ``min_history``,
                ``window``, ``prior_dof``, ``power``, ``clock_tolerance`` (see ``policies/default.yml``),
                ``confirm`` (re-measure a regression's base and head before failing, ``perf/confirm.py``),
                ``resolve_pct`` (measure more rounds, up to the config's ``benchmark.max_repeats``,
                while an item cannot resolve a drop this big, ``perf/extend.py``), ``reduce``, ``center``,
                ``gross_ratio`` (a change beyond this ratio fails at any repeat count, 1 vs 1 included:
                the widest healthy ratio recorded, with a margin, ``bench/gross_bound.py``) and
                ``inconclusive`` (``pass``: unjudged gated items make the verdict INCONCLUSIVE with
                exit status 0; ``fail``: exit status 1).
``speedups``    minimum ratio accelerated / software variant on the same target.
``crossovers``  offload-vs-software comparison across block sizes; reports the crossover block
                size and can require it to be at most ``max_block`` bytes. With ``paths: true`` it
                compares two paths of one run (the lkcapi variant's AF_ALG benchmark, ``paths.py``)
                and can also require ``max_slower_pct`` (never slower than that at any block size).

Every rule takes ``pattern`` (an fnmatch glob over benchmark names) and optionally
``variants`` / ``targets`` to limit where it applies. For item regressions the first rule
whose pattern and scope match a benchmark applies, so list specific patterns before ``*``.
"""

from __future__ import annotations

from ..checks import (
    COMPLETE_PREFIX,
    GEOMEAN_PREFIX,
    KIND_BENCHMARK,
    KIND_COMPLETE,
    KIND_CROSSOVER,
    KIND_FLOOR,
    KIND_REGRESSION,
    KIND_REQUIRED,
    KIND_SELFTEST,
    KIND_SPEEDUP,
    Check,
    CheckKind,
    Verdict,
)
from .evaluation import NO_CHECKS, evaluate, perf_inputs
from .learned import bench_logs, fingerprint_problem, perf_message, same_machine
from .measure import crossover_block, display_unit, fmt_num, matches, measure, shown
from .pairing import BaselineMismatch, pair_baseline
from .rules import (
    CYCLES,
    DEFAULT_POLICY_PATH,
    METRICS,
    PER_SECOND,
    CrossoverRule,
    FloorRule,
    Policy,
    PolicyError,
    RegressionRule,
    RequiredRule,
    Scope,
    SpeedupRule,
    glob_problem,
    load_policy,
    parse_policy,
    policy_label,
)

__all__ = [
    "BaselineMismatch",
    "COMPLETE_PREFIX",
    "CYCLES",
    "DEFAULT_POLICY_PATH",
    "GEOMEAN_PREFIX",
    "KIND_BENCHMARK",
    "KIND_COMPLETE",
    "KIND_CROSSOVER",
    "KIND_FLOOR",
    "KIND_REGRESSION",
    "KIND_REQUIRED",
    "KIND_SELFTEST",
    "KIND_SPEEDUP",
    "METRICS",
    "NO_CHECKS",
    "PER_SECOND",
    "Check",
    "CheckKind",
    "CrossoverRule",
    "FloorRule",
    "Policy",
    "PolicyError",
    "RegressionRule",
    "RequiredRule",
    "Scope",
    "SpeedupRule",
    "Verdict",
    "bench_logs",
    "crossover_block",
    "display_unit",
    "evaluate",
    "fingerprint_problem",
    "fmt_num",
    "glob_problem",
    "load_policy",
    "policy_label",
    "matches",
    "measure",
    "pair_baseline",
    "parse_policy",
    "perf_inputs",
    "perf_message",
    "same_machine",
    "shown",
]
