"""Kernel targets: the registry, and the stage-facing calls that dispatch to a target.

Each target is one ``KernelTarget`` (``target.py``) in its own file: ``linuxkm.py``
(``linux-kmod-qemu``), ``freebsd.py`` (``freebsd-kmod``, a FreeBSD worker),
``freebsd_qemu.py`` (``freebsd-kmod-qemu``, real FreeBSD kernels in QEMU), listed in
``registry.py`` beside ``userspace``. The stages never choose by target name; they ask the registry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.bsdkm_yml import Config
from ..model import LogResult, StageFailure
from ..retry.classify import Patterns
from .errors import infra_error
from .loading import ModuleLoadOutcome, outcome_from_record, outcome_record
from .registry import KERNEL_TARGETS
from .target import KernelTarget, judge_outcome, module_flags
from .target import parse_kernel_log as parse_kernel_file

__all__ = ["build_module", "check_worker", "judge_outcome", "load_module", "module_flags",
           "outcome_from_record", "outcome_record", "parse_kernel_log", "target", "target_logs"]


def target(name: str, stage: str = "build") -> KernelTarget:
    try:
        return KERNEL_TARGETS[name]
    except KeyError:
        known = ", ".join(KERNEL_TARGETS)
        raise infra_error(stage, "target-unavailable",
                          f"target not available: {name} (kernel targets: {known})") from None


def check_worker(config: Config, name: str) -> None:
    target(name, "configure").check_worker(config)


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


def target_logs(target_name: str, state: dict[str, Any], run_dir: Path, timeout_s: float,
                patterns: Patterns | None = None) -> tuple[list[LogResult], StageFailure | None] | None:
    """A target's own parse and judgement of its run (None: the one-log default applies)."""
    return target(target_name, "collect").logs(state, run_dir, timeout_s, patterns)
