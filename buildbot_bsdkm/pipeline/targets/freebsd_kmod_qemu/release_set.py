"""FreeBSD's distribution sets as the kits ``freebsd-kmod-qemu`` builds against and boots.

A release (``releases/<arch>/15.0-RELEASE/``) gives the release kernel, a CURRENT or STABLE
snapshot (``snapshots/<arch>/16.0-CURRENT/``, GENERIC with INVARIANTS and WITNESS) the debug
kernel. From each: ``kernel.txz`` (the GENERIC kernel: ``device crypto``, MSDOSFS, so the module is
kldloaded from a FAT root), ``base.txz`` (only ``boot/loader_simp.efi``) and ``src.txz`` (``sys/``,
``share/mk`` and clang's x86 intrinsic headers), each checked against the set's ``MANIFEST`` before
anything is unpacked, and unpacked once into the cache, shared by every run on the machine.

The MANIFEST comes unsigned from the same mirror as the sets, so on its own the check catches
corruption, not a lying mirror: the mirror must be ``https://`` (or a local directory), and
``freebsd.manifest_sha256`` pins the MANIFEST a release is known to have (a snapshot is rebuilt, so
its MANIFEST cannot be pinned). Only the members named in ``UNPACK`` are taken (files by their exact
name, trees by their directory), each at most once; a member whose path leaves the set is refused.
"""

from __future__ import annotations

import hashlib
import http.client
import lzma
import re
import shutil
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ....config.bsdkm_yml import release_mirror_problem as mirror_problem
from ....contract import TARGET_UNAVAILABLE
from ...runtime.errors import StageError, infra_error, real_error
from ...runtime.locks import exclusive

DEFAULT_MIRROR = "https://download.freebsd.org"
SETS = ("kernel.txz", "base.txz", "src.txz")
CLANG_HEADERS = "contrib/llvm-project/clang/lib/Headers"  # bsdkm/Makefile's -I for AES-NI code
# What each set gives the kit: archive member prefix -> place in the kit. A release's GENERIC is the
# kit's release kernel (device crypto, MSDOSFS: kldloaded from a FAT root), a snapshot's its debug one.
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
UNAVAILABLE = TARGET_UNAVAILABLE  # no set to be had: a local run reports it "not run"


@dataclass(frozen=True)
class ReleaseSpec:
    """One set of distribution sets: a release (``15.0-RELEASE``) or a snapshot (``16.0-CURRENT``)."""

    release: str
    mirror: str = DEFAULT_MIRROR  # an https:// URL or a local directory (a path or file://)
    arch: str = "amd64"
    manifest_sha256: str | None = None  # the MANIFEST's own digest, pinned in the config

    @property
    def snapshot(self) -> bool:
        return not re.search(r"-(?:RELEASE|BETA\d*|RC\d*)$", self.release)

    @property
    def tree(self) -> str:
        return "snapshots" if self.snapshot else "releases"

    def rules(self, name: str) -> tuple[tuple[str, str], ...]:
        if name == "kernel.txz" and self.snapshot:
            return (("boot/kernel/kernel", "boot/kernel-debug"),)
        return UNPACK[name]

    @property
    def version(self) -> str:
        """``15.0``: the FreeBSD version its kernel and sources are (a CURRENT snapshot is the next major)."""
        return self.release.split("-", 1)[0]

    def url(self, name: str) -> str:
        base = self.mirror.rstrip("/")
        if "://" not in base:
            base = Path(base).resolve().as_uri()
        # A mirror given as its releases/ or snapshots/ directory is the same mirror.
        base = re.sub(r"/(?:releases|snapshots)$", "", base)
        return f"{base}/{self.tree}/{self.arch}/{self.release}/{name}"


def parse_manifest(text: str, source: str) -> dict[str, str]:
    """``MANIFEST`` (tab-separated: set, sha256, file count, name, description, default) -> set: sha256."""
    sums = {m["name"]: m["sha256"] for m in map(MANIFEST_LINE.match, text.splitlines()) if m}
    missing = [s for s in SETS if s not in sums]
    if missing:
        raise real_error("fetch", "integrity", f"{source}: no checksum for {', '.join(missing)} in MANIFEST")
    return sums


