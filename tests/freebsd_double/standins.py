"""Stand-ins for the FreeBSD commands ``workers/freebsd/setup.sh`` runs, inside the faithful double.

Each is a two-line sh wrapper at its FreeBSD path (``/usr/sbin/pkg``, ``/usr/sbin/pw``,
``/usr/bin/su``, ``/usr/bin/crontab``, ``/usr/bin/fetch``, ``/bin/freebsd-version``,
``/usr/bin/uname``, ``/bin/csh``) that runs this file with its own name, with the double's own
interpreter (``/.double``, a path FreeBSD has no use for). They do what FreeBSD's commands are
documented to do, as far as setup.sh can tell, and log every call to ``/var/db/standins.log``:

- ``pkg install -y NAME...``: a package's files come from the double's repository
  (``/.double/pkgrepo/NAME/``, laid out from / like a package's files); ``python311`` brings
  ``/usr/local/bin/python3.11``; a name the repository lacks is refused as pkg refuses it;
- ``pw useradd|usershow|usermod``: ``/etc/passwd`` and ``/etc/group`` (usershow prints the
  master.passwd line: name:pw:uid:gid:class:change:expire:gecos:home:shell);
- ``su [-m] USER -c CMD``: su(1): without ``-m`` the target's shell, environment kept but USER,
  HOME and SHELL; with ``-m`` the caller's login shell (root's, ``/bin/csh`` on 13.x);
- ``crontab -u USER -l | -``: ``/var/cron/tabs/USER``; ``-l`` without one exits 1;
- ``fetch -o FILE URL``: the file the test put at ``/.double/fetch/<last URL part>``, else 1;
- ``freebsd-version [-kru]``, ``uname [-smrna]``: the double's release (``/.double/release``);
- ``csh -c CMD``: csh's answer to a leading ``VAR=value`` word ("Command not found."), else sh.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path

LOG = Path("/var/db/standins.log")
DOUBLE = Path("/.double")


def log(argv: list[str]) -> None:
    with LOG.open("a", encoding="utf-8") as fh:
        fh.write(" ".join(argv) + "\n")


def release() -> str:
    return (DOUBLE / "release").read_text(encoding="utf-8").strip()


def passwd() -> list[list[str]]:
    return [line.split(":") for line in Path("/etc/passwd").read_text().splitlines() if line]


def user_entry(name: str) -> list[str] | None:
    return next((e for e in passwd() if e[0] == name), None)


def cmd_pkg(args: list[str]) -> int:
    if args[:1] != ["install"]:
        print(f"pkg: {args[:1]} is not replayed by the double", file=sys.stderr)
        return 1
    names = [a for a in args[1:] if not a.startswith("-")]
    repo = DOUBLE / "pkgrepo"
    missing = [n for n in names if not (repo / n).is_dir()]
    if missing:
        print(f"pkg: No packages available to install matching '{missing[0]}' have been found in the "
              "repositories", file=sys.stderr)
        return 1
    for name in _with_dependencies(repo, names):
        src = repo / name
        for path in sorted(src.rglob("*")):
            if path.name == "+DEPS":
                continue
            dest = Path("/") / path.relative_to(src)
            if path.is_symlink():
                if not dest.is_symlink():
                    dest.symlink_to(os.readlink(path))
            elif path.is_dir():
                dest.mkdir(parents=True, exist_ok=True)
            elif not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
    print(f"pkg: {len(names)} package(s) installed or already up to date")
    return 0


def _with_dependencies(repo: Path, names: list[str]) -> list[str]:
    """``names`` and what they depend on (a package's ``+DEPS``), dependencies first, as pkg installs."""
    order: list[str] = []

    def add(name: str) -> None:
        if name in order:
            return
        deps = repo / name / "+DEPS"
        for dep in deps.read_text().split() if deps.is_file() else []:
            add(dep)
        order.append(name)

    for name in names:
        add(name)
    return order


def cmd_pw(args: list[str]) -> int:
    if len(args) < 2:
        print("usage: pw [user|group] command ...", file=sys.stderr)
        return 64
    verb, name, rest = args[0], args[1], args[2:]
    opts = {rest[i]: rest[i + 1] for i in range(0, len(rest) - 1, 2) if rest[i].startswith("-")}
    entry = user_entry(name)
    if verb == "usershow":
        if entry is None:
            print(f"pw: no such user `{name}'", file=sys.stderr)
            return 67
        print(":".join([entry[0], "*", entry[2], entry[3], "", "0", "0", entry[4], entry[5], entry[6]]))
        return 0
    if verb == "useradd":
        if entry is not None:
            print(f"pw: login name `{name}' already exists", file=sys.stderr)
            return 65
        uid = max([1000, *(int(e[2]) for e in passwd() if int(e[2]) < 60000)]) + 1
        home = opts.get("-d", f"/home/{name}")
        shell = opts.get("-s", "/bin/sh")
        with open("/etc/passwd", "a") as fh:
            fh.write(f"{name}:*:{uid}:{uid}:{opts.get('-c', 'User &')}:{home}:{shell}\n")
        with open("/etc/group", "a") as fh:
            fh.write(f"{name}:*:{uid}:\n")
        if "-m" in args:
            Path(home).mkdir(parents=True, exist_ok=True)
            os.chown(home, uid, uid)
            os.chmod(home, 0o755)
        return 0
    if verb == "usermod" and entry is not None and "-s" in opts:
        lines = [":".join(e[:6] + [opts["-s"]]) if e[0] == name else ":".join(e) for e in passwd()]
        Path("/etc/passwd").write_text("\n".join(lines) + "\n")
        return 0
    print(f"pw: {args} is not replayed by the double", file=sys.stderr)
    return 64


def cmd_su(args: list[str]) -> int:
    keep = "-m" in args
    rest = [a for a in args if a != "-m"]
    if len(rest) < 3 or rest[1] != "-c":
        print("usage: su [-] [-c class] [-flms] [login [args]]", file=sys.stderr)
        return 1
    target = user_entry(rest[0])
    caller = next((e for e in passwd() if int(e[2]) == os.getuid()), None)
    if target is None or caller is None:
        print(f"su: unknown login: {rest[0]}", file=sys.stderr)
        return 1
    env = dict(os.environ)
    shell = caller[6] if keep else target[6]
    if not keep:
        env.update(USER=target[0], HOME=target[5], SHELL=target[6])
    os.setgroups([])
    os.setgid(int(target[3]))
    os.setuid(int(target[2]))
    os.execve(shell, [shell, "-c", *rest[2:]], env)
    return 127


def cmd_crontab(args: list[str]) -> int:
    user = args[args.index("-u") + 1] if "-u" in args else (user_entry_by_uid() or "root")
    tab = Path("/var/cron/tabs") / user
    if "-l" in args:
        if not tab.exists():
            print(f"crontab: no crontab for {user}", file=sys.stderr)
            return 1
        sys.stdout.write(tab.read_text())
        return 0
    if args[-1:] == ["-"]:
        tab.parent.mkdir(parents=True, exist_ok=True)
        tab.write_text(sys.stdin.read())
        tab.chmod(0o600)
        return 0
    print(f"crontab: {args} is not replayed by the double", file=sys.stderr)
    return 1


def user_entry_by_uid() -> str | None:
    return next((e[0] for e in passwd() if int(e[2]) == os.getuid()), None)


def cmd_fetch(args: list[str]) -> int:
    out = args[args.index("-o") + 1]
    url = args[-1]
    src = DOUBLE / "fetch" / url.rstrip("/").rsplit("/", 1)[-1]
    if not (DOUBLE / "fetch" / "allowed").is_file() or url not in (DOUBLE / "fetch" / "allowed").read_text():
        print(f"fetch: {url}: Not Found", file=sys.stderr)
        return 1
    shutil.copyfile(src, out)
    return 0


def cmd_freebsd_version(args: list[str]) -> int:
    flags = "".join(a.lstrip("-") for a in args) or "u"
    for _ in flags:
        print(release())
    return 0


def cmd_uname(args: list[str]) -> int:
    rel = release()
    parts = {"s": "FreeBSD", "n": "fbsd-worker", "r": rel, "m": "amd64",
             "v": f"FreeBSD {rel} releng/{rel.split('-')[0]}-n0 GENERIC"}
    flags = "".join(a.lstrip("-") for a in args) or "s"
    if "a" in flags:
        flags = "snrvm"
    print(" ".join(parts[f] for f in "snrvm" if f in flags))
    return 0


def cmd_csh(args: list[str]) -> int:
    if args[:1] == ["-c"] and args[1:]:
        first = args[1].split()[0] if args[1].split() else ""
        if "=" in first and not first.startswith(("'", '"')):
            print(f"{first}: Command not found.", file=sys.stderr)
            return 1
        os.execv("/bin/sh", ["/bin/sh", *args])
    print("csh: only -c CMD is replayed by the double", file=sys.stderr)
    return 1


COMMANDS = {"pkg": cmd_pkg, "pw": cmd_pw, "su": cmd_su, "crontab": cmd_crontab, "fetch": cmd_fetch,
            "freebsd-version": cmd_freebsd_version, "uname": cmd_uname, "csh": cmd_csh}


def main(argv: list[str]) -> int:
    name = argv[1]
    with contextlib.suppress(OSError):  # a user who cannot write the log still gets the command
        log(argv[1:])
    return COMMANDS[name](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
