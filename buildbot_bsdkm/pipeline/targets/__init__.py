"""Every target the pipeline knows: the one list, and the one place a name becomes a target.

A target is its module's ``TARGET`` (a ``base.Target``); what it is (a kernel target, a perf target,
one whose benchmark repeats) is its row in ``buildbot_bsdkm/targets.py``, which the layers below the
pipeline read directly. A new target is its own file, its row there and a line here
(``tests/unit/test_targets.py``: the rows and this list agree). A package named in ``BSDKM_TARGETS``
brings its own row and its ``target`` module, read here after the list.
"""

from __future__ import annotations

import importlib

from ... import targets as rows
from . import userspace
from .base import KernelTarget, Target

# Imported by their own module names: an alias of a subpackage's name would replace the subpackage
# on this package, and ``import ...targets.freebsd_kmod.target`` would then fail.
from .freebsd_kmod.target import TARGET as FREEBSD_KMOD
from .freebsd_kmod_qemu.target import TARGET as FREEBSD_KMOD_QEMU
from .linux_kmod_qemu.target import TARGET as LINUX_KMOD_QEMU

BUILT_IN: tuple[Target, ...] = (userspace.TARGET, LINUX_KMOD_QEMU, FREEBSD_KMOD, FREEBSD_KMOD_QEMU)


def _plugin(package: str) -> Target:
    try:
        target = importlib.import_module(f"{package}.target").TARGET
    except (ImportError, AttributeError) as e:
        why = f"{type(e).__name__}: {e}"
        raise RuntimeError(f"{rows.PLUGINS_ENV}: {package}.target: no TARGET ({why})") from None
    if not isinstance(target, Target):
        raise RuntimeError(f"{rows.PLUGINS_ENV}: {package}.target.TARGET is no Target")
    return target


TARGETS: dict[str, Target] = {t.name: t for t in (*BUILT_IN, *map(_plugin, rows.plugin_packages()))}
KERNEL_TARGETS: dict[str, KernelTarget] = {n: t for n, t in TARGETS.items() if isinstance(t, KernelTarget)}


def get(name: str) -> Target | None:
    return TARGETS.get(name)


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
