"""The faithful FreeBSD double: a root directory laid out as FreeBSD lays out its files.

The replay double's commands sit at FreeBSD's own paths (``/sbin/kldload``, ``/sbin/kldstat``,
``/sbin/kldunload``, ``/sbin/dmesg``, ``/sbin/sysctl``, ``/usr/bin/openssl``), the commands
setup.sh runs are stand-ins at theirs (``standins.py``), the base tools FreeBSD keeps in ``/bin``
and ``/usr/bin`` are Debian's real ones put there, and sudo is Debian's real sudo as
``/usr/local/bin/sudo`` reading ``/usr/local/etc/sudoers`` (FreeBSD's sudo port's file, whose
last line includes ``/usr/local/etc/sudoers.d``). Nothing of the double is on a PATH: what the
scripts find is what their PATH finds there.

Every command runs in a private mount namespace (``unshare --mount --propagation private``) in
which the host's shared libraries are bound read-only under ``/usr/lib``, then ``chroot``: the
binds end with the command, and none reaches the host's namespace even if a test fails. What
stays Linux: ``/lib`` and ``/lib64`` are links into ``/usr`` for the dynamic loader, sudo's
plugins are in Debian's ``/usr/libexec/sudo``, PAM is Debian's, and the double's own interpreter
is the test's Python, bound at its own path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RELEASE = "14.3-RELEASE-p2"
WORKER_UID = 1001  # pw useradd's first uid on a fresh FreeBSD (uids from 1001)

# FreeBSD's base tools, where FreeBSD keeps them (hier(7)), from the host's own binaries.
BASE_TOOLS = {
    "/bin": ("cat", "chmod", "cp", "date", "echo", "expr", "hostname", "kill", "ln", "ls", "mkdir", "mv",
             "pwd", "realpath", "rm", "rmdir", "sleep", "test", "["),
    "/usr/bin": ("awk", "basename", "cmp", "cut", "dirname", "env", "find", "grep", "head", "id",
                 "install", "mktemp", "printf", "sed", "sort", "tail", "tar", "tee", "touch", "tr", "true",
                 "false", "wc", "xargs", "stat"),
}
DOUBLE_COMMANDS = {"/sbin": ("kldload", "kldstat", "kldunload", "dmesg", "sysctl")}
STANDINS = {"/usr/sbin/pkg": "pkg", "/usr/sbin/pw": "pw", "/usr/bin/su": "su", "/usr/bin/crontab": "crontab",
            "/usr/bin/fetch": "fetch", "/bin/freebsd-version": "freebsd-version", "/usr/bin/uname": "uname",
            "/bin/csh": "csh"}
# FreeBSD's sudoers as the security/sudo port installs it (plugins/sudoers/sudoers.in, sysconfdir
# /usr/local/etc): no secure_path, root may do anything, the drop-in directory last.
SUDOERS = """## sudoers file (FreeBSD's security/sudo: /usr/local/etc/sudoers)
root ALL=(ALL:ALL) ALL
@includedir /usr/local/etc/sudoers.d
"""
# Python packages setup.sh asks pkg for, as the distributions they hold.
PY_PACKAGES = {"py311-buildbot-worker": "buildbot-worker", "py311-cryptography": "cryptography",
               "py311-twisted": "twisted", "py311-treq": "treq", "py311-pyyaml": "pyyaml",
               "py311-requests": "requests"}
PLAIN_PACKAGES = {"git": ["git"], "autoconf": ["autoconf"], "automake": ["automake"],
                  "libtool": ["libtoolize"], "gmake": ["gmake"]}


class DoubleUnavailable(RuntimeError):
    """This machine cannot build the faithful double (the reason is the message)."""


def _upstream_python() -> Path:
    """The interpreter behind the tests, when it has CPython's own layout (FreeBSD's python311 has it)."""
    prefix = Path(sys.base_prefix)
    base = {"base": sys.base_prefix, "platbase": sys.base_prefix}
    purelib = Path(sysconfig.get_paths(vars=base)["purelib"])
    if prefix == Path("/usr") or purelib != prefix / "lib" / "python3.11" / "site-packages":
        raise DoubleUnavailable(f"the faithful double needs a CPython 3.11 with upstream's layout "
                                f"(pyenv, python.org); this is {sys.base_prefix}")
    return prefix


def _distribution_files(spec: str, seen: set[str]) -> list[Path]:
    """A distribution's installed files and those of what it requires, recursively (pkg's dependencies),
    with the extras a requirement names (``twisted[tls]``)."""
    import importlib.metadata as md
    import re

    m = re.match(r"\s*([A-Za-z0-9._-]+)\s*(?:\[([^\]]*)\])?", spec)
    if m is None:
        return []
    name, extras = m.group(1), {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}
    key = f"{name.lower().replace('_', '-')}[{','.join(sorted(extras))}]"
    if key in seen:
        return []
    seen.add(key)
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return []
    files = [Path(str(dist.locate_file(f))) for f in dist.files or []]
    for req in dist.requires or []:
        wanted = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if wanted and wanted.group(1) not in extras:
            continue
        if "platform_system == 'Windows'" in req or 'sys_platform == "win32"' in req:
            continue
        files += _distribution_files(req.split(";")[0], seen)
    return files


@dataclass
class FreeBSDRoot:
    root: Path
    prefix: Path  # the test's Python, bound at its own path (the double's commands run with it)

    @classmethod
    def build(cls, root: Path, wheelhouse: Path | None = None) -> FreeBSDRoot:
        prefix = _upstream_python()
        if shutil.which("unshare") is None or os.geteuid() != 0:
            raise DoubleUnavailable("the faithful double needs root and unshare(1)")
        if not Path("/usr/bin/sudo").is_file():
            raise DoubleUnavailable("the faithful double needs Debian's sudo (apt-get install sudo)")
        self = cls(root, prefix)
        self._lay_out(wheelhouse)
        return self

    # ------------------------------------------------------------------ building the tree

    def p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def _put(self, path: str, text: str, mode: int = 0o644) -> None:
        dest = self.p(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        dest.chmod(mode)

    def _lay_out(self, wheelhouse: Path | None) -> None:
        r = self.root
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "usr/libexec/sudo",
                  "usr/local/bin", "usr/local/sbin", "usr/local/etc/sudoers.d", "usr/local/libexec",
                  "usr/local/lib/python3.11", "etc/pam.d", "etc/security", "dev", "proc", "boot/kernel",
                  "home", "root", "var/db/bsdkm-double", "var/run", "var/cron/tabs", "var/log",
                  ".double/fetch", ".double/pkgrepo", ".double/wheels", ".double/site-packages"):
            (r / d).mkdir(parents=True, exist_ok=True)
        for d in ("tmp", "var/tmp"):
            (r / d).mkdir(parents=True, exist_ok=True)
            (r / d).chmod(0o1777)
        (r / "lib").symlink_to("usr/lib")
        (r / "lib64").symlink_to("usr/lib64")
        for where, names in BASE_TOOLS.items():
            for name in names:
                src = shutil.which(name, path="/usr/bin:/bin:/usr/sbin")
                if src is None:
                    raise DoubleUnavailable(f"no {name} on this machine")
                shutil.copy2(src, self.p(f"{where}/{name}"))
        shutil.copy2(shutil.which("dash") or "/bin/sh", self.p("/bin/sh"))
        py = str(self.prefix / "bin" / "python3.11")  # bound at its own path: its RUNPATH is absolute
        self.p(str(self.prefix)).mkdir(parents=True, exist_ok=True)
        for where, names in DOUBLE_COMMANDS.items():
            for name in names:
                self._put(f"{where}/{name}", _wrapper(py, "fakekern.py", name), 0o755)
        self._put("/usr/bin/openssl", _wrapper(py, "fakeopenssl.py", ""), 0o755)
        for tool in ("cc", "make"):  # the base toolchain: nothing is built in the double
            stand_in = f"#!/bin/sh\necho '{tool}: base toolchain stand-in' >&2\nexit 1\n"
            self._put(f"/usr/bin/{tool}", stand_in, 0o755)
        for path, name in STANDINS.items():
            self._put(path, f"#!/bin/sh\nexec {py} -S /.double/standins.py {name} \"$@\"\n", 0o755)
        for name in ("fakekern.py", "fakeopenssl.py", "standins.py"):
            shutil.copy2(HERE / name, self.p(f"/.double/{name}"))
        self._put("/.double/release", RELEASE + "\n")
        self._etc()
        self._packages(wheelhouse)
        for path in ("/var/db/standins.log", "/dev/console"):
            self._put(path, "", 0o666 if path.endswith(".log") else 0o600)
        self.p("/var/db/bsdkm-double").chmod(0o777)

    def _etc(self) -> None:
        self._put("/etc/passwd", "root:*:0:0:Charlie &:/root:/bin/csh\n"
                  "nobody:*:65534:65534:Unprivileged user:/nonexistent:/usr/sbin/nologin\n")
        self._put("/etc/group", "wheel:*:0:root\nnobody:*:65534:\n")
        self._put("/etc/shadow", "root:*:19000:0:99999:7:::\n", 0o640)
        self._put("/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n")
        self._put("/etc/hosts", f"127.0.0.1 localhost fbsd-worker {socket.gethostname()}\n")
        self._put("/etc/sysctl.conf", "# an administrator's own line, which setup.sh must keep\n"
                  "security.bsd.see_other_uids=0\n")
        self._put("/boot/loader.conf", 'autoboot_delay="3"\n')
        # Debian's sudo reads FreeBSD's sudoers file here (sudo.conf names it for the plugin).
        self._put("/etc/sudo.conf", "Plugin sudoers_policy sudoers.so sudoers_file=/usr/local/etc/sudoers\n"
                  "Set disable_coredump false\n")
        self._put("/usr/local/etc/sudoers", SUDOERS, 0o440)
        # Debian's sudo is built with PAM: its whole configuration comes along (FreeBSD's port has its own).
        shutil.copytree("/etc/pam.d", self.p("/etc/pam.d"), dirs_exist_ok=True)
        shutil.copytree("/etc/security", self.p("/etc/security"), dirs_exist_ok=True)
        if Path("/etc/login.defs").is_file():
            shutil.copy2("/etc/login.defs", self.p("/etc/login.defs"))
        self._put("/var/cron/tabs/buildbot", "# the user's own job, which setup.sh must keep\n"
                  "0 3 * * * /home/buildbot/cleanup.sh\n", 0o600)

    def _packages(self, wheelhouse: Path | None) -> None:
        """pkg's repository: what each package setup.sh asks for installs, from this machine's Python."""
        repo = self.p("/.double/pkgrepo")
        site = "usr/local/lib/python3.11/site-packages"
        py = repo / "python311" / "usr/local/bin"
        py.mkdir(parents=True)
        shutil.copy2(self.prefix / "bin" / "python3.11", py / "python3.11")
        (repo / "python311" / site).mkdir(parents=True)
        (repo / "python3" / "usr/local/bin").mkdir(parents=True)  # lang/python3: the python3 link only
        (repo / "python3" / "usr/local/bin" / "python3").symlink_to("python3.11")
        (repo / "python3" / "+DEPS").write_text("python311\n")
        host_site = Path(sysconfig.get_paths()["purelib"])
        for pkg, dist in PY_PACKAGES.items():
            out = repo / pkg / site
            out.mkdir(parents=True)
            (repo / pkg / "+DEPS").write_text("python311\n")
            for f in _distribution_files(dist, set()):
                if f.is_file() and host_site in f.parents and "__pycache__" not in f.parts:
                    dest = out / f.relative_to(host_site)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest)
        (repo / "py311-buildbot-worker" / "usr/local/bin").mkdir(parents=True, exist_ok=True)
        (repo / "py311-buildbot-worker" / "usr/local/bin" / "buildbot-worker").write_text(
            "#!/usr/local/bin/python3.11\nimport sys\nfrom buildbot_worker.scripts.runner import run\n"
            "sys.exit(run())\n")
        (repo / "py311-buildbot-worker" / "usr/local/bin" / "buildbot-worker").chmod(0o755)
        sudo = repo / "sudo"
        (sudo / "usr/local/bin").mkdir(parents=True)
        (sudo / "usr/local/sbin").mkdir(parents=True)
        (sudo / "usr/local/etc/sudoers.d").mkdir(parents=True)
        shutil.copy2("/usr/bin/sudo", sudo / "usr/local/bin/sudo")
        (sudo / "usr/local/bin/sudo").chmod(0o4755 | stat.S_ISUID)
        shutil.copy2("/usr/sbin/visudo", sudo / "usr/local/sbin/visudo")
        for pkg, tools in PLAIN_PACKAGES.items():
            (repo / pkg / "usr/local/bin").mkdir(parents=True)
            for tool in tools:
                stand_in = f"#!/bin/sh\necho '{tool}: package stand-in'\n"
                (repo / pkg / "usr/local/bin" / tool).write_text(stand_in)
                (repo / pkg / "usr/local/bin" / tool).chmod(0o755)
        if wheelhouse is not None:
            for whl in wheelhouse.glob("*.whl"):
                shutil.copy2(whl, self.p(f"/.double/wheels/{whl.name}"))

    def kernel_sources(self, release: str = RELEASE) -> Path:
        """A src.txz stand-in (a plain tar) that fetch hands out for ``release``: kmod.mk and newvers.sh."""
        work = self.root.parent / "src-set"
        conf = work / "usr/src/sys/conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "kmod.mk").write_text("# kmod.mk stand-in\n")
        revision, branch = release.split("-", 1)
        (conf / "newvers.sh").write_text(f'TYPE="FreeBSD"\nREVISION="{revision}"\nBRANCH="{branch}"\n')
        out = self.p("/.double/fetch/src.txz")
        subprocess.run(["tar", "-C", str(work), "-cf", str(out), "usr"], check=True)
        url = f"https://download.freebsd.org/releases/amd64/{release.rsplit('-p', 1)[0]}/src.txz"
        self._put("/.double/fetch/allowed", url + "\n")
        return out

    # ------------------------------------------------------------------ the kernel double

    def boot(self, scenario: dict) -> None:
        """A fresh fake kernel with ``scenario`` (as FreeBSDDouble.boot_doc, at FreeBSD's paths)."""
        state = self.p("/var/db/bsdkm-double")
        for f in state.iterdir():
            f.unlink()
        (state / "msgbuf").write_text("".join(line + "\n" for line in scenario["boot_log"]))
        (state / "msgbuf").chmod(0o666)
        self._put("/.double/scenario.json", json.dumps(scenario))
        self._put("/dev/console", "", 0o600)

    def calls(self) -> list[list[str]]:
        path = self.p("/var/db/bsdkm-double/calls.log")
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    def standin_calls(self) -> list[list[str]]:
        return [line.split() for line in self.p("/var/db/standins.log").read_text().splitlines()]

    # ------------------------------------------------------------------ running inside

    def _mounts(self, binds: list[Path]) -> str:
        r = self.root
        lines = ["set -e"]

        def bind(src: str | Path, dest: str, ro: bool = True) -> None:
            target = r / dest.lstrip("/")
            lines.append(f"mount --bind '{src}' '{target}'")
            if ro:
                lines.append(f"mount -o remount,bind,ro '{target}'")

        bind("/usr/lib", "/usr/lib")
        bind("/usr/lib64", "/usr/lib64")
        bind("/usr/libexec/sudo", "/usr/libexec/sudo")
        bind(self.prefix, str(self.prefix))
        bind(self.prefix / "lib" / "python3.11", "/usr/local/lib/python3.11")
        bind(r / ".double" / "site-packages", "/usr/local/lib/python3.11/site-packages", ro=False)
        for dev in ("null", "zero", "urandom", "random"):
            self._put(f"/dev/{dev}", "", 0o666) if not self.p(f"/dev/{dev}").exists() else None
            bind(f"/dev/{dev}", f"/dev/{dev}", ro=False)
        lines.append(f"mount -t proc proc '{r / 'proc'}'")
        for b in binds:
            target = r / str(b).lstrip("/")
            target.mkdir(parents=True, exist_ok=True)
            lines.append(f"mount --bind '{b}' '{target}'")
        return "\n".join(lines)

    def run(self, argv: list[str], *, user: str | None = None, env: dict[str, str] | None = None,
            binds: tuple[Path, ...] = (), timeout: float = 300, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """``argv`` in the double, as root or as ``user`` (uid from its /etc/passwd), with only ``env``."""
        spec = []
        if user is not None:
            users = (line.split(":") for line in self.p("/etc/passwd").read_text().splitlines())
            entry = next(e for e in users if e[0] == user)
            spec = [f"--userspec={entry[2]}:{entry[3]}", "--groups="]
        environ = {"PATH": "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin", "LANG": "C.UTF-8",
                   **(env or {})}
        inner = ["chroot", *spec, str(self.root), "/usr/bin/env", "-i",
                 *(f"{k}={v}" for k, v in environ.items()), *argv]
        script = self._mounts(list(binds)) + '\nexec "$@"\n'
        cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "enter", *inner]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin, check=False)


def _wrapper(py: str, module: str, name: str) -> str:
    """A double's command at its FreeBSD path: its state at fixed places, no environment needed."""
    console = "BSDKM_DOUBLE_CONSOLE=/dev/console " if module == "fakekern.py" else ""
    return ("#!/bin/sh\n# The faithful FreeBSD double (tests/freebsd_double/chroot.py).\n"
            "BSDKM_DOUBLE_STATE=/var/db/bsdkm-double BSDKM_DOUBLE_SCENARIO=/.double/scenario.json \\\n"
            f"{console}exec {py} -S /.double/{module} {name + ' ' if name else ''}\"$@\"\n")
