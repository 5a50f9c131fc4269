"""Every target the pipeline knows, one entry per target file: the one place a name becomes a target.

Stages ask this registry what a target is (a kernel target, a perf target, one whose benchmark
repeats) instead of comparing names; each answer is the target's row in ``buildbot_bsdkm/targets.py``
(``Target.facts``), which the layers below the pipeline read directly. A new target is its own file,
its row there and a line here (``tests/test_targets.py``: the rows and this registry agree).
"""

from __future__ import annotations

from . import userspace
from .base import KernelTarget, Target
from .freebsd_kmod import target as freebsd
from .freebsd_kmod_qemu import target as freebsd_qemu
from .linux_kmod_qemu import target as linux_target

TARGETS: dict[str, Target] = {
    t.name: t for t in (userspace.TARGET, linux_target.TARGET, freebsd.TARGET, freebsd_qemu.TARGET)
}
KERNEL_TARGETS: dict[str, KernelTarget] = {n: t for n, t in TARGETS.items() if isinstance(t, KernelTarget)}


def get(name: str) -> Target | None:
    return TARGETS.get(name)


def is_kernel(name: str) -> bool:
    return name in KERNEL_TARGETS


def perf_measurement(name: str) -> bool:
    """Whether ``name``'s benchmark measures the module's performance (an unknown name: no)."""
    t = TARGETS.get(name)
    return t is not None and t.perf_measurement


def measures_base(name: str) -> bool:
    """Whether a base is built next to the head and measured with it in rounds on ``name``."""
    t = TARGETS.get(name)
    return t is not None and t.measures_base()


def bench_repeats(name: str) -> bool:
    t = TARGETS.get(name)
    return t is not None and t.bench_repeats
