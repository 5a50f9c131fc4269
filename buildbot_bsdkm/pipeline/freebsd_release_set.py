"""A FreeBSD release's distribution sets as the kit ``freebsd-kmod-qemu`` builds against and boots.

The production path (``freebsd: {release: 15.0-RELEASE, mirror: URL}``): ``kernel.txz`` (the
GENERIC kernel: ``device crypto``, MSDOSFS, so the module is kldloaded from a FAT root),
``base.txz`` (only ``boot/loader_simp.efi``) and ``src.txz`` (``sys/``, ``share/mk`` and clang's
x86 intrinsic headers) from ``<mirror>/<arch>/<release>/``, each checked against the release's
``MANIFEST`` before anything is unpacked, and unpacked once into the cache in the kit's layout.
A release has no INVARIANTS/WITNESS kernel, so its ``debug`` kind is reported as not covered.

The MANIFEST comes unsigned from the same mirror as the sets, so on its own the check catches
corruption, not a lying mirror: the mirror must be ``https://`` (or a local directory), and
``freebsd.manifest_sha256`` pins the MANIFEST a release is known to have. Only the members named
in ``UNPACK`` are taken (files by their exact name, trees by their directory), each at most once.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..config.bsdkm_yml import release_mirror_problem as mirror_problem
from .errors import infra_error, real_error
from .locks import exclusive

DEFAULT_MIRROR = "https://download.freebsd.org/releases"
SETS = ("kernel.txz", "base.txz", "src.txz")
CLANG_HEADERS = "contrib/llvm-project/clang/lib/Headers"  # bsdkm/Makefile's -I for AES-NI code
# What each set gives the kit: archive member prefix -> place in the kit.
UNPACK: dict[str, tuple[tuple[str, str], ...]] = {
    "kernel.txz": (("boot/kernel/kernel", "boot/kernel-release-crypto"),),
    "base.txz": (("boot/loader_simp.efi", "boot/loader_simp.efi"),),
    "src.txz": (
        ("usr/src/sys/", "sysroot/sys/"),
        ("usr/src/share/mk/", "sysroot/share/mk/"),
        (f"usr/src/{CLANG_HEADERS}/", f"sysroot/{CLANG_HEADERS}/"),
    ),
}
SHA256 = re.compile(r"[0-9a-f]{64}")
MANIFEST_LINE = re.compile(r"^(?P<name>[\w.-]+\.txz)\t(?P<sha256>[0-9a-f]{64})\t(?P<files>\d+)\t")
STAMP = ".bsdkm-release-kit"


@dataclass(frozen=True)
class ReleaseSpec:
    release: str  # "15.0-RELEASE"
    mirror: str = DEFAULT_MIRROR  # an https:// URL or a local directory (a path or file://)
    arch: str = "amd64"
    manifest_sha256: str | None = None  # the MANIFEST's own digest, pinned in the config

    def url(self, name: str) -> str:
        base = self.mirror.rstrip("/")
        if "://" not in base:
            base = Path(base).resolve().as_uri()
        return f"{base}/{self.arch}/{self.release}/{name}"


def parse_manifest(text: str, source: str) -> dict[str, str]:
    """``MANIFEST`` (tab-separated: set, sha256, file count, name, description, default) -> set: sha256."""
    sums = {m["name"]: m["sha256"] for m in map(MANIFEST_LINE.match, text.splitlines()) if m}
    missing = [s for s in SETS if s not in sums]
    if missing:
        raise infra_error("fetch", "fetch", f"{source}: no checksum for {', '.join(missing)} in MANIFEST")
    return sums


def _download(url: str, dest: Path, timeout_s: float) -> None:
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp, open(tmp, "wb") as out:  # noqa: S310
            shutil.copyfileobj(resp, out, 1 << 20)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        tmp.unlink(missing_ok=True)
        reason = getattr(e, "reason", e)
        raise infra_error("fetch", "network", f"cannot fetch {url}: {reason}") from None
    tmp.replace(dest)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _safe_member(name: str) -> str | None:
    """The member's path without a leading ``./``; None for anything that could leave the kit."""
    path = PurePosixPath(name)
    parts = [p for p in path.parts if p not in (".", "")]
    if path.is_absolute() or ".." in parts:
        return None
    return "/".join(parts)


