"""The ``linux-kmod-qemu`` target: the module built against Debian's headers, loaded in a QEMU VM.

The harness (build, initramfs, boot, console) is ``harness.py``; an lkcapi variant's AF_ALG
benchmark is ``afalg.py`` and its console lines ``afalg_console.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .... import targets
from ....config.bsdkm_yml import Config
from ....model import LogFormat, LogResult
from ....retry.classify_failure import Patterns
from ...job import KO, Job, StateKey
from ...runtime.guest import VmOptions, merge_counts, read_counts
from ...runtime.loading import ModuleLoadOutcome
from ...runtime.source import cache_root
from .. import prerequisites as needs
from ..base import KernelTarget, Prerequisite, append_log, module_flags
from .afalg import build_bench, stage_overlay, wants_afalg
from .afalg_console import console_logs
from .harness import (
    COUNTING,
    LinuxModuleSpec,
    cached_linux_module,
    kernel_prerequisites,
    prepare_count,
    run_linux_module,
)
from .options import LinuxQemuOptions

# The lkcapi variant's AF_ALG benchmark program, built beside the module (None: not this variant).
AFALG_PROGRAM: StateKey[str | None] = StateKey("afalg_program")


class LinuxQemuTarget(KernelTarget):
    """``linux-kmod-qemu``: the module built against Debian's headers, loaded once in a QEMU VM."""

    facts = targets.LINUX_KMOD_QEMU
    options_type = LinuxQemuOptions
    log_format = LogFormat.LINUX_KERNEL_LOG
    log_name = "console.log"

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        return [
            *kernel_prerequisites(self.options(config).kernel_version),
            needs.command("qemu-system-x86_64", "qemu-system-x86"),
            needs.static_busybox(),
            needs.command("cpio", "cpio", what="the initramfs"),
            needs.c_compiler(),
            needs.static_libc(),
            needs.make(),
            *needs.autotools(config),
            *needs.valgrind(config, kernel=True),
        ]

    def measured_logs(self, state: dict[str, Any], run_dir: Path, outcome: ModuleLoadOutcome,
                      kernel_log: Path) -> list[LogResult]:
        # The lkcapi variant's guest ran the AF_ALG benchmark after the load, on the same console.
        wanted = bool(state.get(AFALG_PROGRAM.name)) and outcome.load_rc == 0
        counts = read_counts(run_dir / "vm", kernel_log, COUNTING)
        if counts is not None:
            merge_counts(state, counts)
        return console_logs(kernel_log, run_dir, expected=wanted)

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        opts = self.options(config)
        spec = LinuxModuleSpec(variant_flags=tuple(module_flags(config, self.name, variant)),
                               cflags=" ".join(config.cflags(self.name, variant)),
                               kernel_version=opts.kernel_version)
        built = cached_linux_module(source, spec, cache, jobs=jobs, timeout_s=config.timeout("build"),
                                    patterns=patterns)
        append_log(log, built.build_log,
                   note=f"# module {'reused from cache' if built.cached else 'built'}: {built.ko}")
        return Path(built.ko)

    def beside_module(self, job: Job, source: Path) -> None:
        """An lkcapi variant's AF_ALG benchmark program (``afalg.py``), run in the same guest."""
        flags = job.config.configure_flags(self.name, job.variant)
        program = None
        if wants_afalg(flags):
            program = str(build_bench(source, flags, cache_root(job.config), jobs=job.jobs,
                                      cflags=" ".join(job.config.cflags(self.name, job.variant)),
                                      timeout_s=job.config.timeout("build"), log=job.build_log))
        job.put(AFALG_PROGRAM, program)

    def measure(self, job: Job) -> None:
        stage_overlay(job.get(AFALG_PROGRAM), Path(job.need(KO, "build")), job.dir / "vm")
        super().measure(job)

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        opts = self.options(config)
        # QEMU's -cpu: "max" exercises every instruction the asm uses (ADX included),
        # "max,-adx,-bmi2" avoids the intermittent ECC self-test failure seen under TCG.
        options = VmOptions(console_cap_bytes=config.console_cap_bytes)
        if opts.cpu:
            options = replace(options, cpu=opts.cpu)
        return run_linux_module(ko, work, timeout_s=int(config.timeout("load")),
                                kernel_version=opts.kernel_version, options=options,
                                count=prepare_count(config, ko, Path(work)))


TARGET = LinuxQemuTarget()
