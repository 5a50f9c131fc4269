"""``freebsd-kmod-qemu``'s options: its keys under ``targets.freebsd-kmod-qemu``, and ``freebsd:``,
the section of ``bsdkm.yml`` that says where its FreeBSD kernels, loader and sources come from.

Both are read when the config loads (``config/target_options.py``): a bad value names its file,
line and key before anything is fetched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .... import targets
from ....config.bsdkm_yml import Config
from ....support.yaml_reader import At, file_path
from ....support.yaml_schema import STRING, Kind, choice, integer, number, option, section, string

NAME = targets.FREEBSD_KMOD_QEMU.name
KERNEL_KINDS = ("debug", "release")
RELEASE_NAME = r"\d+\.\d+-(?:RELEASE|BETA\d*|RC\d*|STABLE|CURRENT)"
# CURRENT alone: the newest *-CURRENT the mirror lists, so the name need not change when main moves on.
SNAPSHOT_NAME = r"(?:\d+\.\d+-(?:CURRENT|STABLE|PRERELEASE)|CURRENT)"


def release_mirror_problem(mirror: str) -> str | None:
    """Why ``mirror`` cannot serve FreeBSD release sets (None: it can): over plain http anyone on
    the path can hand out their own sets with a MANIFEST that vouches for them."""
    if "://" not in mirror or mirror.startswith(("https://", "file://")):
        return None
    return f"{mirror!r} is not an https:// URL or a local directory (the sets' MANIFEST is unsigned)"


@dataclass(frozen=True)
class FreeBSDConfig:
    """``freebsd:`` where ``freebsd-kmod-qemu`` gets its kernels, loader and kernel sources.

    One of three: FreeBSD's distribution sets (``release`` for the release kernel, ``snapshot``
    for the debug kernel, from ``mirror``), a FreeBSD source tree with a built kernel (``src``,
    ``kernel``), or a directory of one's own kernels (``kit``). With none of them the target
    cannot run, and says so.
    """

    kit: Path | None = option(STRING)  # a directory of one's own kernels (boot/, sysroot/)
    release: str | None = option(string(At.string, f"^{RELEASE_NAME}$"))  # "15.0-RELEASE": the release kernel
    # "16.0-CURRENT", or "CURRENT" (the newest the mirror lists): its GENERIC (INVARIANTS, WITNESS) is
    # the debug kernel
    snapshot: str | None = option(string(At.string, f"^{SNAPSHOT_NAME}$"))
    mirror: str | None = option(STRING)  # default https://download.freebsd.org; https:// or a directory
    arch: str = option(STRING, "amd64")
    # the release's MANIFEST, pinned (the mirror's is unsigned)
    manifest_sha256: str | None = option(string(At.string, r"^[0-9a-f]{64}$"))
    src: Path | None = option(STRING)  # a FreeBSD source tree (/usr/src)
    kernel: Path | None = option(STRING)  # the kernel built from ``src``
    loader: Path | None = option(STRING)  # the EFI loader booting it (default /boot/loader_simp.efi)
    kernel_kind: str = option(choice(KERNEL_KINDS), "release")  # which of ``kernels:`` the ``src`` kernel is

    @property
    def configured(self) -> bool:
        return bool(self.kit or self.release or self.snapshot or self.src)

    @classmethod
    def from_yaml(cls, values: dict[str, Any], m: dict[str, At], base: Path) -> FreeBSDConfig:
        """Paths from the file's directory, each there; one source of kernels; keys that need another."""

        def path(key: str, want_dir: bool) -> Path | None:
            value = None if values[key] is None else file_path(base, values[key])
            if value is not None and not (value.is_dir() if want_dir else value.is_file()):
                raise m[key].error(f"{value} is not a {'directory' if want_dir else 'file'}")
            return value

        kit, src = path("kit", True), path("src", True)
        kernel, loader = path("kernel", False), path("loader", False)
        release, snapshot = values["release"], values["snapshot"]
        if release is not None and not re.fullmatch(RELEASE_NAME, release):
            raise m["release"].error(f"{release!r} is not a FreeBSD release name like 15.0-RELEASE")
        if snapshot is not None and not re.fullmatch(SNAPSHOT_NAME, snapshot):
            raise m["snapshot"].error(f"{snapshot!r} is not a FreeBSD snapshot name like 16.0-CURRENT, "
                                      "or CURRENT (the newest the mirror lists)")
        sets = [k for k in ("release", "snapshot") if k in m]
        chosen = [k for k, v in (("kit", kit), ("src", src), ("sets", sets)) if v]
        if len(chosen) > 1:
            key = "src" if src is not None and kit is not None else (sets[0] if sets else "src")
            raise m[key].error("give one of kit, src, or release/snapshot (the distribution sets)")
        if src is not None and kernel is None:
            raise m["src"].error("a source tree needs the kernel built from it: give freebsd.kernel too")
        for key in ("kernel", "loader", "kernel_kind"):
            if key in m and src is None:
                raise m[key].error("belongs to a source tree: give freebsd.src too")
        mirror = values["mirror"]
        if mirror is not None and release_mirror_problem(mirror):
            raise m["mirror"].error(str(release_mirror_problem(mirror)))
        if mirror is not None and "://" not in mirror:
            mirror = str(file_path(base, mirror))
        pin = values["manifest_sha256"]
        if pin is not None and not re.fullmatch(r"[0-9a-f]{64}", pin):
            raise m["manifest_sha256"].error(f"must be the MANIFEST's SHA-256 (64 lowercase hex digits), "
                                             f"not {pin!r}")
        if pin is not None and release is None:
            # A snapshot is rebuilt, so its MANIFEST changes: only a release's can be pinned.
            raise m["manifest_sha256"].error("pins a release's MANIFEST: give freebsd.release too")
        return cls(kit=kit, release=release, snapshot=snapshot, mirror=mirror, arch=values["arch"],
                   manifest_sha256=pin, src=src, kernel=kernel, loader=loader,
                   kernel_kind=values["kernel_kind"])


def _kernels(at: At) -> tuple[str, ...]:
    kinds = at.names()
    if not kinds:
        raise at.error(f"must name at least one kernel ({', '.join(KERNEL_KINDS)})")
    bad = [k for k in kinds if k not in KERNEL_KINDS]
    if bad:
        raise at.error(f"must be {' or '.join(KERNEL_KINDS)}, or a list of them, not {bad[0]!r}")
    return kinds


_KIND = {"enum": list(KERNEL_KINDS)}
KERNELS = Kind({"anyOf": [_KIND, {"type": "array", "items": _KIND, "minItems": 1}]}, _kernels)


@dataclass(frozen=True)
class FreeBSDQemuOptions:
    """``targets.freebsd-kmod-qemu``'s own keys, and the ``freebsd:`` section."""

    kernels: tuple[str, ...] = option(KERNELS, KERNEL_KINDS)  # the kernels each variant boots
    cpu: str = option(STRING, "max")  # QEMU's -cpu
    memory_mb: int = option(integer(1), 1024)
    boot_timeout_s: float | None = option(number(positive=True))  # the VM's hard limit; else timeouts.load
    freebsd: FreeBSDConfig = section(FreeBSDConfig)


def freebsd_options(config: Config) -> FreeBSDQemuOptions:
    """The target's options as ``config`` read them (every default for a config made in code)."""
    read = config.target_options.get(NAME)
    return read if isinstance(read, FreeBSDQemuOptions) else FreeBSDQemuOptions()