def _place(name: str, rules: tuple[tuple[str, str], ...]) -> str | None:
    """Where member ``name`` goes in the kit: a rule without a trailing ``/`` is one file, matched
    exactly (``boot/kernel/kernel``, never ``boot/kernel/kernel.symbols``); one with it, a tree."""
    for rule, place in rules:
        if not rule.endswith("/"):
            if name == rule:
                return place
        elif name == rule.rstrip("/"):
            return place.rstrip("/")
        elif name.startswith(rule):
            return place + name[len(rule):]
    return None


def _unpack(archive: Path, rules: tuple[tuple[str, str], ...], kit: Path) -> int:
    written: set[str] = set()
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar:
            name = _safe_member(member.name)
            if name is None or not (member.isfile() or member.isdir()):
                continue
            place = _place(name, rules)
            if place is None:
                continue
            target = kit / place
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if place in written:
                # A later member of the same name would replace what was checked as the first.
                raise real_error("fetch", "integrity", f"{archive.name}: member {name} appears twice")
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(member)
            assert src is not None
            with src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            written.add(place)
    return len(written)


def release_kit(spec: ReleaseSpec, cache: Path, *, timeout_s: float = 900.0) -> Path:
    """The kit directory for ``spec`` in ``cache``: fetched, checked against MANIFEST and unpacked once."""
    problem = mirror_problem(spec.mirror)
    if problem:
        raise real_error("fetch", "config", f"freebsd.mirror: {problem}")
    if spec.manifest_sha256 is not None and not SHA256.fullmatch(spec.manifest_sha256):
        raise real_error("fetch", "config", f"freebsd.manifest_sha256: {spec.manifest_sha256!r} is not "
                         "64 lowercase hex digits")
    home = cache / "freebsd-release" / f"{spec.release}-{spec.arch}"
    kit = home / "kit"
    manifest = home / "MANIFEST"
    with exclusive(cache / "locks" / f"freebsd-release-{spec.release}-{spec.arch}.lock"):
        if (kit / STAMP).is_file() and (
                spec.manifest_sha256 is None
                or (manifest.is_file() and _sha256(manifest) == spec.manifest_sha256)):
            return kit
        home.mkdir(parents=True, exist_ok=True)
        _download(spec.url("MANIFEST"), manifest, timeout_s)
        if spec.manifest_sha256 is not None:
            got = _sha256(manifest)
            if got != spec.manifest_sha256:
                manifest.unlink(missing_ok=True)
                raise real_error("fetch", "integrity", f"{spec.url('MANIFEST')} has sha256 {got}, "
                                 f"freebsd.manifest_sha256 pins {spec.manifest_sha256}")
        sums = parse_manifest(manifest.read_text(encoding="utf-8", errors="replace"), spec.url("MANIFEST"))
        for name in SETS:
            archive = home / name
            if not archive.is_file() or _sha256(archive) != sums[name]:
                _download(spec.url(name), archive, timeout_s)
            got = _sha256(archive)
            if got != sums[name]:
                archive.unlink(missing_ok=True)
                # A fresh download that still disagrees with MANIFEST is tampering or a broken mirror:
                # an integrity failure, never retried (like a Debian tarball's checksum).
                raise real_error("fetch", "integrity", f"checksum mismatch for {spec.url(name)}: MANIFEST "
                                 f"says {sums[name]}, got {got}")
        shutil.rmtree(kit, ignore_errors=True)
        for name in SETS:
            if _unpack(home / name, UNPACK[name], kit) == 0:
                raise infra_error("fetch", "fetch", f"{name} of {spec.release} has none of "
                                  f"{', '.join(p for p, _ in UNPACK[name])}")
        (kit / "tools").mkdir(exist_ok=True)
        (kit / STAMP).write_text(f"{spec.url('MANIFEST')}\n")
    return kit
