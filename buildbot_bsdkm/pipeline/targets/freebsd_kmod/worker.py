"""What a FreeBSD worker must hold for ``freebsd-kmod``, where FreeBSD puts it, and the check of each.

The scripts that load and unload the module run as root. A worker user runs them through
``sudo -n`` from ``LIBEXEC_DIR``, a root-owned directory (``/usr/local/libexec``: programs run by
other programs, hier(7)) that ``workers/freebsd/setup.sh`` fills from the installed package and
names, script by script, in its sudoers rule. The worker's own package is writable by the worker
user, so its copies are never what sudo runs. ``prerequisites`` is the target's list: the configure
stage fails on the first missing required one, ``bsdkm-ci doctor`` prints them all.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from ....config.bsdkm_yml import Config
from .._freebsd import KMOD_DIR
from ..base import Prerequisite

LIBEXEC_DIR = Path("/usr/local/libexec/bsdkm-ci")
# What sudo may run as root, each as `/bin/sh LIBEXEC_DIR/<script> *`, and what they source.
PRIVILEGED_SCRIPTS = ("load.sh", "unload.sh", "collect.sh", "offload.sh")
INSTALLED_FILES = (*PRIVILEGED_SCRIPTS, "_common.sh")
SUDO = "/usr/local/bin/sudo"  # security/sudo installs under LOCALBASE
SH = "/bin/sh"
SETUP_FIX = "run workers/freebsd/setup.sh again as root (it installs the scripts and the sudo rule)"
CRYPTO_REGISTER_FLAG = "--enable-freebsdkm-crypto-register"

# Where FreeBSD keeps each command the target and its scripts run (hier(7); ports under /usr/local).
BASE = "part of FreeBSD's base system: this is not a FreeBSD machine, or its base is incomplete"
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("kldload", "/sbin/kldload", BASE),
    ("kldstat", "/sbin/kldstat", BASE),
    ("kldunload", "/sbin/kldunload", BASE),
    ("dmesg", "/sbin/dmesg", BASE),
    ("sysctl", "/sbin/sysctl", BASE),
    ("cc", "/usr/bin/cc", "FreeBSD's base compiler (clang): install the base system's toolchain"),
    ("make", "/usr/bin/make", "FreeBSD's make (bmake) builds bsdkm/: install the base system's toolchain"),
    ("sudo", SUDO, "pkg install sudo"),
    ("git", "/usr/local/bin/git", "pkg install git"),
    ("autoconf", "/usr/local/bin/autoconf", "pkg install autoconf"),
    ("automake", "/usr/local/bin/automake", "pkg install automake"),
    ("libtoolize", "/usr/local/bin/libtoolize", "pkg install libtool"),
)
SUPPORTED_MAJORS = (13, 14, 15)
MSGBUF_WANTED = 524288


def is_root() -> bool:
    return os.geteuid() == 0


def command_prerequisites() -> list[Prerequisite]:
    return [Prerequisite(f"command {name}", os.access(path, os.X_OK),
                         path if os.access(path, os.X_OK) else f"not at {path}", fix)
            for name, path, fix in COMMANDS]


def _first_line(cmd: list[str]) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = res.stdout.strip().splitlines()
    return lines[0] if res.returncode == 0 and lines else None


def running_system() -> tuple[str, str]:
    """The system's name (uname(1)) and its running kernel's version (``freebsd-version -r``, which
    also names -STABLE and -CURRENT), as the worker's own commands say them."""
    uname = os.uname()
    sysname = _first_line(["/usr/bin/uname", "-s"]) or uname.sysname
    release = (_first_line(["/bin/freebsd-version", "-r"]) if sysname == "FreeBSD" else None) or uname.release
    return sysname, release


def freebsd_version() -> Prerequisite:
    sysname, release = running_system()
    major = re.match(r"(\d+)\.", release)
    ok = sysname == "FreeBSD" and major is not None and int(major.group(1)) in SUPPORTED_MAJORS
    return Prerequisite("FreeBSD version", ok, f"{sysname} {release}",
                        "a FreeBSD 13.x or 14.x machine (amd64), dedicated to the worker")


def _owned_by_root_and_closed(path: Path) -> str | None:
    """Why root should not run ``path`` (None: root owns it and nobody else can write it)."""
    st = path.stat()
    if st.st_uid != 0:
        return f"{path} is owned by uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others"
    if not is_root() and os.access(path, os.W_OK):
        return f"{path} is writable by this user"
    return None


def installed_scripts(libexec: Path = LIBEXEC_DIR, packaged: Path = KMOD_DIR) -> Prerequisite:
    """The privileged scripts installed, root's alone, and identical to this package's own."""
    name = f"privileged scripts in {libexec}"
    missing = [f for f in INSTALLED_FILES if not (libexec / f).is_file()]
    if missing:
        return Prerequisite(name, False, f"missing: {', '.join(missing)}", SETUP_FIX)
    changed = [f for f in INSTALLED_FILES if not filecmp.cmp(libexec / f, packaged / f, shallow=False)]
    if changed:
        return Prerequisite(name, False, f"differ from the installed package's ({packaged}): "
                            f"{', '.join(changed)}", SETUP_FIX)
    for path in (libexec, *(libexec / f for f in INSTALLED_FILES)):
        why = _owned_by_root_and_closed(path)
        if why:
            return Prerequisite(name, False, why, SETUP_FIX)
    return Prerequisite(name, True, f"{', '.join(INSTALLED_FILES)}: root's, as packaged")


def sudo_command(script: str, *args: str, libexec: Path = LIBEXEC_DIR) -> list[str]:
    return [SUDO, "-n", SH, str(libexec / script), *args]


