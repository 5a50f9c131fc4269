"""What each target is, one row per target: the facts every layer may ask about a target's name.

The pipeline's target classes (``pipeline/<target>.py``) say *how* a target is built, loaded and
parsed, and take *what* it is from their row here (``Target.facts``). Config validation, kernel
health, the policy's regression gates, worker matching and the shells read the rows directly: they
are the pipeline's callers or the pipeline's own imports, so they could not import its registry
without a cycle (and need none of its weight). This module imports nothing of the package.

A new target: its file under ``pipeline/targets/`` (a ``Target`` subclass with ``facts = <its row>``),
its row here, its line in ``pipeline/targets/__init__.py`` (``tests/unit/test_targets.py`` checks the two
agree). A target that lives outside this repository is a package named in ``BSDKM_TARGETS``: its
``__init__`` holds the row (``FACTS``, importing nothing of this package but this module) and its
``target`` module the class (``TARGET``); rows and registry read it the same way.
"""

from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass

# The wolfSSL tree's directories a kernel module is built from.
LINUXKM = "linuxkm"
BSDKM = "bsdkm"

# A worker tag that ends in "-" is a prefix: "freebsd-" is met by "freebsd-14.3-amd64".
QEMU_WORKER_TAG = "linux-qemu"
FREEBSD_WORKER_TAG = "freebsd-"

TCG_NOTE = "QEMU TCG emulates the CPU: emulator speeds, not the module's performance"


@dataclass(frozen=True)
class TargetFacts:
    name: str
    # The wolfSSL directory its kernel module is built from; None: no module (userspace programs).
    source_dir: str | None
    # The benchmark's numbers are the module's performance on the worker's CPU: a perf target,
    # regression-gated against a base or history. False where an emulator runs the CPU (QEMU TCG):
    # its timings are the emulator's, so a slower run says nothing about the module.
    perf_measurement: bool
    # One run can measure the benchmark again (rounds of base, head: ``benchmark.repeats``).
    bench_repeats: bool
    # Why, for the report and the README (one line).
    perf_note: str
    # Runs under QEMU TCG: timing-based kernel trouble (lockups, RCU stalls) is the emulator's too,
    # so kernel health reports it as a warning (``kernel: emulated:`` default).
    emulated: bool = False
    # Runs on a worker of each FreeBSD release the config declares (``release.freebsd_releases``).
    per_os_release: bool = False
    # The tag a worker needs to run it (a trailing "-": any tag with that prefix); None: any worker.
    worker_tag: str | None = None

    def __post_init__(self) -> None:
        if self.emulated and self.perf_measurement:
            raise ValueError(f"{self.name}: an emulated target's speeds are no performance measurement")

    @property
    def kernel(self) -> bool:
        """It loads a kernel module (the pipeline's ``KernelTarget``)."""
        return self.source_dir is not None

    @property
    def freebsd(self) -> bool:
        """Its module is FreeBSD's (``bsdkm/``): FreeBSD-only flags such as crypto-register apply."""
        return self.source_dir == BSDKM

    @property
    def measures_base(self) -> bool:
        """Whether a PR build (or ``run --base-*``) builds the base and measures both in rounds."""
        return self.perf_measurement and self.bench_repeats

    def runs_on(self, tags: tuple[str, ...]) -> bool:
        """Whether a worker with ``tags`` (and no explicit ``targets:`` list) can run this target."""
        want = self.worker_tag
        if want is None:
            return True
        return any(t.startswith(want) if want.endswith("-") else t == want for t in tags)


# Native code on the worker's own CPU; the benchmark program can simply be run again.
USERSPACE = TargetFacts(
    "userspace", None, perf_measurement=True, bench_repeats=True,
    perf_note="native benchmark program on the worker's CPU, re-run for each round")
# QEMU TCG emulates the CPU: timings are the emulator's (~100x slower, host-load dependent), not the
# module's; and a round would be another VM boot. Reported, never regression-gated.
LINUX_KMOD_QEMU = TargetFacts(
    "linux-kmod-qemu", LINUXKM, perf_measurement=False, bench_repeats=False, perf_note=TCG_NOTE,
    emulated=True, worker_tag=QEMU_WORKER_TAG)
# A real FreeBSD machine: the module's benchmark (run by kldload, MOD_LOAD) is its performance on that
# CPU, and kldunload + kldload measures it again (the maintainers paste this table). Native: a release
# report covers each declared FreeBSD release's worker.
FREEBSD_KMOD = TargetFacts(
    "freebsd-kmod", BSDKM, perf_measurement=True, bench_repeats=True,
    perf_note="kldload's benchmark on a real FreeBSD worker; each round is one kldload/kldunload cycle",
    per_os_release=True, worker_tag=FREEBSD_WORKER_TAG)
# QEMU TCG as for linux-kmod-qemu; and the debug kernel preloads the module before its clock runs, so
# only the release boot benchmarks at all.
FREEBSD_KMOD_QEMU = TargetFacts(
    "freebsd-kmod-qemu", BSDKM, perf_measurement=False, bench_repeats=False, perf_note=TCG_NOTE,
    emulated=True, worker_tag=QEMU_WORKER_TAG)

# Packages of targets kept outside this repository, comma- or space-separated (``my_ci.targets.toy``).
PLUGINS_ENV = "BSDKM_TARGETS"


def plugin_packages() -> tuple[str, ...]:
    return tuple(p for p in re.split(r"[\s,]+", os.environ.get(PLUGINS_ENV, "")) if p)


def _plugin_row(package: str) -> TargetFacts:
    try:
        row = importlib.import_module(package).FACTS
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"{PLUGINS_ENV}: {package}: no target row ({type(e).__name__}: {e})") from None
    if not isinstance(row, TargetFacts):
        raise RuntimeError(f"{PLUGINS_ENV}: {package}.FACTS is no TargetFacts")
    return row


FACTS: dict[str, TargetFacts] = {
    t.name: t for t in (USERSPACE, LINUX_KMOD_QEMU, FREEBSD_KMOD, FREEBSD_KMOD_QEMU,
                        *map(_plugin_row, plugin_packages()))
}
NAMES: tuple[str, ...] = tuple(FACTS)
KERNEL_NAMES: tuple[str, ...] = tuple(n for n, t in FACTS.items() if t.kernel)
FREEBSD_NAMES: tuple[str, ...] = tuple(n for n, t in FACTS.items() if t.freebsd)
EMULATED_NAMES: tuple[str, ...] = tuple(n for n, t in FACTS.items() if t.emulated)


def get(name: str) -> TargetFacts | None:
    return FACTS.get(name)


def perf_ungated(name: str) -> bool:
    """Known to be no performance measurement (an unknown name is left to the policy: gated)."""
    t = FACTS.get(name)
    return t is not None and not t.perf_measurement


def measures_base(name: str) -> bool:
    """Whether a base is built next to the head and measured with it in rounds (an unknown name: no)."""
    t = FACTS.get(name)
    return t is not None and t.measures_base


def os_release_tag(os_release: str, arch: str) -> str:
    """The tag of a worker that runs the per-release targets on FreeBSD ``os_release`` (``14.3``)."""
    return f"{FREEBSD_WORKER_TAG}{os_release}-{arch}"
