"""wolfSSL's FreeBSD module cross-built on Linux and run on real FreeBSD kernels in QEMU.

Target ``freebsd-kmod-qemu``. Its inputs come from one of (``freebsd:`` in bsdkm.yml):

- FreeBSD's distribution sets (``release`` and ``snapshot``, from ``mirror``): the release's GENERIC
  is the ``release`` kernel, a CURRENT snapshot's GENERIC (INVARIANTS, WITNESS) the ``debug`` one;
  each set also gives its EFI loader and the sources a module build needs (``freebsd_release_set``);
- a FreeBSD source tree with a kernel built from it (``src``, ``kernel``);
- a directory of one's own kernels in the kit layout (``kit``: ``boot/``, ``sysroot/``).

The module is built with bmake and clang ``--target=x86_64-unknown-freebsd<version>`` against each
kernel's own sources, so a CURRENT kernel gets a module of its own version; each kernel kind boots in
its own QEMU (TCG, OVMF) from an ESP directory the loader reads:

- ``debug``: the loader preloads the module, so its self-test runs during boot, where a
  sleeping-with-a-lock bug panics. The benchmark cannot run there (its ``getnanouptime`` clock only
  starts after module init), so the run stops at the benchmark's header.
- ``release``: with a kernel that has ``device crypto`` and MSDOSFS (GENERIC has both), a FAT root
  holds ``kmod/freebsd/kldinit.c`` as init, which ``kldload``s the module on a running system
  (benchmarks with working clocks), ``kldstat``s and ``kldunload``s it (cleanup lines) and reboots.
  Without that kernel the release kernel preloads like ``debug``.

A machine that can get none of these inputs cannot run the target: the run says why, and which key
to set (``target-unavailable``). Every boot's console is parsed by the core parsers
(``freebsd-kernel-log``); a panic is a ``real`` failure whose evidence carries the module's
backtrace frames.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import lzma
import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .... import targets
from ....config.bsdkm_yml import Config, release_mirror_problem
from ....contract import TARGET_UNAVAILABLE
from ....model import FailureCategory, LogFormat, LogResult, StageFailure
from ....parsers.kernel_trouble import FreeBSDBacktrace, freebsd_machinery
from ....retry.classify import Patterns, classify
from ...job import OUTCOME, Job
from ...runtime.build import source_fingerprint
from ...runtime.console import console_lines
from ...runtime.errors import StageError, infra_error
from ...runtime.loading import ModuleLoadOutcome, outcome_from_record
from ...runtime.locks import exclusive
from ...runtime.proc import CONSOLE_FLOOD, Watched, run_logged, run_watched
from ...runtime.source import cache_root
from .. import prerequisites as needs
from .._freebsd import FREEBSD_BASE_FLAGS, check_flag, freebsd_kmod_dir
from ..base import KernelTarget, Prerequisite, append_log, judge_outcome, parse_kernel_log, require
from .counting import COUNT_FILE, CountRequest, merge_counts, prepare_count, read_counts
from .release_set import (
    CLANG_HEADERS,
    CURRENT,
    DEFAULT_MIRROR,
    STAMP,
    KitFacts,
    ReleaseSpec,
    SetRetry,
    cached_kit,
    kit_facts,
    release_kit,
    resolve_snapshot,
)

TARGET_NAME = targets.FREEBSD_KMOD_QEMU.name
DEFAULT_VERSION = "15.0"  # a kit whose sources do not say their version
FREEBSD_TRIPLE = f"x86_64-unknown-freebsd{DEFAULT_VERSION}"  # kldinit: raw syscalls, any version
INIT_SOURCE = "kldinit.c"
OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
DEFAULT_KERNELS = ("debug", "release")
CRYPTO_FLAG = "--enable-freebsdkm-crypto-register"
# configure probes <machine/atomic.h> with the host compiler, which has no FreeBSD headers.
CONFIGURE_VARS = ("CC=clang", "ac_cv_header_machine_atomic_h=yes")
# After a panic the kernel prints its backtrace, then reboots (-no-reboot ends QEMU); if it
# stops in the debugger instead, give the trace this long to reach the console.
PANIC_GRACE_S = 20.0
MIB = 1 << 20
PROBE_TIMEOUT_S = 5.0  # a mirror asked whether it has a set: the configure stage fetches it later


# --------------------------------------------------------------------------- the kit

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
    fb = config.freebsd
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
    fb = config.freebsd
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


# --------------------------------------------------------------------------- the toolchain


@dataclass(frozen=True)
class Toolchain:
    bin_dir: Path
    version: str

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("LC_ALL", "C")
        env.pop("CC", None)  # a host "ccache gcc" would build the module for Linux
        return env


def _llvm_dirs() -> list[Path]:
    found = []
    for d in Path("/usr/lib").glob("llvm-*"):
        m = re.fullmatch(r"llvm-(\d+)", d.name)
        if m and (d / "bin" / "clang").is_file() and (d / "bin" / "ld.lld").is_file():
            found.append((int(m.group(1)), d / "bin"))
    return [p for _, p in sorted(found, reverse=True)]


def find_toolchain(stage: str = "build") -> Toolchain:
    """The newest Debian LLVM (``/usr/lib/llvm-N/bin``): FreeBSD's x86 intrinsic headers are
    clang 19's, which clang 14 (bookworm's default) rejects (``evex512``)."""
    override = os.environ.get("BSDKM_LLVM_BIN")
    dirs = [Path(override)] if override else _llvm_dirs()
    for d in dirs:
        if all((d / tool).exists() for tool in ("clang", "ld.lld", "llvm-objcopy", "llvm-nm")):
            return Toolchain(d, d.parent.name)
    raise infra_error(stage, "worker-setup",
                      "no LLVM toolchain with clang, ld.lld, llvm-objcopy and llvm-nm in /usr/lib/llvm-*/bin "
                      "(install clang-19 lld-19 llvm-19)")


def toolchain_prerequisite() -> Prerequisite:
    name = "LLVM toolchain"
    try:
        tools = find_toolchain("configure")
    except StageError:
        where = os.environ.get("BSDKM_LLVM_BIN") or "/usr/lib/llvm-*/bin"
        return Prerequisite(name, False, f"no clang, ld.lld, llvm-objcopy and llvm-nm in {where}",
                            "install clang-19 lld-19 llvm-19")
    return Prerequisite(name, True, f"{tools.bin_dir} ({tools.version})")


def tool_prerequisites(config: Config) -> list[Prerequisite]:
    """What builds the module and boots it: the cross toolchain, bmake, QEMU with OVMF, the FAT tools."""
    return [
        toolchain_prerequisite(),
        needs.command("bmake", "bmake"),
        needs.command("gawk", "gawk"),
        needs.command("qemu-system-x86_64", "qemu-system-x86"),
        needs.file("OVMF firmware", OVMF_CODE, "ovmf"),
        needs.file("OVMF variables", OVMF_VARS, "ovmf"),
        needs.command("mkfs.vfat", "dosfstools", what="the FAT root"),
        needs.command("mcopy", "mtools", what="the FAT root"),
        *needs.autotools(config),
        *needs.valgrind(config, kernel=True),
    ]


def mirror_answer(spec: ReleaseSpec, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[str, str | None]:
    """What was asked of the mirror for ``spec`` and why it did not answer (None: it did).

    A version-less snapshot name asks for the snapshots' directory, where it is looked up.
    """
    url = spec.url("MANIFEST")
    if not re.match(r"\d", spec.release):
        url = url.rsplit("/", 2)[0] + "/"
    if url.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
        return url, None if path.exists() else f"no {path}"
    try:
        # GET, not HEAD (a CDN may refuse HEAD); the first bytes say the mirror has it.
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310
            answer.read(4096)
            return url, None
    except urllib.error.HTTPError as e:
        return url, f"HTTP {e.code} from {url}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return url, f"cannot reach {url} (within {timeout_s:g} s): {getattr(e, 'reason', e)}"


def set_prerequisite(kind: str, key: str, spec: ReleaseSpec, cache: Path, timeout_s: float) -> Prerequisite:
    """One kernel's sets: in the cache, else the mirror answering for them (the sets are fetched later)."""
    name = f"{kind} kernel ({key}: {spec.release})"
    problem = release_mirror_problem(spec.mirror)
    if problem:
        return Prerequisite(name, False, f"freebsd.mirror: {problem}",
                            "set freebsd.mirror to an https:// mirror or a local directory of sets")
    kit = cached_kit(spec, cache)
    if kit is None and spec.release == CURRENT:
        # The run takes the newest cached CURRENT while the mirror cannot list its snapshots.
        with contextlib.suppress(StageError):
            resolved, _ = resolve_snapshot(CURRENT, spec.mirror, spec.arch, cache, timeout_s=timeout_s)
            kit = cached_kit(dataclasses.replace(spec, release=resolved), cache)
    if kit is not None:
        return Prerequisite(name, True, f"sets cached in {kit.parent}")
    url, why = mirror_answer(spec, timeout_s)
    if why is None:
        return Prerequisite(name, True, f"{url} answers")
    return Prerequisite(name, False, why,
                        f"set freebsd.mirror to a mirror this worker reaches or a directory holding "
                        f"{spec.tree}/{spec.arch}/{spec.release}/ (its MANIFEST and sets); or check {key}")


