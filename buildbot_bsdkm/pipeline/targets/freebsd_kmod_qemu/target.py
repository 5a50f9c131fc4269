"""wolfSSL's FreeBSD module cross-built on Linux and run on real FreeBSD kernels in QEMU.

Target ``freebsd-kmod-qemu``. Its inputs come from one of (``freebsd:`` in bsdkm.yml):

- FreeBSD's distribution sets (``release`` and ``snapshot``, from ``mirror``): the release's GENERIC
  is the ``release`` kernel, a CURRENT snapshot's GENERIC (INVARIANTS, WITNESS) the ``debug`` one;
  each set also gives its EFI loader and the sources a module build needs (``freebsd_release_set``);
- a FreeBSD source tree with a kernel built from it (``src``, ``kernel``);
- a directory of one's own kernels in the kit layout (``kit``: ``boot/``, ``sysroot/``).

The module is built with bmake and clang ``--target=x86_64-unknown-freebsd<version>`` against each
kernel's own sources, so a CURRENT kernel gets a module of its own version; each kernel kind boots in
its own QEMU (TCG, OVMF) from an ESP directory the loader reads:

- ``debug``: the loader preloads the module, so its self-test runs during boot, where a
  sleeping-with-a-lock bug panics. The benchmark cannot run there (its ``getnanouptime`` clock only
  starts after module init), so the run stops at the benchmark's header.
- ``release``: with a kernel that has ``device crypto`` and MSDOSFS (GENERIC has both), a FAT root
  holds ``kmod/freebsd/kldinit.c`` as init, which ``kldload``s the module on a running system
  (benchmarks with working clocks), ``kldstat``s and ``kldunload``s it (cleanup lines) and reboots.
  Without that kernel the release kernel preloads like ``debug``.

A machine that can get none of these inputs cannot run the target: the run says why, and which key
to set (``target-unavailable``). Every boot's console is parsed by the core parsers
(``freebsd-kernel-log``); a panic is a ``real`` failure whose evidence carries the module's
backtrace frames.

The package: ``kit`` (where the kernels and sources come from), ``worker`` (what a worker needs),
``build`` (the module and kldinit), ``boot`` (one boot's disks, loader and stop rule), ``console``
(kldinit's marker table and a boot's outcome), ``counting`` (kldinit's counted work). This module
runs the boots through the guest layer (``runtime.guest``) and judges them.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .... import targets
from ....config.bsdkm_yml import Config
from ....contract import TARGET_UNAVAILABLE
from ....model import FailureCategory, LogFormat, LogResult, StageFailure
from ....retry.classify_failure import Patterns
from ...job import OUTCOME, Job
from ...runtime.console_lines import console_lines
from ...runtime.guest import VmOptions, launch, merge_counts, new_nonce, read_counts
from ...runtime.loading import ModuleLoadOutcome, outcome_from_record
from ...runtime.qemu_plugin import COUNT_FILE
from ...runtime.source import cache_root
from ...runtime.stage_error import StageError, infra_error
from ..base import KernelTarget, Prerequisite, judge_outcome, parse_kernel_log
from .boot import (
    OVMF_VARS,
    Boot,
    boot_plan,
    cached_kernel,
    cut_at_benchmark,
    machine,
    make_esp,
    make_root,
    stop_rule,
)
from .build import build_module, init_program, module_for
from .console import module_frames, module_symbols, outcome_from_boot, read_console
from .counting import COUNTING, BootCount, prepare_count
from .kit import Kit, kernels_option, kits
from .options import FreeBSDQemuOptions, freebsd_options
from .worker import check_worker, find_toolchain, kernel_prerequisites, tool_prerequisites


def run_boot(boot: Boot, kit: Kit, ko: Path, work: Path, cache: Path, *, timeout_s: float,
             options: VmOptions, symbols: set[str], count: BootCount | None = None) -> ModuleLoadOutcome:
    """One kernel's boot; ``count``: the counting plugin, and kldinit's counted work, for this boot
    (``prepare_count``)."""
    work.mkdir(parents=True, exist_ok=True)
    kernel = cached_kernel(kit, boot.kernel, cache)
    nonce = new_nonce()  # kldinit's markers carry it; the module cannot know it
    counted = count if boot.mode == "kldload" else None
    preloaded = ko if boot.mode == "preload" else None
    esp = make_esp(work / "esp", kit, kernel, preloaded, boot.mode, nonce, counted)
    cryptodev = kit.cryptodev(boot.kernel)
    root = (make_root(work / "root.img", init_program(cache), ko, cryptodev if cryptodev.is_file() else None)
            if boot.mode == "kldload" else None)
    vars_fd = work / "OVMF_VARS.fd"
    shutil.copy2(OVMF_VARS, vars_fd)
    console = work / "console.log"
    plugin = counted.plugin_arg(work / COUNT_FILE, nonce) if counted is not None else None
    run = launch(machine(esp, vars_fd, root), console, options=options, timeout_s=timeout_s,
                 stop=stop_rule(boot.mode, time.monotonic), plugin=plugin)
    shutil.rmtree(esp, ignore_errors=True)  # a kernel and a module per boot: do not keep them
    if run.stopped == "benchmark-at-preload":
        cut_at_benchmark(console)
    if root is not None:
        root.unlink(missing_ok=True)
    return outcome_from_boot(boot, console, run, symbols, {"console": console}, nonce)


def load_module(config: Config, ko: Path, work: Path, cache: Path | None = None) -> ModuleLoadOutcome:
    """Boot every configured kernel kind with its module; the outcome's ``parts`` hold one per kernel."""
    chosen = kits(config, kernels_option(config), "load")
    found, not_covered = chosen.found, list(chosen.notes)
    if not ko.is_file():
        raise infra_error("load", "ci-exception",
                          f"kernel module {ko} does not exist (did the build stage run?)")
    cache = cache or cache_root(config)
    crypto = needs_device_crypto(ko)
    boots: list[tuple[Boot, Kit]] = []
    for kind in kernels_option(config):
        if kind not in found:
            continue
        planned, notes = boot_plan(found[kind], [kind], crypto)
        boots += [(b, found[kind]) for b in planned]
        not_covered += notes
    opts = freebsd_options(config)
    options = VmOptions(cpu=opts.cpu, memory_mb=opts.memory_mb, console_cap_bytes=config.console_cap_bytes)
    symbols = module_symbols(ko)
    limit = float(opts.boot_timeout_s or config.timeout("load"))
    parts = {b.kind: run_boot(b, kit, module_for(ko, b.kind), work / b.kind, cache, timeout_s=limit,
                              options=options, symbols=symbols,
                              count=prepare_count(config, module_for(ko, b.kind), work / b.kind,
                                                  crypto=crypto, mode=b.mode))
             for b, kit in boots}
    outcome = combine(parts, not_covered, work)
    outcome.stages["boot_limit_s"] = limit
    outcome.notes[:0] = chosen.chosen  # which snapshot CURRENT was
    outcome.notes += [f"{kind} kernel: not run ({why})" for kind, why in chosen.not_run.items()]
    outcome.not_run = dict(chosen.not_run)
    outcome.kernels = {kind: _kernel_facts(kit) for kind, kit in found.items()}
    return outcome


