"""FreeBSD's distribution sets as the kits ``freebsd-kmod-qemu`` builds against and boots.

A release (``releases/<arch>/15.0-RELEASE/``) gives the release kernel, a CURRENT or STABLE
snapshot (``snapshots/<arch>/16.0-CURRENT/``, GENERIC with INVARIANTS and WITNESS) the debug
kernel; ``CURRENT`` alone names the newest ``*-CURRENT`` the mirror's ``snapshots/<arch>/``
listing shows (``resolve_snapshot``). From each: ``kernel.txz`` (the GENERIC kernel: ``device
crypto``, MSDOSFS, so the module is kldloaded from a FAT root; and ``cryptodev.ko``, the
``/dev/crypto`` that GENERIC leaves to a module), ``base.txz`` (only ``boot/loader_simp.efi``)
and ``src.txz`` (``sys/``, ``share/mk`` and clang's x86 intrinsic headers), each checked against
the set's ``MANIFEST`` before anything is unpacked, and unpacked once into the cache, shared by
every run on the machine. The directory's ``BUILDDATE``, ``REVISION`` and ``GITBRANCH`` (which
FreeBSD's ``release/Makefile.mirrors`` writes beside the sets) and the MANIFEST's digest are
kept with the kit (``KitFacts``), so a run can say what it booted.

The MANIFEST comes unsigned from the same mirror as the sets, so on its own the check catches
corruption, not a lying mirror: the mirror must be ``https://`` (or a local directory), and
``freebsd.manifest_sha256`` pins the MANIFEST a release is known to have (a snapshot is rebuilt, so
its MANIFEST cannot be pinned). Only the members named in ``UNPACK`` are taken (files by their exact
name, trees by their directory), each at most once; a member whose path leaves the set is refused.

Whose fault a bad set is: never the code under test's. A snapshot is replaced in place behind a
CDN, so a set that disagrees with its MANIFEST is fetched again after a pause, within the retry
bound, and then an infrastructure failure (``snapshot-changing``). A release's sets never change:
one that disagrees with its MANIFEST or its pin is an infrastructure failure of reason
``integrity``, which the retry rules do not retry (fetching again cannot change it).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import lzma
import os
import re
import shutil
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from ....contract import TARGET_UNAVAILABLE
from ...runtime.locks import exclusive
from ...runtime.stage_error import StageError, infra_error, real_error
from .options import release_mirror_problem as mirror_problem

DEFAULT_MIRROR = "https://download.freebsd.org"
SETS = ("kernel.txz", "base.txz", "src.txz")
CLANG_HEADERS = "contrib/llvm-project/clang/lib/Headers"  # bsdkm/Makefile's -I for AES-NI code
CURRENT = "CURRENT"  # freebsd.snapshot: the newest *-CURRENT the mirror lists
# The files release/Makefile.mirrors writes beside a set's MANIFEST (echo ${BUILDDATE}, ${GITBRANCH},
# ${GITREV}): what was built, from which branch and commit.
FACT_FILES = ("BUILDDATE", "REVISION", "GITBRANCH")
FACT_MAX = 256  # bytes: each is one short line


@dataclass(frozen=True)
class Take:
    """One member of a set the kit takes: ``member`` (a file, or a tree when it ends in ``/``) goes
    to ``place`` in the kit; a set without a required member is no set of FreeBSD's."""

    member: str
    place: str
    required: bool = True