def kernel_prerequisites(config: Config, timeout_s: float = PROBE_TIMEOUT_S) -> list[Prerequisite]:
    """Where each configured kernel comes from, checked without fetching anything big: a kit complete, a
    source tree with its kernel and loader there, or each set cached or its mirror answering."""
    fb = config.freebsd
    if fb.kit is not None:
        kit = Kit(fb.kit)
        missing = kit.missing() if kit.root.is_dir() else [str(kit.root)]
        return [Prerequisite("FreeBSD kit (freebsd.kit)", False, "missing " + ", ".join(missing),
                             "set freebsd.kit to a directory in the kit layout (boot/, sysroot/)")
                if missing else Prerequisite("FreeBSD kit (freebsd.kit)", True, str(kit.root))]
    if fb.src is not None:
        wanted = {"freebsd.src": (fb.src / "sys/conf/kmod.mk", fb.src / "share/mk/bsd.kmod.mk"),
                  "freebsd.kernel": (fb.kernel,),
                  "freebsd.loader": (fb.loader or Path("/boot/loader_simp.efi"),)}
        lines = []
        for key, paths in wanted.items():
            gone = [str(p) for p in paths if p is None or not p.is_file()]
            lines.append(Prerequisite(f"FreeBSD {key}", False, "no " + ", ".join(gone), f"set {key}") if gone
                         else Prerequisite(f"FreeBSD {key}", True, str(paths[0])))
        return lines
    try:
        kinds = kernels_option(config)
    except StageError as e:
        return [Prerequisite("FreeBSD kernels", False, e.failure.message,
                             f"set targets.{TARGET_NAME}.kernels to debug, release or both")]
    keys = {"release": ("freebsd.release", fb.release), "debug": ("freebsd.snapshot", fb.snapshot)}
    if not any(keys[k][1] for k in kinds):
        return [Prerequisite("FreeBSD kernels", False, "none configured",
                             "set freebsd.release and freebsd.snapshot (or freebsd.src and freebsd.kernel, "
                             "or freebsd.kit) in bsdkm.yml")]
    out = []
    for kind in kinds:
        key, release = keys[kind]
        if not release:  # the user's choice: that kernel is reported not covered
            out.append(Prerequisite(f"{kind} kernel ({key})", False, "not configured: not run",
                                    f"set {key}", required=False))
            continue
        spec = ReleaseSpec(release, fb.mirror or DEFAULT_MIRROR, fb.arch,
                           fb.manifest_sha256 if kind == "release" else None)
        out.append(set_prerequisite(kind, key, spec, cache_root(config), timeout_s))
    return out


def check_worker(config: Config) -> None:
    """Configure-stage check: the kernels fetched as the build takes them (a kernel that cannot be had
    is the target's, not the worker's: not run), then every tool of ``tool_prerequisites``."""
    find_kit(config, "configure")
    require(tool_prerequisites(config))


# --------------------------------------------------------------------------- building


def configure_args(kit: Kit, variant_flags: Sequence[str], cflags: str) -> list[str]:
    """``./configure`` for bsdkm against the kit; the variant's flags come after the base ones."""
    args = ["./configure", *CONFIGURE_VARS, *FREEBSD_BASE_FLAGS, *variant_flags,
            f"--with-kernel-source={kit.sys_dir}"]
    if cflags:
        args.append(f"CFLAGS={cflags}")
    return args


