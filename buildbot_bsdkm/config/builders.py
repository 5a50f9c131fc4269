"""Which builders a Buildbot master has, from ``bsdkm.yml`` and its workers: the one rule the
Buildbot shell builds them by (``buildbot/master_config``, ``candidate``, ``bisect_builder``), and what
``init master`` and ``buildbot checkconfig`` say about them: the builders the workers allow, and
which worker would add the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..contract import builder_name
from ..targets import get as target_row
from ..targets import os_release_tag
from .bsdkm_yml import Config
from .worker_kinds import KINDS
from .workers import PasswordRef, WorkerSpec

BISECT_BUILDER = "bisect"
LINUX_RELEASE_BUILDER = "release/linux"


@dataclass(frozen=True)
class PlannedBuilder:
    """A builder the master has: its name, the workers that may run it, what it runs."""

    name: str
    workers: tuple[str, ...]
    targets: tuple[str, ...]
    variant: str | None = None  # a (target, variant) builder's variant
    freebsd_release: str | None = None  # a release/freebsd-X.Y builder's release


def pair_builders(config: Config, specs: Sequence[WorkerSpec]) -> tuple[list[PlannedBuilder], list[str]]:
    """One builder per (target, variant), disabled variants included (force and nightly runs use
    them), for each pair a worker can run; and the pairs no worker can run."""
    out, orphans = [], []
    for target, variant in config.pairs(variants=list(config.variants)):
        names = tuple(s.name for s in specs if s.can_run(target))
        name = builder_name(target, variant)
        if names:
            out.append(PlannedBuilder(name, names, (target,), variant=variant))
        else:
            orphans.append(name)
    return out, orphans


def release_builders(config: Config, specs: Sequence[WorkerSpec]) -> list[PlannedBuilder]:
    """``release/linux`` on a worker that runs every target but the per-release ones, and one
    ``release/freebsd-X.Y`` per declared release whose tag a worker carries."""
    per_release = tuple(t for t in config.targets
                        if (row := target_row(t)) is not None and row.per_os_release)
    others = tuple(t for t in config.targets if t not in per_release)
    out = []
    linux = tuple(s.name for s in specs if others and all(s.can_run(t) for t in others))
    if linux:
        out.append(PlannedBuilder(LINUX_RELEASE_BUILDER, linux, others))
    if per_release:
        for rel in config.release.freebsd_releases:
            tag = os_release_tag(rel, config.release.arch)
            names = tuple(s.name for s in specs if tag in s.tags)
            if names:  # otherwise the report of every release builder lists it as "not covered"
                out.append(PlannedBuilder(f"release/freebsd-{rel}", names, per_release, freebsd_release=rel))
    return out


def bisect_workers(config: Config, specs: Sequence[WorkerSpec]) -> tuple[str, ...]:
    """The workers the ``bisect`` builder may use: any that runs one of the targets."""
    return tuple(s.name for s in specs if any(s.can_run(t) for t in config.targets))


def builder_names(config: Config, specs: Sequence[WorkerSpec]) -> list[str]:
    """Every builder a master with these workers has, in the order ``master_config`` adds them."""
    names = [b.name for b in pair_builders(config, specs)[0]]
    names += [b.name for b in release_builders(config, specs)]
    return names + ([BISECT_BUILDER] if bisect_workers(config, specs) else [])


def _group_of(name: str) -> tuple[str, str]:
    """(group, member): ``userspace/noasm`` is (userspace, noasm), ``release/freebsd-14.3``
    (release/freebsd, 14.3), ``bisect`` and ``release/linux`` groups of their own."""
    head, sep, tail = name.partition("/")
    if not sep or name == LINUX_RELEASE_BUILDER:
        return name, ""
    if head == "release":
        family, _, release = tail.rpartition("-")
        return f"{head}/{family}", release
    return head, tail


def grouped(names: Sequence[str]) -> list[str]:
    """``userspace/{intelasm,noasm}``, ``bisect``, ``release/freebsd-{13.5,14.3}``: one entry a group."""
    groups: dict[str, list[str]] = {}
    for name in names:
        group, member = _group_of(name)
        groups.setdefault(group, []).append(member)
    out = []
    for group, members in groups.items():
        named = [m for m in members if m]
        joiner = "-" if group.startswith("release/") else "/"
        if not named:
            out.append(group)
        elif len(named) == 1:
            out.append(f"{group}{joiner}{named[0]}")
        else:
            out.append(f"{group}{joiner}{{{','.join(named)}}}")
    return out


def _kind_hint(kind: str) -> str:
    k = KINDS[kind]
    where = f"tags [{', '.join(k.tags)}]" + (f", targets [{', '.join(k.targets)}]" if k.targets else "")
    return f"--worker NAME:{kind} ({where})"


def missing(config: Config, specs: Sequence[WorkerSpec]) -> list[tuple[str, list[str]]]:
    """The builders no worker here runs, each with what adds it: an ``init master`` worker kind's
    flag, else (a release of FreeBSD) the tag a worker needs. In the order a master adds them."""
    have = set(builder_names(config, specs))
    found: dict[str, str] = {}
    probes = [(_kind_hint(k.name), k.spec("NAME")) for k in KINDS.values()]
    for rel in config.release.freebsd_releases:
        tag = os_release_tag(rel, config.release.arch)
        tagged = WorkerSpec("NAME", PasswordRef("secret", "NAME"), tags=(tag,))
        probes.append((f"a worker tagged {tag}", tagged))
    for hint, probe in probes:
        for name in builder_names(config, [*specs, probe]):
            if name not in have and name not in found:
                found[name] = hint
    # In the master's own order, each name once, with the first hint that adds it.
    order = builder_names(config, [*specs, *(p for _, p in probes)])
    by_hint: dict[str, list[str]] = {}
    for name in [n for n in order if n in found]:
        by_hint.setdefault(found[name], []).append(name)
    return list(by_hint.items())


def coverage_lines(config: Config, specs: Sequence[WorkerSpec]) -> list[str]:
    """What ``init master`` and ``checkconfig`` say: the builders these workers allow, then each
    group of the others with the flag (or tag) that adds it."""
    have = builder_names(config, specs)
    lines = [f"builders: {', '.join(grouped(have)) or 'none'} (workers: {', '.join(s.name for s in specs)})"]
    rest = missing(config, specs)
    if rest:
        lines.append("not on this master, for want of a worker that runs them:")
        for hint, names in rest:
            lines += [f"  {group}: {hint}" for group in grouped(names)]
    return lines