def _kernel_facts(kit: Kit) -> dict[str, Any]:
    facts = kit.facts()
    if facts is not None:
        return {**facts.to_dict(), "summary": facts.describe()}
    return {"kit": str(kit.root), "summary": f"kit {kit.root}"}


def combine(parts: dict[str, ModuleLoadOutcome], not_covered: list[str], work: Path) -> ModuleLoadOutcome:
    """One outcome for the stage: it loaded only if every kernel loaded it; notes from all."""
    primary = parts.get("release") or next(iter(parts.values()), None)
    kernel_log = primary.kernel_log if primary else work / "console.log"
    if primary is None:
        kernel_log.parent.mkdir(parents=True, exist_ok=True)
        kernel_log.write_text("")
    notes = list(not_covered)
    for kind, part in parts.items():
        notes += [n if n.startswith(kind) else f"{kind} kernel: {n}" for n in part.notes]
    load_rcs = [p.load_rc for p in parts.values()]
    return ModuleLoadOutcome(
        kernel_log=kernel_log,
        load_rc=None if not parts or None in load_rcs else max(load_rcs, key=abs),  # type: ignore[arg-type]
        unload_rc=primary.unload_rc if primary else None,
        timed_out=any(p.timed_out for p in parts.values()),
        timed_out_stage=next((p.timed_out_stage for p in parts.values() if p.timed_out), None),
        duration_s=round(sum(p.duration_s for p in parts.values()), 2),
        loaded_seen=all(p.loaded_seen for p in parts.values()) if parts else False,
        stages={f"vm-{k}": p.duration_s for k, p in parts.items()},
        notes=notes,
        extra_logs={f"console-{k}": p.kernel_log for k, p in parts.items()},
        parts=parts,
        not_covered=list(not_covered),
        console_flood_bytes=max((p.console_flood_bytes for p in parts.values() if p.console_flood_bytes),
                                default=None),
    )


