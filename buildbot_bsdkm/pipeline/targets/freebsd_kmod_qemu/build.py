"""``libwolfssl.ko`` cross-built on Linux for each kernel's own sources (bmake, clang
``--target=x86_64-unknown-freebsd<version>``, cached by their inputs), and ``kldinit``, the init
program of a kldload boot.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ....config.bsdkm_yml import Config
from ....retry.classify_failure import Patterns, classify
from ...runtime.locks import exclusive
from ...runtime.proc import run_logged
from ...runtime.stage_error import StageError, infra_error
from ...runtime.userspace_build import source_fingerprint
from .._freebsd import FREEBSD_BASE_FLAGS, check_flag, freebsd_kmod_dir
from ..base import append_log
from .kit import DEFAULT_VERSION, TARGET_NAME, Kit, check_kit, kernels_option, kits
from .worker import Toolchain, find_toolchain

FREEBSD_TRIPLE = f"x86_64-unknown-freebsd{DEFAULT_VERSION}"  # kldinit: raw syscalls, any version
INIT_SOURCE = "kldinit.c"
# configure probes <machine/atomic.h> with the host compiler, which has no FreeBSD headers.
CONFIGURE_VARS = ("CC=clang", "ac_cv_header_machine_atomic_h=yes")


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
    src = freebsd_kmod_dir() / INIT_SOURCE
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