def _download(url: str, dest: Path, timeout_s: float, reason: str = "network") -> None:
    """``url`` into ``dest`` whole or not at all; ``reason``: what an unreachable ``url`` is called."""
    tmp = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp, open(tmp, "wb") as out:  # noqa: S310
            shutil.copyfileobj(resp, out, 1 << 20)
            expected = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
            got = out.tell()
        if expected is not None and expected.isdigit() and got < int(expected):
            # The connection closed early: http.client hands back what came without a word.
            raise http.client.IncompleteRead(b"\0" * got, int(expected) - got)
    except urllib.error.HTTPError as e:
        tmp.unlink(missing_ok=True)
        raise infra_error("fetch", reason, f"cannot fetch {url}: HTTP {e.code}") from None
    except http.client.IncompleteRead as e:
        tmp.unlink(missing_ok=True)
        raise infra_error("fetch", "network", f"download of {url} was cut off after {len(e.partial)} "
                          f"bytes ({e.expected} more expected)") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError) as e:
        tmp.unlink(missing_ok=True)
        why = getattr(e, "reason", e)
        raise infra_error("fetch", reason, f"cannot fetch {url}: {why}") from None
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
    try:
        tar = tarfile.open(archive, "r:xz")  # noqa: SIM115 - closed by the with below, errors named here
    except (tarfile.TarError, EOFError, OSError) as e:
        raise real_error("fetch", "integrity", f"{archive.name} is no xz tar archive: {e}") from None
    with tar:
        try:
            members = iter(tar)
            for member in members:
                name = _safe_member(member.name)
                if name is None:
                    # Real sets hold only relative paths: one that climbs out is no set of FreeBSD's.
                    raise real_error("fetch", "integrity", f"{archive.name}: member {member.name!r} lies "
                                     "outside the set (absolute or '..')")
                if not (member.isfile() or member.isdir()):
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
        except (tarfile.TarError, EOFError, lzma.LZMAError) as e:
            raise real_error("fetch", "integrity", f"{archive.name} is damaged: {e}") from None
    return len(written)


def release_kit(spec: ReleaseSpec, cache: Path, *, timeout_s: float = 900.0) -> Path:
    """The kit directory for ``spec`` in ``cache``: fetched, checked against MANIFEST and unpacked once.

    A kit is made beside its final place and renamed into it whole, so a failed fetch or unpack
    leaves no half kit; a kit in the cache is used without the network when the mirror cannot be
    reached (a pinned release only when its MANIFEST still matches the pin).
    """
    problem = mirror_problem(spec.mirror)
    if problem:
        raise real_error("fetch", "config", f"freebsd.mirror: {problem}")
    if spec.manifest_sha256 is not None and not SHA256.fullmatch(spec.manifest_sha256):
        raise real_error("fetch", "config", f"freebsd.manifest_sha256: {spec.manifest_sha256!r} is not "
                         "64 lowercase hex digits")
    home = set_home(spec, cache)
    kit = home / "kit"
    manifest = home / "MANIFEST"
    with exclusive(cache / "locks" / f"freebsd-sets-{spec.tree}-{spec.release}-{spec.arch}.lock"):
        cached = (kit / STAMP).is_file() and manifest.is_file()
        if cached and spec.manifest_sha256 is not None and _sha256(manifest) == spec.manifest_sha256:
            return kit
        if cached and not spec.snapshot and spec.manifest_sha256 is None:
            return kit  # a release's sets never change
        home.mkdir(parents=True, exist_ok=True)
        fresh = home / "MANIFEST.new"
        try:
            _download(spec.url("MANIFEST"), fresh, timeout_s, UNAVAILABLE)
        except StageError:
            if cached and spec.snapshot:
                return kit  # the snapshot unpacked last time: the mirror is out of reach, not wrong
            raise
        if spec.manifest_sha256 is not None:
            got = _sha256(fresh)
            if got != spec.manifest_sha256:
                fresh.unlink(missing_ok=True)
                raise real_error("fetch", "integrity", f"{spec.url('MANIFEST')} has sha256 {got}, "
                                 f"freebsd.manifest_sha256 pins {spec.manifest_sha256}")
        if cached and _sha256(fresh) == _sha256(manifest):
            fresh.unlink()
            return kit
        sums = parse_manifest(fresh.read_text(encoding="utf-8", errors="replace"), spec.url("MANIFEST"))
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
        building = home / "kit.new"
        shutil.rmtree(building, ignore_errors=True)
        try:
            for name in SETS:
                if _unpack(home / name, spec.rules(name), building) == 0:
                    raise real_error("fetch", "integrity", f"{name} of {spec.release} has none of "
                                     f"{', '.join(p for p, _ in spec.rules(name))}")
            (building / STAMP).write_text(f"{spec.url('MANIFEST')}\n")
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
        shutil.rmtree(kit, ignore_errors=True)
        building.rename(kit)
        fresh.replace(manifest)
        for name in SETS:  # unpacked: the archives would only double the cache
            (home / name).unlink(missing_ok=True)
    return kit


def set_home(spec: ReleaseSpec, cache: Path) -> Path:
    """Where ``spec``'s sets are kept in the cache: ``MANIFEST`` and the unpacked ``kit/``."""
    return cache / "freebsd-sets" / f"{spec.tree}-{spec.release}-{spec.arch}"


def cached_kit(spec: ReleaseSpec, cache: Path) -> Path | None:
    """The kit an earlier fetch unpacked for ``spec``, if there is one (no network asked)."""
    home = set_home(spec, cache)
    kit = home / "kit"
    return kit if (kit / STAMP).is_file() and (home / "MANIFEST").is_file() else None