# What each set gives the kit. A release's GENERIC is the kit's release kernel (device crypto,
# MSDOSFS: kldloaded from a FAT root), a snapshot's its debug one; each kernel's cryptodev.ko beside it.
UNPACK: dict[str, tuple[Take, ...]] = {
    "kernel.txz": (Take("boot/kernel/kernel", "boot/kernel-release-crypto"),
                   Take("boot/kernel/cryptodev.ko", "boot/cryptodev-release-crypto.ko", required=False)),
    "base.txz": (Take("boot/loader_simp.efi", "boot/loader_simp.efi"),),
    "src.txz": (
        Take("usr/src/sys/", "sysroot/sys/"),
        Take("usr/src/share/mk/", "sysroot/share/mk/"),
        Take(f"usr/src/{CLANG_HEADERS}/", f"sysroot/{CLANG_HEADERS}/", required=False),
    ),
}
SHA256 = re.compile(r"[0-9a-f]{64}")
MANIFEST_LINE = re.compile(r"^(?P<name>[\w.-]+\.txz)\t(?P<sha256>[0-9a-f]{64})\t(?P<files>\d+)\t")
STAMP = ".bsdkm-release-kit"
FACTS = "set.json"  # in the kit: its KitFacts
UNAVAILABLE = TARGET_UNAVAILABLE  # no set to be had: a local run reports it "not run"
INTEGRITY = "integrity"  # a release's set that is not what it should be: infrastructure, never retried
SNAPSHOT_CHANGING = "snapshot-changing"  # a snapshot's set and MANIFEST disagree: fetched again, then infra
SNAPSHOT_DIR = re.compile(r"(?<![\w.])(?P<major>\d+)\.(?P<minor>\d+)-CURRENT(?![\w.-])")
LISTING_MAX = 1 << 20  # bytes of a directory listing read


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

    def rules(self, name: str) -> tuple[Take, ...]:
        if name == "kernel.txz" and self.snapshot:
            return tuple(Take(t.member, t.place.replace("release-crypto", "debug"), t.required)
                         for t in UNPACK[name])
        return UNPACK[name]

    @property
    def version(self) -> str:
        """``15.0``: the FreeBSD version its kernel and sources are (a CURRENT snapshot is the next major)."""
        return self.release.split("-", 1)[0]

    def url(self, name: str) -> str:
        return f"{tree_url(self.mirror, self.tree, self.arch)}/{self.release}/{name}"


def tree_url(mirror: str, tree: str, arch: str) -> str:
    """``<mirror>/<tree>/<arch>`` as a URL (a local directory as ``file://``)."""
    base = mirror.rstrip("/")
    if "://" not in base:
        base = Path(base).resolve().as_uri()
    # A mirror given as its releases/ or snapshots/ directory is the same mirror.
    base = re.sub(r"/(?:releases|snapshots)$", "", base)
    return f"{base}/{tree}/{arch}"


@dataclass(frozen=True)
class SetRetry:
    """How often a snapshot's set that disagrees with its MANIFEST is fetched again (``retry:``'s
    ``max_infra_retries`` and ``backoff_s``), and how to wait between (tests pass their own)."""

    retries: int = 2
    backoff_s: tuple[float, ...] = (30.0, 120.0)
    pause: Callable[[float], None] = time.sleep

    def wait(self, number: int) -> float:
        seconds = float(self.backoff_s[min(number, len(self.backoff_s)) - 1]) if self.backoff_s else 0.0
        self.pause(seconds)
        return seconds


@dataclass
class KitFacts:
    """What a kit was made from: the set's name and URL, its MANIFEST's digest and the directory's
    BUILDDATE, REVISION and GITBRANCH (None where the mirror has no such file)."""

    name: str
    url: str
    manifest_sha256: str
    builddate: str | None = None
    revision: str | None = None
    gitbranch: str | None = None
    requested: str | None = None  # "CURRENT" when the name was resolved from the mirror's listing
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v not in (None, [])}

    def describe(self) -> str:
        """``16.0-CURRENT (CURRENT): REVISION abc, BUILDDATE 20250101, GITBRANCH main, MANIFEST sha256 …``"""
        named = (("REVISION", self.revision), ("BUILDDATE", self.builddate), ("GITBRANCH", self.gitbranch))
        parts = [f"{label} {value}" for label, value in named if value]
        parts.append(f"MANIFEST sha256 {self.manifest_sha256}")
        asked = f" ({self.requested})" if self.requested and self.requested != self.name else ""
        return f"{self.name}{asked}: " + ", ".join(parts)


