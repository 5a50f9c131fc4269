"""One FreeBSD boot in QEMU: which boots a run makes (``boot_plan``), the ESP directory the loader
reads (``loader_rc``), the FAT root ``kldinit`` runs from, what QEMU boots (``machine``) and when a
console has said all it will (``stop_rule``). The guest layer (``runtime.guest``) launches it.
"""

from __future__ import annotations

import lzma
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...runtime.console_lines import console_lines
from ...runtime.guest import PanicWait, StopRule
from ...runtime.locks import exclusive
from ...runtime.stage_error import infra_error
from .counting import BootCount
from .kit import Kit

OVMF_CODE = Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
OVMF_VARS = Path("/usr/share/OVMF/OVMF_VARS_4M.fd")
# After a panic the kernel prints its backtrace, then reboots (-no-reboot ends QEMU); if it
# stops in the debugger instead, give the trace this long to reach the console.
PANIC_GRACE_S = 20.0


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


def loader_rc(mode: str, nonce: str | None = None, count: BootCount | None = None) -> str:
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
             count: BootCount | None = None) -> Path:
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


def machine(esp: Path, vars_fd: Path, root: Path | None) -> list[str]:
    """What QEMU boots: OVMF from its flash, the loader from the ESP directory, the FAT root beside it."""
    drives = [f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}", f"if=pflash,format=raw,file={vars_fd}",
              f"file=fat:rw:{esp},format=raw,if=virtio"]
    if root is not None:
        drives.append(f"file={root},format=raw,if=virtio")
    return [word for drive in drives for word in ("-drive", drive)]


PANIC_END_RE = re.compile(r"(?:^|\n)(?:Uptime: |Rebooting|KDB: enter|db> )")


def stop_rule(mode: str, clock: Callable[[], float]) -> StopRule:
    """When a console has said all it will: the guest panicked (and its backtrace is out), waits at
    a prompt nothing answers, or (preloaded) reached a benchmark whose clock has not started."""
    stops = [("mountroot>", "mountroot")]
    if mode == "preload":
        stops.append(("wolfCrypt Benchmark (", "benchmark-at-preload"))
    return StopRule(stops, clock, PanicWait("panic: ", PANIC_END_RE, PANIC_GRACE_S))


def cut_at_benchmark(console: Path) -> None:
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
