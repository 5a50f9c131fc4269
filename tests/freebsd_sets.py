"""FreeBSD distribution sets for the tests: real ones named by ``BSDKM_FREEBSD_SETS``, or tiny ones
made here in the mirror's layout.

The mirror layout is FreeBSD's (``release/Makefile.mirrors``): ``releases/amd64/15.0-RELEASE/`` and
``snapshots/amd64/16.0-CURRENT/``, each with ``MANIFEST`` (``release/scripts/make-manifest.sh``:
tab-separated set, sha256, file count, name, description, default), ``BUILDDATE`` (YYYYMMDD),
``REVISION`` (the short git hash) and ``GITBRANCH`` (one line each), ``kernel.txz``
(``./boot/kernel/kernel`` and the kernel's modules, ``./boot/kernel/cryptodev.ko`` among them),
``base.txz`` (``./boot/loader_simp.efi``) and ``src.txz`` (``./usr/src/sys``, ``./usr/src/share/mk``,
clang's headers). The sets made here hold a few bytes in each of those places: enough to fetch,
verify and unpack, never to build or boot. They carry a ``SYNTHETIC`` file beside their MANIFEST, so
the tests that build or boot can tell them from real ones.

``python tests/freebsd_sets.py DIR`` writes them to DIR (for ``BSDKM_FREEBSD_SETS=DIR``).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

RELEASE = "15.0-RELEASE"
SNAPSHOT = "16.0-CURRENT"
ENV = "BSDKM_FREEBSD_SETS"
SYNTHETIC = "SYNTHETIC"
KERNEL = b"\x7fELF\x02\x01\x09 synthetic GENERIC kernel"
CRYPTODEV = b"\x7fELF\x02\x01\x09 synthetic cryptodev.ko"
LOADER = b"MZ synthetic loader_simp.efi"
CLANG_HEADERS = "contrib/llvm-project/clang/lib/Headers"
DESCRIPTIONS = {"base.txz": "Base system (MANDATORY)", "kernel.txz": "Kernel (MANDATORY)",
                "src.txz": "System source tree"}

Members = list[tuple[str, bytes]]


def txz(path: Path, members: Members) -> int:
    """An xz tar of ``members`` (name, bytes) at ``path``; the number of files."""
    with tarfile.open(path, "w:xz", preset=0) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return len(members)


def src_members(version: str) -> Members:
    return [
        ("./usr/src/sys/conf/kmod.mk", b"# kmod.mk\n"),
        ("./usr/src/sys/conf/newvers.sh", f'TYPE="FreeBSD"\nREVISION="{version}"\n'.encode()),
        ("./usr/src/share/mk/bsd.kmod.mk", b"# bsd.kmod.mk\n"),
        (f"./usr/src/{CLANG_HEADERS}/wmmintrin.h", b"/* clang */\n"),
        ("./usr/src/bin/sh/main.c", b"/* not for the kit */\n"),
    ]


def write_manifest(where: Path, counts: dict[str, int]) -> Path:
    lines = []
    for name in ("base.txz", "kernel.txz", "src.txz"):
        digest = hashlib.sha256((where / name).read_bytes()).hexdigest()
        default = "off" if name == "src.txz" else "on"
        desc = DESCRIPTIONS[name]
        lines.append(f"{name}\t{digest}\t{counts.get(name, 1)}\t{name[:-4]}\t\"{desc}\"\t{default}")
    manifest = where / "MANIFEST"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def kernel_members(name: str) -> Members:
    return [("./boot/kernel/kernel", KERNEL + name.encode()),
            ("./boot/kernel/cryptodev.ko", CRYPTODEV + name.encode()),
            ("./boot/kernel/aesni.ko", b"\x7fELF not taken")]


def set_facts(name: str) -> dict[str, str]:
    """What release/Makefile.mirrors writes beside a set (``echo ${BUILDDATE} > BUILDDATE``, ...)."""
    branch = "main" if name.endswith("-CURRENT") else f"releng/{name.split('-', 1)[0]}"
    return {"BUILDDATE": "20251204", "REVISION": hashlib.sha256(name.encode()).hexdigest()[:12],
            "GITBRANCH": branch}


def make_set(mirror: Path, name: str, *, kernel: Members | None = None, base: Members | None = None,
             src: Members | None = None, facts: dict[str, str] | None = None) -> Path:
    """One release's or snapshot's sets under ``mirror`` (its directory is returned)."""
    tree = "releases" if name.endswith("-RELEASE") else "snapshots"
    where = mirror / tree / "amd64" / name
    where.mkdir(parents=True, exist_ok=True)
    version = name.split("-", 1)[0]
    for fact, value in (set_facts(name) if facts is None else facts).items():
        (where / fact).write_text(value + "\n")
    counts = {
        "kernel.txz": txz(where / "kernel.txz", kernel if kernel is not None else kernel_members(name)),
        "base.txz": txz(where / "base.txz", base if base is not None else
                        [("./boot/loader_simp.efi", LOADER), ("./etc/rc", b"#!/bin/sh\n")]),
        "src.txz": txz(where / "src.txz", src if src is not None else src_members(version)),
    }
    write_manifest(where, counts)
    (where / SYNTHETIC).write_text("made by tests/freebsd_sets.py: not bootable\n")
    return where


def make_mirror(mirror: Path) -> Path:
    """A release and a snapshot, as the default configuration names them."""
    make_set(mirror, RELEASE)
    make_set(mirror, SNAPSHOT)
    return mirror


def make_kit(root: Path, version: str = "15.0") -> Path:
    """A kit directory of one's own kernels (``freebsd: {kit: DIR}``), synthetic like the sets."""
    for rel, data in (("boot/kernel-debug", KERNEL + b" debug"), ("boot/kernel-release-crypto", KERNEL),
                      ("boot/cryptodev-release-crypto.ko", CRYPTODEV), ("boot/loader_simp.efi", LOADER)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    for name, data in src_members(version):
        rel = name.removeprefix("./usr/src/")
        if rel.startswith(("sys/", "share/", "contrib/")):
            (root / "sysroot" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "sysroot" / rel).write_bytes(data)
    return root


def given_sets() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def sets_for_tests(tmp: Path) -> Path:
    """``BSDKM_FREEBSD_SETS`` when given, else synthetic sets made in ``tmp``."""
    return given_sets() or make_mirror(tmp / "mirror")


def real_sets() -> Path:
    """The real sets a test that builds or boots FreeBSD needs, or skip naming the variable."""
    given = given_sets()
    if given is None:
        pytest.skip(f"builds and boots FreeBSD: set {ENV}=DIR (FreeBSD {RELEASE} and {SNAPSHOT} sets, "
                    "in the mirror's releases/ and snapshots/ layout)")
    if any(given.glob(f"*/amd64/*/{SYNTHETIC}")):
        pytest.skip(f"{ENV}={given} holds synthetic sets: give real FreeBSD sets to build and boot")
    return given


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/freebsd_sets.py DIR")
    print(make_mirror(Path(sys.argv[1])))