def bmake_args(kit: Kit, jobs: int, triple: str = FREEBSD_TRIPLE) -> list[str]:
    return ["bmake", f"-j{jobs}", "-m", str(kit.share_mk), "MACHINE=amd64", "MACHINE_ARCH=amd64",
            f"CC=clang --target={triple}", "LD=ld.lld", "AWK=gawk", f"XARGS={kit.xargs}",
            "OBJCOPY=llvm-objcopy", "NM=llvm-nm"]


def _fingerprint(source: Path) -> str:
    return source_fingerprint(source, ("configure", "wolfcrypt/src", "wolfssl", "bsdkm"))


def _own_flags(config: Config, variant: str) -> list[str]:
    """The target's and variant's flags without the ones this builder sets itself (the kit's sys)."""
    flags = [f for f in config.configure_flags(TARGET_NAME, variant)
             if f not in FREEBSD_BASE_FLAGS and not f.startswith("--with-kernel-source")]
    for flag in flags:
        check_flag(flag)  # a Linux-only flag is a config mistake, named before configure runs
    return flags


def build_module(config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
                 patterns: Patterns | None = None) -> Path:
    """``libwolfssl.ko`` for this variant against each kernel's own sources, each built at most once
    per (source, flags, kit, toolchain). With kernels of more than one kit (a release and a CURRENT
    snapshot) the returned module has each kernel's own beside it (``module_for``)."""
    found = kits(config, kernels_option(config)).found
    for kit in found.values():
        check_kit(kit, "build")
    tools = find_toolchain()
    try:
        flags = _own_flags(config, variant)
    except ValueError as e:
        raise StageError(classify("configure", exit_code=2, output=f"configure: error: {e}",
                                  patterns=patterns)) from None
    cflags = " ".join(config.cflags(TARGET_NAME, variant))
    built: dict[str, Path] = {}
    by_root: dict[Path, Path] = {}
    for kind, kit in found.items():
        if kit.root not in by_root:
            by_root[kit.root] = _build_for_kit(config, kit, tools, flags, cflags, source, cache, jobs, log,
                                               patterns)
        built[kind] = by_root[kit.root]
    if len(by_root) == 1:
        return next(iter(by_root.values()))
    key = hashlib.sha256(json.dumps({k: str(v) for k, v in built.items()}, sort_keys=True).encode()
                         ).hexdigest()[:20]
    home = cache / "freebsd-qemu" / f"kernels-{key}"
    with exclusive(cache / "locks" / f"freebsd-qemu-kernels-{key}.lock"):
        for kind, ko in built.items():
            own = home / kind / "libwolfssl.ko"
            if not own.is_file():
                own.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ko, own)
        primary = home / "libwolfssl.ko"
        if not primary.is_file():
            shutil.copy2(next(iter(built.values())), primary)
    return primary


def module_for(ko: Path, kind: str) -> Path:
    """The module built for kernel ``kind``: its own beside ``ko`` when the kernels' sources differ."""
    own = ko.parent / kind / ko.name
    return own if own.is_file() else ko


def _build_for_kit(config: Config, kit: Kit, tools: Toolchain, flags: list[str], cflags: str, source: Path,
                   cache: Path, jobs: int, log: Path, patterns: Patterns | None) -> Path:
    args = configure_args(kit, flags, cflags)
    key = hashlib.sha256(json.dumps([_fingerprint(source), args, kit.identity(), kit.triple, tools.version],
                                    sort_keys=True).encode()).hexdigest()[:20]
    home = cache / "freebsd-qemu" / key
    ko = home / "libwolfssl.ko"
    with exclusive(cache / "locks" / f"freebsd-qemu-{key}.lock"):
        if ko.is_file():
            append_log(log, home / "build.log", f"# module reused from cache: {ko}")
            return ko
        work = home.with_name(key + ".build")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work, symlinks=True)  # configure and bmake write into the tree
        own_log = work / "build-freebsd.log"
        try:
            _step("configure", args, work, own_log, config.timeout("configure"), tools, patterns, log)
            _step("build", bmake_args(kit, jobs, kit.triple), work, own_log,
                  config.timeout("build"), tools, patterns, log)
            built = work / "bsdkm" / "libwolfssl.ko"
            if not built.is_file():
                raise StageError(classify("build", exit_code=0, patterns=patterns, evidence=[str(log)],
                                          output=f"bmake succeeded but produced no {built}"))
            home.mkdir(parents=True, exist_ok=True)
            shutil.copy2(own_log, home / "build.log")
            shutil.copy2(built, ko)
        finally:
            if own_log.is_file():
                append_log(log, own_log)
            shutil.rmtree(work, ignore_errors=True)
    return ko


def _step(stage: str, argv: list[str], cwd: Path, log: Path, timeout_s: float, tools: Toolchain,
          patterns: Patterns | None, kept_log: Path) -> None:
    """One build command; its log is copied to ``kept_log`` (the evidence) when the tree goes away."""
    res = run_logged(argv, cwd=cwd, log=log, timeout_s=timeout_s, env=tools.env())
    if res.exit_code != 0:
        raise StageError(classify(stage, exit_code=res.exit_code, output=log.read_text(errors="replace"),
                                  timed_out=res.timed_out, timeout_s=timeout_s, patterns=patterns,
                                  evidence=[str(kept_log)]))


def init_program(cache: Path, tools: Toolchain | None = None) -> Path:
    """``kmod/freebsd/kldinit.c`` built for FreeBSD (static, raw syscalls), cached by source and clang."""
    tools = tools or find_toolchain("load")
    src = _kmod_freebsd() / INIT_SOURCE
    if not src.is_file():
        raise infra_error("load", "worker-setup", f"init program source missing: {src}")
    key = hashlib.sha256(src.read_bytes() + tools.version.encode()).hexdigest()[:16]
    out = cache / "freebsd-qemu" / f"kldinit-{key}"
    if out.is_file():
        return out
    with exclusive(cache / "locks" / f"freebsd-kldinit-{key}.lock"):
        if not out.is_file():  # another run may have built it while this one waited
            _build_init_program(tools, src, out)
    return out