def _sudo_allows(cmd: list[str]) -> tuple[bool, str]:
    """``sudo -n -l CMD``: whether the sudoers policy lets this user run CMD without a password."""
    try:
        res = subprocess.run([cmd[0], "-n", "-l", *cmd[2:]], capture_output=True, text=True, timeout=20,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    said = (res.stderr or res.stdout).strip().splitlines()
    return res.returncode == 0, said[-1] if said else f"exit {res.returncode}"


def sudo_rule(libexec: Path = LIBEXEC_DIR) -> Prerequisite:
    """``sudo -n`` runs exactly the privileged scripts: each, and no shell of the worker's choosing."""
    name = "sudo -n for the privileged scripts"
    if is_root():
        return Prerequisite(name, True, "running as root: sudo is not needed")
    if not os.access(SUDO, os.X_OK):
        return Prerequisite(name, False, f"no {SUDO}", "pkg install sudo, then " + SETUP_FIX)
    refused = []
    for script in PRIVILEGED_SCRIPTS:
        ok, said = _sudo_allows(sudo_command(script, "x", libexec=libexec))
        if not ok:
            refused.append(f"{script} ({said})")
    if refused:
        return Prerequisite(name, False, f"sudo refuses {', '.join(refused)}", SETUP_FIX)
    too_much = [" ".join(c[2:]) for c in ([SUDO, "-n", SH], [SUDO, "-n", SH, "-c", "id"])
                if _sudo_allows(c)[0]]
    if too_much:
        return Prerequisite(name, False, f"sudo also allows {'; '.join(too_much)}: a root shell for it",
                            "allow only the scripts: remove the wider rule from /usr/local/etc/sudoers(.d)")
    return Prerequisite(name, True, f"allowed: {', '.join(PRIVILEGED_SCRIPTS)}; a plain shell is not")


def _newvers(sys_dir: Path) -> str | None:
    """``REVISION-BRANCH`` of a kernel source tree (sys/conf/newvers.sh), patch level left off."""
    try:
        text = (sys_dir / "conf" / "newvers.sh").read_text(errors="replace")
    except OSError:
        return None
    rev = re.search(r'^REVISION="([^"]+)"', text, re.M)
    branch = re.search(r'^BRANCH="?([^"\n]+)"?', text, re.M)
    if not rev or not branch:
        return None
    return re.sub(r"-p\d+$", "", f"{rev.group(1)}-{branch.group(1)}")


def kernel_sources(sys_dir: Path) -> Prerequisite:
    name = f"kernel sources {sys_dir}"
    fix = ("fetch src.txz of the running release into / (setup.sh step 2), or set the target's "
           "kernel_source to a tree of the running kernel")
    if not (sys_dir / "conf" / "kmod.mk").is_file():
        return Prerequisite(name, False, f"no {sys_dir}/conf/kmod.mk", fix)
    running = re.sub(r"-p\d+$", "", running_system()[1])
    tree = _newvers(sys_dir)
    if tree != running:
        return Prerequisite(name, False, f"the tree is {tree or 'of an unknown version'}, "
                            f"the kernel {running}", fix)
    return Prerequisite(name, True, f"{tree}, as the running kernel")


def _sysctl(oid: str) -> str | None:
    try:
        res = subprocess.run(["/sbin/sysctl", "-n", oid], capture_output=True, text=True, timeout=10,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() if res.returncode == 0 else None


def kernel_log_settings() -> list[Prerequisite]:
    console = _sysctl("kern.log_console_output")
    size = _sysctl("kern.msgbufsize")
    return [
        Prerequisite("kern.log_console_output", console == "1", f"= {console}" if console else "not readable",
                     "sysctl kern.log_console_output=1, and the same line in /etc/sysctl.conf "
                     "(the scripts' markers reach the message buffer only with it)"),
        Prerequisite("kern.msgbufsize", size is not None and size.isdigit() and int(size) >= MSGBUF_WANTED,
                     f"= {size}" if size else "not readable",
                     f'kern.msgbufsize="{MSGBUF_WANTED}" in /boot/loader.conf, then reboot (a smaller buffer '
                     "can wrap during a verbose run)", required=False),
    ]


def cryptodev_available(required: bool) -> list[Prerequisite]:
    listed = subprocess.run(["/sbin/kldstat", "-q", "-m", "cryptodev"], capture_output=True,
                            check=False).returncode == 0 if os.access("/sbin/kldstat", os.X_OK) else False
    module = Path("/boot/kernel/cryptodev.ko")  # GENERIC has no device cryptodev: offload.sh loads it
    ok = listed or module.is_file()
    detail = "the cryptodev module is loaded" if listed else str(module) if ok else f"no {module}, not loaded"
    openssl = shutil.which("openssl", path="/usr/bin")
    return [
        Prerequisite("cryptodev (/dev/crypto)", ok, detail,
                     "a kernel with cryptodev.ko in /boot/kernel (offload.sh loads it)", required=required),
        Prerequisite("command openssl", openssl is not None, openssl or "not at /usr/bin/openssl", BASE,
                     required=required),
    ]


def needs_crypto_register(config: Config, target: str) -> bool:
    """Whether an enabled variant of ``target`` registers the module's crypto driver (offload.sh runs)."""
    return any(v.enabled and target in v.targets and CRYPTO_REGISTER_FLAG in v.flags
               for v in config.variants.values())


def prerequisites(config: Config, target: str, kernel_source: str | None) -> list[Prerequisite]:
    found = [freebsd_version(), *command_prerequisites()]
    if not is_root():
        found += [installed_scripts(), sudo_rule()]
    found.append(kernel_sources(Path(kernel_source or "/usr/src/sys")))
    found += cryptodev_available(needs_crypto_register(config, target))
    found += kernel_log_settings()
    return found
