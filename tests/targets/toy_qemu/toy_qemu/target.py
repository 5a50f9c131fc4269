"""The ``toy-qemu`` target: its build (the guest image), its boot, its marker table, its counted work.

Everything else (the launch, the console cap, the nonce, the counting plugin, the verdict) is the
core's: this file uses the guest layer (``buildbot_bsdkm.pipeline.runtime.guest``) and the marker
reader (``buildbot_bsdkm.parsers.guest_markers``) and touches nothing of the package.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from buildbot_bsdkm.config.bsdkm_yml import Config
from buildbot_bsdkm.model import LogFormat, LogResult
from buildbot_bsdkm.parsers.guest_markers import MarkerTable, read_markers
from buildbot_bsdkm.perf.kernel_counts import TextLayout, text_layout
from buildbot_bsdkm.pipeline.runtime.console_lines import console_lines
from buildbot_bsdkm.pipeline.runtime.guest import (
    CountSpec,
    VmOptions,
    launch,
    merge_counts,
    new_nonce,
    read_counts,
    request_count,
)
from buildbot_bsdkm.pipeline.runtime.loading import ModuleLoadOutcome
from buildbot_bsdkm.pipeline.runtime.proc import CONSOLE_FLOOD, Watched
from buildbot_bsdkm.pipeline.runtime.qemu_plugin import COUNT_FILE, readelf_tables
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets import prerequisites as needs
from buildbot_bsdkm.pipeline.targets.base import KernelTarget, Prerequisite
from buildbot_bsdkm.retry.classify_failure import Patterns, classify

from . import FACTS

GUEST = Path(__file__).parent / "guest"
SOURCES = ("boot.S", "harness.c", "module.c", "toy.ld")
CFLAGS = ("-m64", "-O2", "-ffreestanding", "-fno-pic", "-fno-pie", "-mno-red-zone", "-mgeneral-regs-only",
          "-fno-stack-protector", "-fno-asynchronous-unwind-tables", "-fcf-protection=none", "-Wall",
          "-Werror")
# The guest's program: its steps (load, unload), the module list, and nothing after power-off.
MARKERS = MarkerTable(facts={"listed": r"listed (\S+)"}, last="poweroff")
# The guest's counted work: one algorithm over the image's own addresses (it runs at 1 MiB).
COUNTING = CountSpec(algs=(("sum", "TOY-SUM"),), prefix="toy-count:", program="harness.c",
                     area="100000-200000")


def build_guest(out: Path, log: Path, patterns: Patterns | None) -> Path:
    """The guest image ``toy.bin`` and the module object (``module.o``, what is counted) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    objects = [out / f"{Path(src).stem}.o" for src in SOURCES[:3]]
    steps = [["gcc", *CFLAGS, "-c", str(GUEST / src), "-o", str(obj)]
             for src, obj in zip(SOURCES[:3], objects, strict=True)]
    steps += [["ld", "-m", "elf_x86_64", "-nostdlib", "--no-warn-rwx-segments", "-T", str(GUEST / "toy.ld"),
               "-o", str(out / "toy.elf"), *map(str, objects)],
              ["objcopy", "-O", "binary", str(out / "toy.elf"), str(out / "toy.bin")]]
    log.parent.mkdir(parents=True, exist_ok=True)
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        with open(log, "a", encoding="utf-8") as said:
            said.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            raise StageError(classify("build", exit_code=done.returncode, output=done.stderr,
                                      patterns=patterns, evidence=[str(log)]))
    return out / "module.o"


def module_code(module: Path) -> TextLayout:
    """``.text`` and, as range 1, the module's whole mapping (the guest declares where it is)."""
    return text_layout(*readelf_tables(module), other_sections=False).with_range("module")


def outcome(console: Path, run: Watched, nonce: str) -> ModuleLoadOutcome:
    """What the boot says, by the markers that carry its nonce."""
    said = read_markers(console_lines(console), MARKERS, nonce)
    load, unload = said.result("load"), said.result("unload")
    notes = [f"{said.imitations} console line(s) imitate the harness's markers"] if said.imitations else []
    if run.timed_out:
        last = said.bodies[-1] if said.bodies else None
        notes.append(f"VM killed at the time limit; last marker: {last!r}")
    return ModuleLoadOutcome(
        kernel_log=console, load_rc=load.rc if load else None, unload_rc=unload.rc if unload else None,
        timed_out=run.timed_out, timed_out_stage="load" if run.timed_out else None,
        duration_s=round(run.seconds, 2), loaded_seen=said.facts.get("listed") == "toy", notes=notes,
        extra_logs={"console": console},
        console_flood_bytes=run.log_bytes if run.stopped == CONSOLE_FLOOD else None)


class ToyQemuTarget(KernelTarget):
    facts = FACTS
    log_format = LogFormat.LINUX_KERNEL_LOG
    log_name = "console.log"

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        return [needs.command("qemu-system-x86_64", "qemu-system-x86"), needs.c_compiler(),
                needs.command("ld", "binutils"), needs.command("objcopy", "binutils")]

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        key = hashlib.sha256(b"".join((GUEST / src).read_bytes() for src in SOURCES)).hexdigest()[:16]
        return build_guest(cache / "toy-qemu" / key, log, patterns)

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        work.mkdir(parents=True, exist_ok=True)
        nonce = new_nonce()
        count = request_count(config, work, COUNTING, lambda: module_code(ko))
        append = f"nonce={nonce}"
        if count is not None:
            append += f" count_bytes={count.plan.bytes} count_sizes={','.join(map(str, count.plan.sizes))}"
        machine = ["-kernel", str(ko.with_name("toy.bin")), "-append", append,
                   "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]
        console = work / "console.log"
        options = VmOptions(memory_mb=128, console_cap_bytes=config.console_cap_bytes)
        plugin = count.plugin_arg(work / COUNT_FILE, nonce) if count is not None else None
        run = launch(machine, console, options=options, timeout_s=config.timeout("load"), plugin=plugin)
        return outcome(console, run, nonce)

    def measured_logs(self, state: dict[str, Any], run_dir: Path, outcome: ModuleLoadOutcome,
                      kernel_log: Path) -> list[LogResult]:
        counts = read_counts(run_dir / "vm", kernel_log, COUNTING)
        if counts is not None:
            merge_counts(state, counts)
        return []


TARGET = ToyQemuTarget()