def _build_init_program(tools: Toolchain, src: Path, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    cmd = [str(tools.bin_dir / "clang"), f"--target={FREEBSD_TRIPLE}", "-static", "-nostdlib",
           "-ffreestanding", "-fno-stack-protector", "-fno-pic", "-O2", "-Wall", "-Werror", "-fuse-ld=lld",
           "-Wl,-e,_start", "-o", str(tmp), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise infra_error("load", "worker-setup", f"init program did not build: {proc.stderr.strip()[:300]}")
    tmp.replace(out)


# --------------------------------------------------------------------------- boots


@dataclass(frozen=True)
class Boot:
    kind: str  # debug | release (what the report says)
    kernel: str  # kit kernel name: debug, release, release-crypto
    mode: str  # preload | kldload


def boot_plan(kit: Kit, kinds: Sequence[str], crypto: bool) -> tuple[list[Boot], list[str]]:
    """(boots to run, notes on what is not covered)."""
    boots, notes = [], []
    has_crypto = kit.kernel("release-crypto").is_file()
    for kind in kinds:
        if kind == "debug":
            if crypto:
                notes.append("debug kernel: not covered (crypto-register needs device crypto, which "
                             "the debug kernel boots without: the module is preloaded)")
            elif kit.kernel("debug").is_file():
                boots.append(Boot("debug", "debug", "preload"))
            else:
                notes.append("debug kernel: not covered (no debug kernel: set freebsd.snapshot)")
        elif kind == "release":
            if has_crypto:
                boots.append(Boot("release", "release-crypto", "kldload"))
            elif crypto:
                notes.append("release kernel: not covered (crypto-register needs a release kernel with "
                             "device crypto: set freebsd.release)")
            elif kit.kernel("release").is_file():
                boots.append(Boot("release", "release", "preload"))
            else:
                notes.append("release kernel: not covered (no release kernel: set freebsd.release)")
    return boots, notes


def cached_kernel(kit: Kit, name: str, cache: Path) -> Path:
    """The xz-decompressed kernel, kept in the cache by the compressed file's size and mtime."""
    src = kit.kernel(name)
    if src.suffix != ".xz":
        return src  # unpacked from a release's kernel.txz already
    st = src.stat()
    out = cache / "freebsd-qemu" / "kernels" / f"kernel-{name}-{st.st_size}-{st.st_mtime_ns}"
    with exclusive(cache / "locks" / f"freebsd-kernel-{name}.lock"):
        if not out.is_file():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp = out.with_suffix(".tmp")
            with lzma.open(src) as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            tmp.replace(out)
    return out


ROOT_DEVICE = "/dev/vtbd1"  # the second virtio disk; the first is the ESP


def loader_rc(mode: str, nonce: str | None = None, count: CountRequest | None = None) -> str:
    """``nonce``: kldinit reads it from the kernel environment, and removes it, before it loads the module;
    so it reads ``count``'s request for counted work."""
    lines = [
        "echo bsdkm-ci: loader.rc " + mode,
        "set console=comconsole",
        "set comconsole_speed=115200",
        "set boot_serial=YES",
        "set hw.uart.console=io:0x3f8,br:115200",
        "set vfs.mountroot.timeout=0",
        # A panic prints its backtrace and reboots (no DDB prompt to wait at); -no-reboot ends QEMU.
        "set debug.debugger_on_panic=0",
        "set kern.panic_reboot_wait_time=0",
    ]
    if mode == "kldload":
        lines += [f"set vfs.root.mountfrom=msdosfs:{ROOT_DEVICE}", "set init_path=/init",
                  "load /boot/kernel/kernel"]
        if nonce:
            lines.append(f"set bsdkm_ci.nonce={nonce}")
        if count is not None:
            lines += count.kenv_lines()
    else:
        lines += ["load /boot/kernel/kernel", "load /boot/modules/libwolfssl.ko"]
    return "\n".join([*lines, "boot", ""])


def make_esp(esp: Path, kit: Kit, kernel: Path, ko: Path | None, mode: str, nonce: str | None = None,
             count: CountRequest | None = None) -> Path:
    shutil.rmtree(esp, ignore_errors=True)
    for sub in ("EFI/BOOT", "boot/kernel", "boot/defaults", "boot/modules"):
        (esp / sub).mkdir(parents=True)
    shutil.copy2(kit.loader, esp / "EFI" / "BOOT" / "BOOTX64.EFI")
    (esp / "boot" / "defaults" / "loader.conf").write_text("")  # loader_simp only needs it to exist
    (esp / "boot" / "loader.rc").write_text(loader_rc(mode, nonce, count))
    shutil.copy2(kernel, esp / "boot" / "kernel" / "kernel")
    if ko is not None:
        shutil.copy2(ko, esp / "boot" / "modules" / "libwolfssl.ko")
    return esp


def make_root(image: Path, init: Path, ko: Path, cryptodev: Path | None = None) -> Path:
    """A FAT image holding /init and /libwolfssl.ko (and /dev, where devfs is mounted); with
    ``cryptodev``, the kernel's own ``cryptodev.ko`` as /cryptodev.ko, which kldinit loads before it
    counts through /dev/crypto (GENERIC has ``device crypto`` but no ``device cryptodev``)."""
    image.unlink(missing_ok=True)
    extra = cryptodev.stat().st_size if cryptodev is not None else 0
    size_kib = (ko.stat().st_size + init.stat().st_size + extra) // 1024 + 4096
    steps = [
        ["mkfs.vfat", "-C", str(image), str(size_kib)],
        ["mmd", "-i", str(image), "::/dev"],
        ["mcopy", "-i", str(image), str(init), "::/init"],
        ["mcopy", "-i", str(image), str(ko), "::/libwolfssl.ko"],
    ]
    if cryptodev is not None:
        steps.append(["mcopy", "-i", str(image), str(cryptodev), "::/cryptodev.ko"])
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            why = proc.stderr.strip()
            raise infra_error("load", "worker-setup", f"root image not made ({cmd[0]}): {why}")
    return image


def qemu_command(esp: Path, vars_fd: Path, root: Path | None, cpu: str, memory_mb: int,
                 plugin: str | None = None) -> list[str]:
    """``plugin``: QEMU's ``-plugin`` argument (the instruction counter with its options)."""
    cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb), "-smp", "1", "-cpu", cpu,
           "-nographic", "-no-reboot", "-monitor", "none", "-serial", "stdio",
           "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
           "-drive", f"if=pflash,format=raw,file={vars_fd}",
           "-drive", f"file=fat:rw:{esp},format=raw,if=virtio"]
    if root is not None:
        cmd += ["-drive", f"file={root},format=raw,if=virtio"]
    if plugin:
        cmd += ["-plugin", plugin]
    return [*cmd, "-net", "none"]


