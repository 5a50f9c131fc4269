"""Kernel targets by name: their module built, loaded and its log parsed, as one call each.

The release job's FIPS round trip builds and loads a module twice outside the stages; these
calls name the target and leave the rest to its ``KernelTarget``.
"""

from __future__ import annotations

from pathlib import Path

from ...config.bsdkm_yml import Config
from ...contract import TARGET_UNAVAILABLE
from ...model import LogResult
from ...retry.classify_failure import Patterns
from ..runtime.loading import ModuleLoadOutcome, outcome_from_record, outcome_record
from ..runtime.stage_error import infra_error
from . import kernel_targets
from .base import KernelTarget, judge_outcome, module_flags
from .base import parse_kernel_log as parse_kernel_file

__all__ = ["build_module", "judge_outcome", "load_module", "module_flags",
           "outcome_from_record", "outcome_record", "parse_kernel_log", "target"]


def target(name: str, stage: str = "build") -> KernelTarget:
    known = kernel_targets()
    try:
        return known[name]
    except KeyError:
        known = ", ".join(known)
        raise infra_error(stage, TARGET_UNAVAILABLE,
                          f"target not available: {name} (kernel targets: {known})") from None


def build_module(
    config: Config, target_name: str, variant: str, source: Path, cache: Path, jobs: int, log: Path,
    patterns: Patterns | None = None,
) -> Path:
    """The module's ``.ko`` for this variant; its build output is appended to ``log``."""
    return target(target_name).build(config, variant, source, cache, jobs, log, patterns)


def load_module(config: Config, target_name: str, ko: Path, work: Path) -> ModuleLoadOutcome:
    return target(target_name, "load").load(config, ko, work)


def parse_kernel_log(target_name: str, path: Path) -> LogResult:
    return parse_kernel_file(target(target_name, "collect").log_format, path)