def kit_facts(kit: Path) -> KitFacts | None:
    """The facts kept with a set's kit (None for a kit not made from sets); a kit made before they
    were kept still gives its MANIFEST's digest."""
    try:
        raw = json.loads((kit / FACTS).read_text())
        return KitFacts(**{k: raw[k] for k in raw if k in KitFacts.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        pass
    manifest = kit.parent / "MANIFEST"
    if not (kit / STAMP).is_file() or not manifest.is_file():
        return None
    url = (kit / STAMP).read_text().strip()
    return KitFacts(name=url.rsplit("/", 2)[-2] if "/" in url else kit.parent.name, url=url,
                    manifest_sha256=_sha256(manifest))


def parse_manifest(text: str, source: str) -> dict[str, str]:
    """``MANIFEST`` (tab-separated: set, sha256, file count, name, description, default) -> set: sha256."""
    sums = {m["name"]: m["sha256"] for m in map(MANIFEST_LINE.match, text.splitlines()) if m}
    missing = [s for s in SETS if s not in sums]
    if missing:
        raise infra_error("fetch", INTEGRITY, f"{source}: no checksum for {', '.join(missing)} in MANIFEST")
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


def _read_small(url: str, limit: int, timeout_s: float) -> bytes | None:
    """At most ``limit`` bytes of ``url``; None when it cannot be had (no such file, no mirror)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - https or file only
            return bytes(resp.read(limit))
    except (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError, ValueError):
        return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- CURRENT


def newest_current(listing: str) -> str | None:
    """The newest ``N.M-CURRENT`` a directory listing names (an HTML index or plain names)."""
    found = {(int(m["major"]), int(m["minor"])) for m in SNAPSHOT_DIR.finditer(listing)}
    return f"{max(found)[0]}.{max(found)[1]}-CURRENT" if found else None


def resolve_snapshot(name: str, mirror: str, arch: str, cache: Path, *,
                     timeout_s: float = 60.0) -> tuple[str, str | None]:
    """``name`` as a snapshot directory, and a note on how it was chosen: ``CURRENT`` becomes the
    newest ``*-CURRENT`` of the mirror's ``snapshots/<arch>/`` listing (or, with the mirror out of
    reach, the newest one in the cache); any other name is itself."""
    if name != CURRENT:
        return name, None
    where = tree_url(mirror, "snapshots", arch) + "/"
    if where.startswith("file://"):
        local = Path(urllib.request.url2pathname(where[len("file://"):]))
        listing = "\n".join(sorted(os.listdir(local))) if local.is_dir() else None
    else:
        raw = _read_small(where, LISTING_MAX, timeout_s)
        listing = raw.decode("utf-8", "replace") if raw is not None else None
    newest = newest_current(listing) if listing is not None else None
    if newest is not None:
        return newest, f"snapshot CURRENT is {newest}, the newest *-CURRENT {where} lists"
    kits = (cache / "freebsd-sets").glob(f"snapshots-*-CURRENT-{arch}/kit")
    cached = newest_current("\n".join(p.parent.name.removeprefix("snapshots-").removesuffix(f"-{arch}")
                                      for p in kits if (p / STAMP).is_file()))
    why = "cannot be read" if listing is None else "lists no *-CURRENT"
    if cached is not None:
        return cached, (f"snapshot CURRENT is {cached}, the newest in the cache: {where} {why}")
    raise infra_error("fetch", UNAVAILABLE, f"snapshot CURRENT: {where} {why}, and the cache holds no "
                      "CURRENT snapshot (name one, e.g. freebsd.snapshot: 16.0-CURRENT)")


# --------------------------------------------------------------------------- unpacking


def _safe_member(name: str) -> str | None:
    """The member's path without a leading ``./``; None for anything that could leave the kit."""
    path = PurePosixPath(name)
    parts = [p for p in path.parts if p not in (".", "")]
    if path.is_absolute() or ".." in parts:
        return None
    return "/".join(parts)


def _place(name: str, rules: Sequence[Take]) -> Take | None:
    """The rule member ``name`` falls under: a rule without a trailing ``/`` is one file, matched
    exactly (``boot/kernel/kernel``, never ``boot/kernel/kernel.symbols``); one with it, a tree."""
    for take in rules:
        if not take.member.endswith("/"):
            if name == take.member:
                return take
        elif name == take.member.rstrip("/") or name.startswith(take.member):
            return take
    return None


def _target(name: str, take: Take) -> str:
    if not take.member.endswith("/") or name == take.member.rstrip("/"):
        return take.place.rstrip("/")
    return take.place + name[len(take.member):]


def _unpack(archive: Path, rules: Sequence[Take], kit: Path) -> set[Take]:
    """The rules' members of ``archive`` into ``kit``; which rules took anything."""
    written: set[str] = set()
    took: set[Take] = set()
    try:
        tar = tarfile.open(archive, "r:xz")  # noqa: SIM115 - closed by the with below, errors named here
    except (tarfile.TarError, EOFError, OSError) as e:
        raise infra_error("fetch", INTEGRITY, f"{archive.name} is no xz tar archive: {e}") from None
    with tar:
        try:
            for member in tar:
                name = _safe_member(member.name)
                if name is None:
                    # Real sets hold only relative paths: one that climbs out is no set of FreeBSD's.
                    raise infra_error("fetch", INTEGRITY, f"{archive.name}: member {member.name!r} lies "
                                      "outside the set (absolute or '..')")
                if not (member.isfile() or member.isdir()):
                    continue
                take = _place(name, rules)
                if take is None:
                    continue
                place = _target(name, take)
                target = kit / place
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                if place in written:
                    # A later member of the same name would replace what was checked as the first.
                    raise infra_error("fetch", INTEGRITY, f"{archive.name}: member {name} appears twice")
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                assert src is not None
                with src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
                written.add(place)
                took.add(take)
        except (tarfile.TarError, EOFError, lzma.LZMAError) as e:
            raise infra_error("fetch", INTEGRITY, f"{archive.name} is damaged: {e}") from None
    return took


# --------------------------------------------------------------------------- the kit


def _check_pin(spec: ReleaseSpec, manifest: Path) -> None:
    got = _sha256(manifest)
    if spec.manifest_sha256 is not None and got != spec.manifest_sha256:
        manifest.unlink(missing_ok=True)
        raise infra_error("fetch", INTEGRITY, f"{spec.url('MANIFEST')} has sha256 {got}, "
                          f"freebsd.manifest_sha256 pins {spec.manifest_sha256}")


def _fetch_sets(spec: ReleaseSpec, home: Path, sums: dict[str, str], timeout_s: float) -> list[str]:
    """Every set of ``sums`` in ``home``, downloaded unless already there with its digest; the
    sets that disagree with ``sums`` after a fresh download (removed again), as sentences."""
    bad = []
    for name in SETS:
        archive = home / name
        if not archive.is_file() or _sha256(archive) != sums[name]:
            _download(spec.url(name), archive, timeout_s)
        got = _sha256(archive)
        if got != sums[name]:
            archive.unlink(missing_ok=True)
            bad.append(f"checksum mismatch for {spec.url(name)}: MANIFEST says {sums[name]}, got {got}")
    return bad


def release_kit(spec: ReleaseSpec, cache: Path, *, timeout_s: float = 900.0, retry: SetRetry | None = None,
                requested: str | None = None) -> Path:
    """The kit directory for ``spec`` in ``cache``: fetched, checked against MANIFEST and unpacked once.

    A kit is made beside its final place and renamed into it whole, so a failed fetch or unpack
    leaves no half kit; a kit in the cache is used without the network when the mirror cannot be
    reached (a pinned release only when its MANIFEST still matches the pin). ``retry``: how often
    a snapshot caught mid-update is fetched again; ``requested``: the name the config gave
    (``CURRENT``), kept in the kit's facts.
    """
    retry = retry or SetRetry()
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
        _check_pin(spec, fresh)
        fetches = 0
        while True:
            if cached and _sha256(fresh) == _sha256(manifest):
                fresh.unlink()
                return kit
            sums = parse_manifest(fresh.read_text(encoding="utf-8", errors="replace"), spec.url("MANIFEST"))
            bad = _fetch_sets(spec, home, sums, timeout_s)
            fetches += 1
            if not bad:
                break
            if not spec.snapshot:
                # A release's sets never change: fetching again cannot make them agree.
                raise infra_error("fetch", INTEGRITY, bad[0])
            if fetches > retry.retries:
                raise infra_error("fetch", SNAPSHOT_CHANGING,
                                  f"{bad[0]}, after {fetches} fetch(es): the snapshot is being replaced on "
                                  "the mirror (its sets and MANIFEST disagree); try again later")
            # Caught mid-update (the mirror replaces a snapshot in place, behind a CDN): the MANIFEST
            # and the sets again after a pause.
            retry.wait(fetches)
            _download(spec.url("MANIFEST"), fresh, timeout_s, UNAVAILABLE)
        facts = KitFacts(spec.release, spec.url("MANIFEST"), _sha256(fresh), requested=requested,
                         **_directory_facts(spec, timeout_s))
        building = home / "kit.new"
        shutil.rmtree(building, ignore_errors=True)
        try:
            for name in SETS:
                rules = spec.rules(name)
                took = _unpack(home / name, rules, building)
                missing = [t.member for t in rules if t.required and t not in took]
                if missing:
                    raise infra_error("fetch", INTEGRITY, f"{name} of {spec.release} has no "
                                      f"{', '.join(missing)}")
            (building / FACTS).write_text(json.dumps(facts.to_dict(), indent=1))
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
def _directory_facts(spec: ReleaseSpec, timeout_s: float) -> dict[str, str | None]:
    """BUILDDATE, REVISION and GITBRANCH of the set's directory: one line each, None when absent."""
    out: dict[str, str | None] = {}
    for name in FACT_FILES:
        raw = _read_small(spec.url(name), FACT_MAX, min(timeout_s, 60.0))
        line = raw.decode("utf-8", "replace").strip().splitlines()[0].strip() if raw and raw.strip() else None
        # Printable and short, as the mirror writes them: anything else is not shown to anyone.
        out[name.lower()] = line if line and re.fullmatch(r"[\w./+-]{1,100}", line) else None
    return out
