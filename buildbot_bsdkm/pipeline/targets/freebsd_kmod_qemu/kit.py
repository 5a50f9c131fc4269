"""The kernels a ``freebsd-kmod-qemu`` run boots and the sources its module is built against, in one
layout (a kit): made from FreeBSD's distribution sets (``release_set``), seen through a source tree
and the kernel built from it, or a directory of one's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .... import targets
from ....config.bsdkm_yml import Config
from ....contract import TARGET_UNAVAILABLE
from ...runtime.source import cache_root
from ...runtime.stage_error import StageError, infra_error
from .._freebsd import freebsd_kmod_dir
from .options import freebsd_options
from .release_set import (
    CLANG_HEADERS,
    DEFAULT_MIRROR,
    STAMP,
    KitFacts,
    ReleaseSpec,
    SetRetry,
    kit_facts,
    release_kit,
    resolve_snapshot,
)

TARGET_NAME = targets.FREEBSD_KMOD_QEMU.name
DEFAULT_VERSION = "15.0"  # a kit whose sources do not say their version

NEWVERS_REVISION = re.compile(r'^REVISION="(?P<version>\d+\.\d+)"', re.M)


@dataclass(frozen=True)
class Kit:
    """Kernels, loader and module-build sources in one layout: ``boot/kernel-<name>[.xz]``,
    ``boot/loader_simp.efi``, ``sysroot/sys``, ``sysroot/share/mk``."""

    root: Path

    @property
    def sys_dir(self) -> Path:
        return self.root / "sysroot" / "sys"

    @property
    def share_mk(self) -> Path:
        return self.root / "sysroot" / "share" / "mk"

    @property
    def xargs(self) -> Path:
        """The kit's ``bsdxargs``, else ours (a release's sets carry none)."""
        own = self.root / "tools" / "bsdxargs"
        return own if own.is_file() else _kmod_freebsd() / "bsdxargs"

    @property
    def loader(self) -> Path:
        return self.root / "boot" / "loader_simp.efi"

    def cryptodev(self, name: str) -> Path:
        """The ``cryptodev.ko`` from the same ``kernel.txz`` as kernel ``name`` (GENERIC has no
        ``device cryptodev``: ``/dev/crypto`` is this module's)."""
        return self.root / "boot" / f"cryptodev-{name}.ko"

    def facts(self) -> KitFacts | None:
        """What the kit was made from, when it was made from FreeBSD's sets."""
        return kit_facts(self.root)

    def kernel(self, name: str) -> Path:
        """``name``: debug, release, release-crypto (``boot/kernel-<name>.xz``, or unpacked without it)."""
        packed = self.root / "boot" / f"kernel-{name}.xz"
        plain = packed.with_suffix("")
        return plain if plain.is_file() and not packed.is_file() else packed

    def missing(self) -> list[str]:
        need = [self.sys_dir / "conf" / "kmod.mk", self.share_mk / "bsd.kmod.mk", self.xargs, self.loader]
        return [str(p) for p in need if not p.exists()]

    @property
    def version(self) -> str:
        """The FreeBSD version its sources are (``sys/conf/newvers.sh``), which the module is built for."""
        newvers = self.sys_dir / "conf" / "newvers.sh"
        try:
            m = NEWVERS_REVISION.search(newvers.read_text(errors="replace"))
        except OSError:
            m = None
        return m["version"] if m else DEFAULT_VERSION

    @property
    def triple(self) -> str:
        return f"x86_64-unknown-freebsd{self.version}"

    def identity(self) -> str:
        """What a module build depends on in the kit (the sysroot's checksums when listed)."""
        sums = self.root / "SHA256SUMS"
        if sums.is_file():
            lines = [ln for ln in sums.read_text(errors="replace").splitlines() if "sysroot/" in ln]
            return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]
        manifest = self.root.parent / "MANIFEST"
        if (self.root / STAMP).is_file() and manifest.is_file():  # a set's kit: its MANIFEST names every byte
            return hashlib.sha256(manifest.read_bytes()).hexdigest()[:16]
        return str(self.root.resolve())


def _kmod_freebsd() -> Path:
    return freebsd_kmod_dir()


def unavailable(stage: str, reason: str, detail: str = "") -> StageError:
    """A run this machine cannot do: ``reason`` names the key to set, ``detail`` what went wrong."""
    return infra_error(stage, TARGET_UNAVAILABLE, reason, [detail] if detail else None)


