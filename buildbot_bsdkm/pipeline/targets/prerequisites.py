"""The prerequisites several targets share, each found the way its stage will look for it.

Each returns a ``base.Prerequisite`` whose ``fix`` names the Debian package to install (or the
``bsdkm.yml`` key to set), so ``bsdkm-ci doctor`` and a failed configure stage say the same line.
"""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import subprocess
from pathlib import Path

from ...config.bsdkm_yml import Config, DebianSource, GitSource, LocalSource
from ...policy import PolicyError, load_policy
from .base import Prerequisite

PT_INTERP = 3  # ELF program header: the program names a dynamic loader


def command(tool: str, package: str, *, what: str = "", required: bool = True) -> Prerequisite:
    """``tool`` on this worker's PATH, where the stage that runs it will look."""
    name = f"{tool} ({what})" if what else tool
    found = shutil.which(tool)
    if found is not None:
        return Prerequisite(name, True, found, required=required)
    return Prerequisite(name, False, "not found on PATH", f"install {package}", required)


def file(name: str, path: Path, package: str, *, required: bool = True) -> Prerequisite:
    if path.is_file():
        return Prerequisite(name, True, str(path), required=required)
    return Prerequisite(name, False, f"{path} not found", f"install {package}", required)


def c_compiler() -> Prerequisite:
    """The compiler ``configure`` will take: ``$CC``'s (past a ``ccache``), else gcc, else cc."""
    words = [w for w in shlex.split(os.environ.get("CC", "")) if w != "ccache"]
    if words:
        found = shutil.which(words[0])
        if found is not None:
            return Prerequisite("C compiler", True, f"{found} ($CC)")
        return Prerequisite("C compiler", False, f"$CC names {words[0]}, which is not on PATH",
                            f"install {words[0]} or unset CC")
    for cc in ("gcc", "cc"):
        found = shutil.which(cc)
        if found is not None:
            return Prerequisite("C compiler", True, found)
    return Prerequisite("C compiler", False, "neither gcc nor cc on PATH", "install gcc")


def make() -> Prerequisite:
    return command("make", "make")


def autotools(config: Config) -> list[Prerequisite]:
    """autoconf, automake and libtool, which ``autogen.sh`` needs for a source without ``configure``.

    Debian's tarball and a git checkout have none; a tarball may (then these are optional); a local
    tree says for itself.
    """
    source = config.source
    if isinstance(source, LocalSource):
        if (source.path / "configure").is_file():
            return []
        required = True
    else:
        required = isinstance(source, DebianSource | GitSource)
    what = "autogen.sh" if required else "autogen.sh, if the tarball has no configure"
    tools = (("autoconf", "autoconf"), ("automake", "automake"), ("libtoolize", "libtool"))
    return [command(tool, package, what=what, required=required) for tool, package in tools]


def valgrind(config: Config, *, kernel: bool) -> list[Prerequisite]:
    """Valgrind, when the policy counts instructions on this target (a kernel target: in its user-space
    proxy, ``instructions.kernel_proxy``). Optional: without it every item is reported not counted."""
    try:
        settings = load_policy(config.policy).instructions
    except PolicyError:
        return []  # the gate names a policy it cannot read
    if not settings.enabled or (kernel and not settings.kernel_proxy):
        return []
    need = command("valgrind", "valgrind", what="instruction counts", required=False)
    if need.ok:
        return [need]
    return [Prerequisite(need.name, False, "not found on PATH: every counted item is reported not counted",
                         need.fix, required=False)]


def static_libc() -> Prerequisite:
    """The C library's static archive (``gcc -static`` links the guest's loader with it)."""
    try:
        out = subprocess.run(["gcc", "-print-file-name=libc.a"], capture_output=True, text=True, timeout=30,
                             check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    path = Path(out) if out else None
    if path is not None and path.is_absolute() and path.is_file():
        return Prerequisite("static libc", True, str(path.resolve()))
    return Prerequisite("static libc", False, "gcc finds no libc.a", "install libc6-dev")


def dynamic_loader(path: Path) -> bool | None:
    """Whether the ELF program at ``path`` needs a dynamic loader (None: not a readable ELF file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit only
                return None
            order = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack_from(order + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return None
    if len(table) < phentsize * phnum:
        return None
    return any(struct.unpack_from(order + "I", table, i * phentsize)[0] == PT_INTERP for i in range(phnum))


def static_busybox() -> Prerequisite:
    """The busybox the guest's initramfs runs (``$BUSYBOX``, else ``/bin/busybox``), linked statically:
    a dynamic one cannot run there, and the kernel's "No working init found" would look like the module's."""
    path = Path(os.environ.get("BUSYBOX") or "/bin/busybox")
    if not path.is_file():
        return Prerequisite("static busybox", False, f"{path} not found", "install busybox-static")
    dynamic = dynamic_loader(path)
    if dynamic is False:
        return Prerequisite("static busybox", True, str(path))
    why = "is dynamically linked" if dynamic else "is no 64-bit ELF program"
    return Prerequisite("static busybox", False, f"{path} {why}",
                        "install busybox-static (or set BUSYBOX to a static busybox)")