def needs_device_crypto(ko: Path) -> bool:
    """A crypto-register module imports the opencrypto framework (``crypto_get_driverid``)."""
    try:
        tools = find_toolchain("load")
        out = subprocess.run([str(tools.bin_dir / "llvm-nm"), "--undefined-only", str(ko)],
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (StageError, OSError, subprocess.TimeoutExpired):
        return False
    return any(line.split()[-1] == "crypto_get_driverid" for line in out.splitlines() if line.split())


# --------------------------------------------------------------------------- judging


def judge_boot(kind: str, outcome: ModuleLoadOutcome, log: LogResult, timeout_s: float, symbols: set[str],
               patterns: Patterns | None) -> StageFailure | None:
    """One kernel's failure, classified, with the kernel kind (and a panic's module frames) named."""
    failure = judge_outcome(outcome, log, timeout_s, patterns)
    if failure is None:
        return None
    facts = read_console(console_lines(outcome.kernel_log))
    failure.part = f"{kind} kernel"
    failure.message = f"{failure.part}: {failure.message}"
    if facts.panic:
        frames = module_frames(facts.backtrace, symbols)
        if frames:
            failure.message += f" (in {frames[0].split('+', 1)[0]})"
        if facts.backtrace:
            failure.evidence = [*failure.evidence, "backtrace: " + " < ".join(frames or facts.backtrace)]
    return failure


def not_covered_failure(notes: Sequence[str], evidence: Path) -> StageFailure:
    return StageFailure("load", "not covered: " + "; ".join(notes), FailureCategory.INFRASTRUCTURE,
                        TARGET_UNAVAILABLE, [str(evidence)])


def not_run_text(not_run: dict[str, str]) -> str:
    return "; ".join(f"{kind} kernel ({why})" for kind, why in not_run.items())


def not_run_failure(not_run: dict[str, str], evidence: Path) -> StageFailure:
    """A configured kernel this machine could not get: the run is not whole. A local run reports
    the kernel not run (``RunResult.not_run_parts``); Buildbot and the Action fail it as the
    infrastructure failure it is."""
    return StageFailure("load", "not run: " + not_run_text(not_run), FailureCategory.INFRASTRUCTURE,
                        TARGET_UNAVAILABLE, [str(evidence)])


class FreeBSDQemuTarget(KernelTarget):
    facts = targets.FREEBSD_KMOD_QEMU
    options_type = FreeBSDQemuOptions
    log_format = LogFormat.FREEBSD_KERNEL_LOG
    log_name = "console.log"

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        return [*kernel_prerequisites(config), *tool_prerequisites(config)]

    def check_worker(self, config: Config) -> None:
        check_worker(config)

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        return build_module(config, variant, source, cache, jobs, log, patterns)

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        return load_module(config, ko, work)

    def logs(self, state: dict[str, Any], run_dir: Path, timeout_s: float,
             patterns: Patterns | None = None) -> tuple[list[LogResult], StageFailure | None]:
        """One log per kernel (``console-debug.log``, ``console-release.log``), each judged on its own;
        the first failure (debug before release) is the run's."""
        outcome = outcome_from_record(state["outcome"])
        timeout_s = outcome.stages.get("boot_limit_s", timeout_s)  # targets.<t>.boot_timeout_s
        symbols: set[str] | None = None
        logs: list[LogResult] = []
        failure: StageFailure | None = None
        for kind, part in outcome.parts.items():
            kept = run_dir / f"console-{kind}.log"
            if part.kernel_log.is_file() and part.kernel_log.resolve() != kept.resolve():
                shutil.copyfile(part.kernel_log, kept)
            log = parse_kernel_log(self.log_format, kept if kept.is_file() else part.kernel_log)
            logs.append(log)
            if symbols is None:
                symbols = module_symbols(Path(state["ko"])) if state.get("ko") else set()
            judged = judge_boot(kind, part, log, timeout_s, symbols, patterns)
            counts = read_counts(part.kernel_log.parent, part.kernel_log, COUNTING)
            if counts is not None:  # the kldload boot of a crypto-register module, counted
                merge_counts(state, counts)
            if failure is None:
                failure = judged
            elif judged is not None:  # the run has one failure; the other kernel's is kept beside it
                failure.evidence = [*failure.evidence, f"also: {judged.message}", *judged.evidence]
        if not outcome.parts and outcome.not_covered:
            # No kernel of the kit can run this variant: never a pass. A kernel that cannot run
            # it beside one that did (crypto-register on the debug kernel) is a note.
            failure = not_covered_failure(outcome.not_covered, run_dir)
        if outcome.not_run and failure is None:
            failure = not_run_failure(outcome.not_run, run_dir)
        elif outcome.not_run and failure is not None:
            failure.evidence = [*failure.evidence, "also not run: " + not_run_text(outcome.not_run)]
        return logs, failure

    def metadata(self, job: Job) -> dict[str, Any]:
        """What each kernel booted was (a set's name, REVISION, BUILDDATE, GITBRANCH, MANIFEST digest)."""
        record = job.state.get(OUTCOME.name)
        kernels = outcome_from_record(record).kernels if isinstance(record, dict) else {}
        return {**super().metadata(job), **({"kernels": kernels} if kernels else {})}

    def parts_not_run(self, job: Job) -> dict[str, str]:
        record = job.state.get(OUTCOME.name)
        if not isinstance(record, dict):
            return {}
        return {f"{kind} kernel": why for kind, why in outcome_from_record(record).not_run.items()}


TARGET = FreeBSDQemuTarget()