PANIC_END_RE = re.compile(r"(?:^|\n)(?:Uptime: |Rebooting|KDB: enter|db> )")


class _StopRule:
    """``stop_rule``'s state: the console comes in pieces, each seen once (memory stays flat)."""

    def __init__(self, mode: str, clock: Callable[[], float]) -> None:
        self.mode = mode
        self.clock = clock
        self.panic_at: float | None = None
        self.carry = ""  # the end of the pieces so far: a needle may straddle two

    def _has(self, needle: str, piece: str) -> bool:
        return needle in self.carry[len(self.carry) - len(needle) + 1:] + piece

    def __call__(self, piece: str) -> str | None:
        try:
            return self._verdict(piece)
        finally:
            self.carry = (self.carry + piece)[-64:]

    def _verdict(self, piece: str) -> str | None:
        if self.panic_at is None and self._has("panic: ", piece):
            self.panic_at = self.clock()
        if self.panic_at is not None:
            if PANIC_END_RE.search(self.carry[-16:] + piece):
                return "panic"
            return "panic" if self.clock() - self.panic_at > PANIC_GRACE_S else None
        if self._has("mountroot>", piece):
            return "mountroot"
        if self.mode == "preload" and self._has("wolfCrypt Benchmark (", piece):
            # Preloaded, the benchmark's clock has not started: it would wait forever.
            return "benchmark-at-preload"
        return None


def stop_rule(mode: str, clock: Callable[[], float]) -> Callable[[str], str | None]:
    """When a console has said all it will: the guest is done, panicked, or waits for nothing.

    The rule is fed the console as it comes (``proc.run_watched``), each piece once.
    """
    return _StopRule(mode, clock)


# --------------------------------------------------------------------------- the console


# kldinit's markers start their line and end with this boot's nonce, which kldinit takes out of the
# kernel environment before the module loads: a module printing a marker (a FreeBSD kernel's
# printf has no prefix) cannot match it.
MARKER_RE = re.compile(r"^### bsdkm-ci: (?P<body>.*?)(?: nonce=(?P<nonce>[0-9a-f]+))?\s*$")
# The loader's line for the module it preloads (the kernel says "Preloaded elf obj module" only when verbose).
PRELOAD_RE = re.compile(r"^/boot/modules/libwolfssl\.ko size 0x[0-9a-f]+ at 0x[0-9a-f]+")
PRELOADED = 'Preloaded elf obj module "'
# sys/kern/kern_module.c, when a module's MOD_LOAD handler fails.
MOD_LOAD_ERROR_RE = re.compile(r"^module_register_init: MOD_LOAD \([^,]+, .*\) error (?P<errno>\d+)")
LINK_ERROR_RE = re.compile(
    r"^(?:link_elf_obj: symbol \S+ undefined|KLD file \S+ - could not finalize loading)")


@dataclass
class ConsoleFacts:
    """What one FreeBSD console says about the module's life, from the markers and kernel lines."""

    markers: list[str] = field(default_factory=list)
    load_rc: int | None = None
    load_errno: int | None = None
    unload_rc: int | None = None
    unload_errno: int | None = None
    kldstat: str | None = None
    still_listed: bool | None = None
    panic: str | None = None
    backtrace: list[str] = field(default_factory=list)  # "func+0xoff", innermost first
    link_errors: list[str] = field(default_factory=list)
    preloaded: bool = False
    loaded_line: bool = False  # "info: libwolfssl loaded"
    selftest_passed: bool = False
    mountroot: bool = False
    mod_load_errno: int | None = None  # the kernel's "module_register_init: MOD_LOAD (...) error N"
    imitations: int = 0  # marker-shaped lines without this boot's nonce: not kldinit's
    first_marker: str | None = None  # the first marker-shaped line's body, whoever printed it

    def seen(self, prefix: str) -> bool:
        return any(m.startswith(prefix) for m in self.markers)


def read_console(text: str | Iterable[str], nonce: str | None = None) -> ConsoleFacts:
    """What a console says; ``text`` is the whole text or its lines (streamed, memory stays flat).

    ``nonce``: this boot's; a marker without it is not taken (None: not known here, e.g. a kept
    console; markers must still start their line). Each step's first result counts.
    """
    facts = ConsoleFacts()
    reader = _MarkerReader(facts)
    trace = FreeBSDBacktrace()  # the core parser's reader: DDB's frames and stack(9)'s alike
    for raw in text.splitlines() if isinstance(text, str) else text:
        line = raw.replace("\r", "").rstrip()
        if m := MARKER_RE.match(line):
            if facts.first_marker is None:
                facts.first_marker = m.group("body")
            if nonce is None or m.group("nonce") == nonce:
                reader.marker(m.group("body"))
            elif facts.seen("load begin"):  # before it, the module has not run: not an imitation
                facts.imitations += 1
            continue
        if line.startswith("panic: ") and facts.panic is None:
            facts.panic = line
        elif trace.feed(line):
            continue
        if LINK_ERROR_RE.match(line):
            facts.link_errors.append(line)
        elif PRELOAD_RE.match(line) or (line.startswith(PRELOADED) and "libwolfssl" in line):
            facts.preloaded = True
        elif re.match(r"^(?:libwolf\d+: )?info: (?:libwolfssl\S* loaded|driver loaded: )", line):
            facts.loaded_line = True
        elif "mountroot>" in line:
            facts.mountroot = True
        elif line.startswith("info: wolfCrypt self-test passed"):
            facts.selftest_passed = True
        elif (m := MOD_LOAD_ERROR_RE.match(line)) and facts.mod_load_errno is None:
            facts.mod_load_errno = int(m.group("errno"))
    facts.backtrace = trace.frames
    return facts


