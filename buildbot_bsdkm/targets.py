"""What each target is, one row per target, and the one list of targets: the built-in ones and
those outside packages register.

The pipeline's target classes (``pipeline/targets/``) say *how* a target is built, loaded and
parsed, and take *what* it is from their row here (``Target.facts``). Config validation, kernel
health, the policy's regression gates, worker matching and the shells ask the functions below: they
are the pipeline's callers or the pipeline's own imports, so they never import its registry (and
need none of its weight). This module imports nothing of the package.

The list of targets (``registered()``) is read once, on first use: the built-in targets
(``BUILT_IN``, entry points written here so that a source tree works uninstalled), then every entry
point of the group ``bsdkm_ci.targets`` that installed packages declare. An entry point's value is
``module:TARGET``, the target object; its row is ``TARGET.facts``. A new built-in target is its
folder under ``pipeline/targets/``, its row here and its line in ``BUILT_IN``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol

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

GROUP = "bsdkm_ci.targets"
_PIPELINE = "buildbot_bsdkm.pipeline.targets"
BUILT_IN: tuple[EntryPoint, ...] = tuple(
    EntryPoint(row.name, f"{_PIPELINE}.{module}:TARGET", GROUP) for row, module in (
        (USERSPACE, "userspace"),
        (LINUX_KMOD_QEMU, "linux_kmod_qemu.target"),
        (FREEBSD_KMOD, "freebsd_kmod.target"),
        (FREEBSD_KMOD_QEMU, "freebsd_kmod_qemu.target"),
    ))


class TargetPluginError(RuntimeError):
    """An entry point of ``bsdkm_ci.targets`` that gives no usable target; the message names it."""


class Registered(Protocol):
    """What this module needs of a target object: its row and the dataclass of its options."""

    facts: TargetFacts
    options_type: type[Any]


def _where(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    by = f" (from {dist.name} {dist.version})" if dist is not None else ""
    return f"entry point {ep.group}: {ep.name} = {ep.value}{by}"


def _load(ep: EntryPoint) -> Registered:
    try:
        target = ep.load()
    except Exception as e:  # whatever its import raises, the entry point is what to name
        raise TargetPluginError(f"{_where(ep)}: cannot load it ({type(e).__name__}: {e})") from None
    row = getattr(target, "facts", None)
    if not isinstance(row, TargetFacts):
        raise TargetPluginError(f"{_where(ep)}: no target: {ep.value} has no row (facts: a TargetFacts)")
    if not dataclasses.is_dataclass(getattr(target, "options_type", None)):
        raise TargetPluginError(f"{_where(ep)}: {ep.value}.options_type is no dataclass")
    if row.name != ep.name:
        raise TargetPluginError(f"{_where(ep)}: the target's row calls it {row.name!r}")
    return target  # type: ignore[no-any-return]


# The list, once read; the lock makes other threads wait for the first reading, and lets the reading
# thread itself in only to say that a target's module asked for the list while it was being read.
_registered: Mapping[str, Registered] | None = None
_reading = threading.RLock()
_loading = False


def registered() -> Mapping[str, Registered]:
    """Every target by name: the built-in ones in their order, then the group's, by name.

    Read on first call, never at import: a target's module imports the package, whose modules ask
    for the targets only when called.
    """
    global _registered, _loading
    with _reading:
        if _registered is not None:
            return _registered
        if _loading:
            raise TargetPluginError("a target's module asked for the list of targets while it was being read")
        _loading = True
        try:
            out: dict[str, Registered] = {}
            outside = sorted(entry_points(group=GROUP), key=lambda ep: ep.name)
            for ep in (*BUILT_IN, *outside):
                if ep.name in out:
                    raise TargetPluginError(f"{_where(ep)}: the name {ep.name!r} is taken by another target")
                out[ep.name] = _load(ep)
            _registered = out
            return out
        finally:
            _loading = False


def facts() -> dict[str, TargetFacts]:
    """Every target's row, by name, in the order of ``registered()``."""
    return {name: t.facts for name, t in registered().items()}


def names() -> tuple[str, ...]:
    return tuple(registered())


def kernel_names() -> tuple[str, ...]:
    """Targets that load a kernel module."""
    return tuple(n for n, row in facts().items() if row.kernel)


def freebsd_names() -> tuple[str, ...]:
    """Targets whose module is FreeBSD's."""
    return tuple(n for n, row in facts().items() if row.freebsd)


def emulated_names() -> tuple[str, ...]:
    """Targets that run under QEMU TCG."""
    return tuple(n for n, row in facts().items() if row.emulated)


def get(name: str) -> TargetFacts | None:
    return facts().get(name)


def perf_ungated(name: str) -> bool:
    """Known to be no performance measurement (an unknown name is left to the policy: gated)."""
    t = get(name)
    return t is not None and not t.perf_measurement


def measures_base(name: str) -> bool:
    """Whether a base is built next to the head and measured with it in rounds (an unknown name: no)."""
    t = get(name)
    return t is not None and t.measures_base


def os_release_tag(os_release: str, arch: str) -> str:
    """The tag of a worker that runs the per-release targets on FreeBSD ``os_release`` (``14.3``)."""
    return f"{FREEBSD_WORKER_TAG}{os_release}-{arch}"