def src_kit(config: Config, cache: Path) -> Kit:
    """A FreeBSD source tree and the kernel built from it, seen through the kit layout (symlinks)."""
    fb = freebsd_options(config).freebsd
    assert fb.src is not None and fb.kernel is not None
    loader = fb.loader or Path("/boot/loader_simp.efi")
    name = "release-crypto" if fb.kernel_kind == "release" else "debug"
    links = {
        "sysroot/sys": fb.src / "sys",
        "sysroot/share/mk": fb.src / "share" / "mk",
        f"sysroot/{CLANG_HEADERS}": fb.src / CLANG_HEADERS,
        "boot/loader_simp.efi": loader,
        f"boot/kernel-{name}": fb.kernel,
    }
    resolved = json.dumps({k: str(v.resolve()) for k, v in links.items()})
    key = hashlib.sha256(resolved.encode()).hexdigest()[:16]
    root = cache / "freebsd-src" / key
    for rel, target in links.items():
        link = root / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        # Another run may make the same link at the same moment: the key names its target, so
        # whichever of the two is there is the right one.
        with contextlib.suppress(FileExistsError):
            link.symlink_to(target.resolve())
    return Kit(root)


@dataclass
class Kits:
    """The kit each kernel kind boots from, and what the configuration leaves out.

    ``notes``: kinds nothing configured gives (said, not failed); ``not_run``: kinds configured
    whose sets cannot be had, with why (each is reported not run, in Buildbot and the Action an
    infrastructure failure); ``chosen``: how a ``CURRENT`` snapshot was resolved.
    """

    found: dict[str, Kit] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    not_run: dict[str, str] = field(default_factory=dict)
    chosen: list[str] = field(default_factory=list)


def kits(config: Config, kinds: Sequence[str], stage: str = "build") -> Kits:
    """The kit of each kernel kind in ``kinds``.

    Raises ``target-unavailable`` when no kind can be had: nothing configured, or no set reachable.
    """
    fb = freebsd_options(config).freebsd
    if fb.kit is not None:
        return Kits({kind: Kit(fb.kit) for kind in kinds})
    cache = cache_root(config)
    if fb.src is not None:
        kind = fb.kernel_kind
        notes = [f"{k} kernel: not covered (freebsd.src gives the {kind} kernel only)"
                 for k in kinds if k != kind]
        return Kits({kind: src_kit(config, cache)} if kind in kinds else {}, notes)
    specs = {"release": fb.release, "debug": fb.snapshot}
    if not any(specs[k] for k in kinds):
        raise unavailable(stage, "no FreeBSD kernels configured (freebsd.release, freebsd.snapshot)",
                          "freebsd-kmod-qemu boots FreeBSD's own kernels: name a release and a snapshot, "
                          "a source tree (freebsd.src) or a kit (freebsd.kit) in bsdkm.yml")
    out = Kits()
    failures: list[StageError] = []
    mirror = fb.mirror or DEFAULT_MIRROR
    retry = SetRetry(config.retry.max_infra_retries, tuple(config.retry.backoff_s))
    for kind in kinds:
        name = specs[kind]
        if not name:
            key = "freebsd.snapshot" if kind == "debug" else "freebsd.release"
            out.notes.append(f"{kind} kernel: not covered (no {key} configured)")
            continue
        try:
            resolved, how = resolve_snapshot(name, mirror, fb.arch, cache, timeout_s=config.timeout("fetch"))
            if how:
                out.chosen.append(f"{kind} kernel: {how}")
            spec = ReleaseSpec(resolved, mirror, fb.arch, fb.manifest_sha256 if kind == "release" else None)
            out.found[kind] = Kit(release_kit(spec, cache, timeout_s=config.timeout("fetch"), retry=retry,
                                              requested=name))
        except StageError as e:
            if e.failure.reason != TARGET_UNAVAILABLE:
                raise  # a set that is there but wrong is never "not run"
            failures.append(e)
            out.not_run[kind] = e.failure.message
    if not out.found and failures:
        raise unavailable(stage, "no FreeBSD release set reachable (freebsd.mirror)",
                          f"{mirror}: " + "; ".join(e.failure.message for e in failures))
    if not out.found:
        raise unavailable(stage, "no FreeBSD kernel for the configured kernels "
                          "(freebsd.release, freebsd.snapshot)", "; ".join(out.notes))
    return out


def find_kit(config: Config, stage: str = "build") -> Kit:
    """The first configured kernel kind's kit, checked complete (the configure stage's question)."""
    found = kits(config, kernels_option(config), stage).found
    for kit in found.values():
        check_kit(kit, stage)
    return next(iter(found.values()))


def check_kit(kit: Kit, stage: str) -> None:
    if not kit.root.is_dir():
        raise unavailable(stage, f"no FreeBSD kit at {kit.root} (freebsd.kit)")
    missing = kit.missing()
    if missing:
        raise infra_error(stage, TARGET_UNAVAILABLE,
                          f"FreeBSD kit {kit.root} is incomplete: missing {', '.join(missing)}")


def kernels_option(config: Config) -> tuple[str, ...]:
    return freebsd_options(config).kernels