class _MarkerReader:
    """kldinit's markers in its fixed order: a step's result is the first after its ``begin``, never a
    later one; nothing after ``poweroff``, and no unload or kldstat after a load that failed."""

    def __init__(self, facts: ConsoleFacts) -> None:
        self.facts = facts
        self.step: str | None = None
        self.done = False

    def marker(self, body: str) -> None:
        facts = self.facts
        after_load = body.startswith(("unload ", "kldstat ", "still listed", "not listed"))
        if self.done or (after_load and facts.load_rc != 0):
            facts.imitations += 1
            return
        facts.markers.append(body)
        if body == "poweroff":
            self.done = True
        elif body in ("load begin", "unload begin"):
            self.step = body.split()[0]
        elif m := re.fullmatch(r"(load|unload) rc=(-?\d+)(?: errno=(\d+))?", body):
            rc, errno = int(m.group(2)), int(m.group(3)) if m.group(3) else None
            if m.group(1) == self.step == "load":
                facts.load_rc, facts.load_errno = rc, errno
            elif m.group(1) == self.step == "unload":
                facts.unload_rc, facts.unload_errno = rc, errno
            self.step = None
        elif body.startswith("kldstat ") and facts.kldstat is None:
            facts.kldstat = body
        elif body in ("still listed after unload", "not listed after unload") and facts.still_listed is None:
            facts.still_listed = body.startswith("still")


