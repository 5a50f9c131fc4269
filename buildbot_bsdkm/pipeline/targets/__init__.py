"""Every target the pipeline knows, as ``base.Target`` objects: the one list, and where a name
becomes a target.

The list is ``buildbot_bsdkm/targets.py``'s ``registered()``: the built-in targets, then those of
the entry-point group ``bsdkm_ci.targets``. What a target is (a kernel target, a perf target, one
whose benchmark repeats) is its row, ``TARGET.facts``. The list is read on first call, never at
import, since a target's own module imports this package.
"""

from __future__ import annotations

from ... import targets as rows
from .base import KernelTarget, Target


def all_targets() -> dict[str, Target]:
    """Every target by name, in the list's order; an entry point that holds no ``Target`` is named."""
    out: dict[str, Target] = {}
    for name, t in rows.registered().items():
        if not isinstance(t, Target):
            raise rows.TargetPluginError(f"entry point {rows.GROUP}: {name}: {t!r} is no "
                                         "buildbot_bsdkm.pipeline.targets.base.Target")
        out[name] = t
    return out


def kernel_targets() -> dict[str, KernelTarget]:
    return {n: t for n, t in all_targets().items() if isinstance(t, KernelTarget)}


def get(name: str) -> Target | None:
    return all_targets().get(name)


def perf_measurement(name: str) -> bool:
    """Whether ``name``'s benchmark measures the module's performance (an unknown name: no)."""
    t = get(name)
    return t is not None and t.perf_measurement


def measures_base(name: str) -> bool:
    """Whether a base is built next to the head and measured with it in rounds on ``name``."""
    t = get(name)
    return t is not None and t.measures_base()


def bench_repeats(name: str) -> bool:
    t = get(name)
    return t is not None and t.bench_repeats
