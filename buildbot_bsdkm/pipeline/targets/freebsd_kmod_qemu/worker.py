"""What a worker needs to run ``freebsd-kmod-qemu``: the cross toolchain and the tools that build the
module and boot it, and each configured kernel's inputs, checked without fetching anything big.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ....config.bsdkm_yml import Config
from ...runtime.source import cache_root
from ...runtime.stage_error import StageError, infra_error
from .. import prerequisites as needs
from ..base import Prerequisite, require
from .boot import OVMF_CODE, OVMF_VARS
from .kit import TARGET_NAME, Kit, find_kit, kernels_option
from .options import freebsd_options, release_mirror_problem
from .release_set import CURRENT, DEFAULT_MIRROR, ReleaseSpec, cached_kit, resolve_snapshot

PROBE_TIMEOUT_S = 5.0  # a mirror asked whether it has a set: the configure stage fetches it later


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
    fb = freebsd_options(config).freebsd
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