def module_symbols(ko: Path) -> set[str]:
    """Functions the module defines (``llvm-nm --defined-only``): tells its frames from the kernel's."""
    try:
        tools = find_toolchain("load")
        out = subprocess.run([str(tools.bin_dir / "llvm-nm"), "--defined-only", str(ko)],
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (StageError, OSError, subprocess.TimeoutExpired):
        return set()
    return {parts[-1] for parts in (ln.split() for ln in out.splitlines()) if len(parts) >= 2}


def module_frames(backtrace: Sequence[str], symbols: set[str]) -> list[str]:
    """The module's frames, innermost first: by the module's own symbols when known, else the
    frames below the panic machinery (the kernel's startup frames stay at the end)."""
    if symbols:
        return [f for f in backtrace if f.split("+", 1)[0] in symbols]
    frames = list(backtrace)
    while frames and freebsd_machinery(frames[0].split("+", 1)[0]):
        frames.pop(0)
    return frames


def outcome_from_boot(boot: Boot, console: Path, run: Watched, symbols: set[str],
                      extra_logs: dict[str, Path], nonce: str | None = None) -> ModuleLoadOutcome:
    """One boot's outcome: load/unload status from the markers (kldload) or the kernel lines (preload)."""
    facts = read_console(console_lines(console), nonce if boot.mode == "kldload" else None)
    notes: list[str] = []
    if boot.mode == "kldload":
        load_rc, unload_rc = facts.load_rc, facts.unload_rc
        if nonce and (facts.first_marker or "").startswith("no nonce"):
            # kldinit says so before the module is loaded, so the module cannot have printed it.
            notes.append(f"the boot had no nonce ({facts.first_marker}): kldinit's markers cannot be "
                         "told from the module's")
        if facts.load_errno is not None:
            notes.append(f"kldload failed: errno {facts.load_errno}")
        if facts.unload_errno is not None:
            notes.append(f"kldunload failed: errno {facts.unload_errno}")
        if facts.still_listed:
            notes.append("unload: still-listed")
    else:
        load_rc = 0 if facts.loaded_line else None
        unload_rc = None  # a preloaded module stays loaded: nothing unloads it
        if run.stopped == "benchmark-at-preload":
            # Its init got past the self-test; the benchmark would wait forever for the clock.
            load_rc = 0 if facts.selftest_passed and not facts.panic else load_rc
            notes.append("benchmark not run: preloaded, the module's clock (getnanouptime) has not started")
    if facts.mod_load_errno is not None and boot.mode == "preload":
        # The kernel's own word that the preloaded module's init failed, whatever the module printed.
        load_rc = 1 if load_rc in (None, 0) else load_rc
        notes.append(f"the module's MOD_LOAD failed: errno {facts.mod_load_errno}")
    if facts.link_errors:
        load_rc = 1 if load_rc in (None, 0) else load_rc
        notes.append(f"module did not link: {facts.link_errors[0]}")
    flood = run.log_bytes if run.stopped == CONSOLE_FLOOD else None
    if flood is not None:
        notes.append(f"console flood: {flood / MIB:.1f} MiB; the guest was stopped at the console cap")
    if facts.imitations:
        notes.append(f"{facts.imitations} console line(s) imitate the harness's markers and were ignored")
    if facts.panic:
        frames = module_frames(facts.backtrace, symbols) or facts.backtrace
        where = f" in {frames[0].split('+', 1)[0]}" if frames else ""
        notes.append(f"{boot.kind} kernel panic{where}: {facts.panic}")
        load_rc = None if facts.load_rc is None or boot.mode == "preload" else load_rc
    if facts.mountroot and boot.mode == "kldload":
        notes.append("the kernel could not mount the FAT root (mountroot> prompt): init never ran")
    timed_out = run.timed_out
    stage = None
    if timed_out:
        stage = "unload" if facts.seen("unload begin") and facts.unload_rc is None else "load"
        notes.append(f"VM killed at the time limit after {run.seconds:.0f} s; last marker: "
                     f"{facts.markers[-1] if facts.markers else None!r}")
    elif not facts.panic and load_rc is None and not facts.link_errors and flood is None:
        notes.append(f"{boot.kind} kernel: the module's load never finished on the console "
                     f"(QEMU ended: {run.stopped or f'exit {run.exit_code}'})")
    return ModuleLoadOutcome(
        kernel_log=console,
        load_rc=load_rc,
        unload_rc=unload_rc,
        timed_out=timed_out,
        timed_out_stage=stage,
        duration_s=round(run.seconds, 2),
        loaded_seen=bool(facts.kldstat) or facts.preloaded,
        stages={"vm": round(run.seconds, 2)},
        notes=notes,
        extra_logs=dict(extra_logs),
        load_errno=facts.load_errno,
        unload_errno=facts.unload_errno,
        console_flood_bytes=flood,
    )


@dataclass(frozen=True)
class VmOptions:
    cpu: str = "max"  # exposes AES-NI, PCLMULQDQ, AVX to the guest under TCG
    memory_mb: int = 1024


def run_boot(boot: Boot, kit: Kit, ko: Path, work: Path, cache: Path, *, timeout_s: float,
             options: VmOptions, symbols: set[str], console_cap: int | None = None,
             count: CountRequest | None = None) -> ModuleLoadOutcome:
    """One kernel's boot; ``console_cap``: bytes of console after which the guest is stopped;
    ``count``: the counting plugin, and kldinit's counted work, for this boot (``prepare_count``)."""
    work.mkdir(parents=True, exist_ok=True)
    kernel = cached_kernel(kit, boot.kernel, cache)
    nonce = secrets.token_hex(16)  # kldinit's markers carry it; the module cannot know it
    esp = make_esp(work / "esp", kit, kernel, ko if boot.mode == "preload" else None, boot.mode, nonce,
                   count if boot.mode == "kldload" else None)
    cryptodev = kit.cryptodev(boot.kernel)
    root = (make_root(work / "root.img", init_program(cache), ko, cryptodev if cryptodev.is_file() else None)
            if boot.mode == "kldload" else None)
    vars_fd = work / "OVMF_VARS.fd"
    shutil.copy2(OVMF_VARS, vars_fd)
    console = work / "console.log"
    counted = count is not None and boot.mode == "kldload"
    plugin = count.plugin_arg(work / COUNT_FILE, nonce) if count is not None and counted else None
    run = run_watched(qemu_command(esp, vars_fd, root, options.cpu, options.memory_mb, plugin), log=console,
                      timeout_s=timeout_s, stop=stop_rule(boot.mode, time.monotonic), max_bytes=console_cap)
    shutil.rmtree(esp, ignore_errors=True)  # a kernel and a module per boot: do not keep them
    if run.stopped == "benchmark-at-preload":
        _cut_at_benchmark(console)
    if root is not None:
        root.unlink(missing_ok=True)
    return outcome_from_boot(boot, console, run, symbols, {"console": console}, nonce)


def _cut_at_benchmark(console: Path) -> None:
    """The parsed console ends before the benchmark header a preloaded module cannot go past (it
    would read as a cut-off benchmark); the whole console stays beside it as ``console.raw.log``."""
    raw = console.with_name("console.raw.log")
    console.replace(raw)
    cut = False
    with open(console, "w", encoding="utf-8") as out:
        for line in console_lines(raw):
            if "wolfCrypt Benchmark (" in line:
                out.write("### bsdkm-ci: benchmark not run at preload (no clock yet)\n")
                cut = True
                break
            out.write(line)
    if not cut:
        raw.replace(console)


def kernels_option(config: Config) -> tuple[str, ...]:
    raw = config.targets[TARGET_NAME].options.get("kernels") if TARGET_NAME in config.targets else None
    if raw is None:
        return DEFAULT_KERNELS
    kinds = tuple(str(k) for k in (raw if isinstance(raw, list) else [raw]))
    bad = [k for k in kinds if k not in DEFAULT_KERNELS]
    if bad or not kinds:
        raise infra_error("load", "ci-exception",
                          f"targets.{TARGET_NAME}.kernels: {bad[0] if bad else 'empty'!r} is not one of "
                          f"{', '.join(DEFAULT_KERNELS)}")
    return kinds


def load_module(config: Config, ko: Path, work: Path, cache: Path | None = None) -> ModuleLoadOutcome:
    """Boot every configured kernel kind with its module; the outcome's ``parts`` hold one per kernel."""
    chosen = kits(config, kernels_option(config), "load")
    found, not_covered = chosen.found, list(chosen.notes)
    if not ko.is_file():
        raise infra_error("load", "ci-exception",
                          f"kernel module {ko} does not exist (did the build stage run?)")
    cache = cache or cache_root(config)
    crypto = needs_device_crypto(ko)
    boots: list[tuple[Boot, Kit]] = []
    for kind in kernels_option(config):
        if kind not in found:
            continue
        planned, notes = boot_plan(found[kind], [kind], crypto)
        boots += [(b, found[kind]) for b in planned]
        not_covered += notes
    opts = config.targets[TARGET_NAME].options if TARGET_NAME in config.targets else {}
    options = VmOptions(cpu=str(opts.get("cpu") or "max"), memory_mb=int(opts.get("memory_mb") or 1024))
    symbols = module_symbols(ko)
    limit = float(opts.get("boot_timeout_s") or config.timeout("load"))
    parts = {b.kind: run_boot(b, kit, module_for(ko, b.kind), work / b.kind, cache, timeout_s=limit,
                              options=options, symbols=symbols, console_cap=config.console_cap_bytes,
                              count=prepare_count(config, module_for(ko, b.kind), work / b.kind,
                                                  crypto=crypto, mode=b.mode))
             for b, kit in boots}
    outcome = combine(parts, not_covered, work)
    outcome.stages["boot_limit_s"] = limit
    outcome.notes[:0] = chosen.chosen  # which snapshot CURRENT was
    outcome.notes += [f"{kind} kernel: not run ({why})" for kind, why in chosen.not_run.items()]
    outcome.not_run = dict(chosen.not_run)
    outcome.kernels = {kind: _kernel_facts(kit) for kind, kit in found.items()}
    return outcome


def _kernel_facts(kit: Kit) -> dict[str, Any]:
    facts = kit.facts()
    if facts is not None:
        return {**facts.to_dict(), "summary": facts.describe()}
    return {"kit": str(kit.root), "summary": f"kit {kit.root}"}


def combine(parts: dict[str, ModuleLoadOutcome], not_covered: list[str], work: Path) -> ModuleLoadOutcome:
    """One outcome for the stage: it loaded only if every kernel loaded it; notes from all."""
    primary = parts.get("release") or next(iter(parts.values()), None)
    kernel_log = primary.kernel_log if primary else work / "console.log"
    if primary is None:
        kernel_log.parent.mkdir(parents=True, exist_ok=True)
        kernel_log.write_text("")
    notes = list(not_covered)
    for kind, part in parts.items():
        notes += [n if n.startswith(kind) else f"{kind} kernel: {n}" for n in part.notes]
    load_rcs = [p.load_rc for p in parts.values()]
    return ModuleLoadOutcome(
        kernel_log=kernel_log,
        load_rc=None if not parts or None in load_rcs else max(load_rcs, key=abs),  # type: ignore[arg-type]
        unload_rc=primary.unload_rc if primary else None,
        timed_out=any(p.timed_out for p in parts.values()),
        timed_out_stage=next((p.timed_out_stage for p in parts.values() if p.timed_out), None),
        duration_s=round(sum(p.duration_s for p in parts.values()), 2),
        loaded_seen=all(p.loaded_seen for p in parts.values()) if parts else False,
        stages={f"vm-{k}": p.duration_s for k, p in parts.items()},
        notes=notes,
        extra_logs={f"console-{k}": p.kernel_log for k, p in parts.items()},
        parts=parts,
        not_covered=list(not_covered),
        console_flood_bytes=max((p.console_flood_bytes for p in parts.values() if p.console_flood_bytes),
                                default=None),
    )


def needs_device_crypto(ko: Path) -> bool:
    """A crypto-register module imports the opencrypto framework (``crypto_get_driverid``)."""
    try:
        tools = find_toolchain("load")
        out = subprocess.run([str(tools.bin_dir / "llvm-nm"), "--undefined-only", str(ko)],
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (StageError, OSError, subprocess.TimeoutExpired):
        return False
    return any(line.split()[-1] == "crypto_get_driverid" for line in out.splitlines() if line.split())


# --------------------------------------------------------------------------- judging


def judge_boot(kind: str, outcome: ModuleLoadOutcome, log: LogResult, timeout_s: float, symbols: set[str],
               patterns: Patterns | None) -> StageFailure | None:
    """One kernel's failure, classified, with the kernel kind (and a panic's module frames) named."""
    failure = judge_outcome(outcome, log, timeout_s, patterns)
    if failure is None:
        return None
    facts = read_console(console_lines(outcome.kernel_log))
    failure.part = f"{kind} kernel"
    failure.message = f"{failure.part}: {failure.message}"
    if facts.panic:
        frames = module_frames(facts.backtrace, symbols)
        if frames:
            failure.message += f" (in {frames[0].split('+', 1)[0]})"
        if facts.backtrace:
            failure.evidence = [*failure.evidence, "backtrace: " + " < ".join(frames or facts.backtrace)]
    return failure


def not_covered_failure(notes: Sequence[str], evidence: Path) -> StageFailure:
    return StageFailure("load", "not covered: " + "; ".join(notes), FailureCategory.INFRASTRUCTURE,
                        TARGET_UNAVAILABLE, [str(evidence)])


def not_run_text(not_run: dict[str, str]) -> str:
    return "; ".join(f"{kind} kernel ({why})" for kind, why in not_run.items())


def not_run_failure(not_run: dict[str, str], evidence: Path) -> StageFailure:
    """A configured kernel this machine could not get: the run is not whole. A local run reports
    the kernel not run (``RunResult.not_run_parts``); Buildbot and the Action fail it as the
    infrastructure failure it is."""
    return StageFailure("load", "not run: " + not_run_text(not_run), FailureCategory.INFRASTRUCTURE,
                        TARGET_UNAVAILABLE, [str(evidence)])


class FreeBSDQemuTarget(KernelTarget):
    facts = targets.FREEBSD_KMOD_QEMU
    log_format = LogFormat.FREEBSD_KERNEL_LOG
    log_name = "console.log"

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        return [*kernel_prerequisites(config), *tool_prerequisites(config)]

    def check_worker(self, config: Config) -> None:
        check_worker(config)

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        return build_module(config, variant, source, cache, jobs, log, patterns)

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        return load_module(config, ko, work)

    def logs(self, state: dict[str, Any], run_dir: Path, timeout_s: float,
             patterns: Patterns | None = None) -> tuple[list[LogResult], StageFailure | None]:
        """One log per kernel (``console-debug.log``, ``console-release.log``), each judged on its own;
        the first failure (debug before release) is the run's."""
        outcome = outcome_from_record(state["outcome"])
        timeout_s = outcome.stages.get("boot_limit_s", timeout_s)  # targets.<t>.boot_timeout_s
        symbols: set[str] | None = None
        logs: list[LogResult] = []
        failure: StageFailure | None = None
        for kind, part in outcome.parts.items():
            kept = run_dir / f"console-{kind}.log"
            if part.kernel_log.is_file() and part.kernel_log.resolve() != kept.resolve():
                shutil.copyfile(part.kernel_log, kept)
            log = parse_kernel_log(self.log_format, kept if kept.is_file() else part.kernel_log)
            logs.append(log)
            if symbols is None:
                symbols = module_symbols(Path(state["ko"])) if state.get("ko") else set()
            judged = judge_boot(kind, part, log, timeout_s, symbols, patterns)
            counts = read_counts(part.kernel_log.parent, part.kernel_log)
            if counts is not None:  # the kldload boot of a crypto-register module, counted
                merge_counts(state, counts)
            if failure is None:
                failure = judged
            elif judged is not None:  # the run has one failure; the other kernel's is kept beside it
                failure.evidence = [*failure.evidence, f"also: {judged.message}", *judged.evidence]
        if not outcome.parts and outcome.not_covered:
            # No kernel of the kit can run this variant: never a pass. A kernel that cannot run
            # it beside one that did (crypto-register on the debug kernel) is a note.
            failure = not_covered_failure(outcome.not_covered, run_dir)
        if outcome.not_run and failure is None:
            failure = not_run_failure(outcome.not_run, run_dir)
        elif outcome.not_run and failure is not None:
            failure.evidence = [*failure.evidence, "also not run: " + not_run_text(outcome.not_run)]
        return logs, failure

    def metadata(self, job: Job) -> dict[str, Any]:
        """What each kernel booted was (a set's name, REVISION, BUILDDATE, GITBRANCH, MANIFEST digest)."""
        record = job.state.get(OUTCOME.name)
        kernels = outcome_from_record(record).kernels if isinstance(record, dict) else {}
        return {**super().metadata(job), **({"kernels": kernels} if kernels else {})}

    def parts_not_run(self, job: Job) -> dict[str, str]:
        record = job.state.get(OUTCOME.name)
        if not isinstance(record, dict):
            return {}
        return {f"{kind} kernel": why for kind, why in outcome_from_record(record).not_run.items()}


TARGET = FreeBSDQemuTarget()
