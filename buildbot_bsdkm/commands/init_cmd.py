"""``bsdkm-ci init master DIR`` / ``bsdkm-ci init worker DIR``: a Buildbot master or worker, ready to start.

``init master`` writes master.cfg, a bsdkm.yml (the packaged one, with ``master:``, ``workers:`` and
``www:`` filled in and a ``github:`` to fill), its policies, and each worker's password, generated, in
DIR/secrets/NAME (mode 0600). The web UI asks for a login to force, stop or cancel builds: user
admin, a generated password in DIR/www.htpasswd (mode 0600). The database URL (--db-url) is kept
in DIR/secrets/db-url, where the master reads it. Start it with ``buildbot start DIR``.

``init worker`` writes a worker of one kind that logs in to HOST:PORT as NAME with the password
from ``--password-file`` (a copy of the master's DIR/secrets/NAME). ``userspace`` and ``linux-qemu``
workers start with ``buildbot-worker start DIR``; a ``freebsd`` worker is a directory to copy to
the FreeBSD machine and run ``setup.sh`` from, as root.

Exit 0 written, 2 unusable input (nothing is written then).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from ..config.bsdkm_yml import Config, ConfigError, parse_config
from ..config.builders import coverage_lines
from ..config.master import (
    DB_URL_SECRET,
    DEFAULT_DB_URL,
    DEFAULT_WORKERS_LISTEN,
    DEFAULT_WORKERS_PORT,
    DEFAULT_WWW_LISTEN,
    DEFAULT_WWW_PORT,
)
from ..config.worker_kinds import DEFAULT_WORKERS, KINDS, WorkerKind
from ..config.workers import NAME_RE
from ..support import resources
from .exit_codes import EXIT_OK, UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a Buildbot master or worker directory, ready to start",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_subparsers(dest="init_what", required=True, metavar="{master,worker}",
                            parser_class=type(p))
    m = what.add_parser("master", help="master.cfg, bsdkm.yml and the workers' secrets in DIR")
    m.add_argument("dir", metavar="DIR", help="the master's directory (new, or empty)")
    m.add_argument("--worker", action="append", metavar="NAME:KIND",
                   help=f"a worker to expect, repeatable; KIND: {', '.join(KINDS)} "
                        f"(default: {' '.join(DEFAULT_WORKERS)})")
    m.add_argument("--db-url", default=None,
                   help="the master's database, kept in DIR/secrets/db-url for the master to use "
                        "(default: $BSDKM_DB_URL, else sqlite in DIR)")
    m.add_argument("--workers-listen", default=DEFAULT_WORKERS_LISTEN, metavar="ADDRESS",
                   help=f"where the workers port listens (default {DEFAULT_WORKERS_LISTEN}: workers on this "
                        "machine only; 0.0.0.0 for workers on others, over a network you trust)")
    m.set_defaults(func=run_master)
    w = what.add_parser("worker", help="a worker directory that connects to the master")
    w.add_argument("dir", metavar="DIR", help="the worker's directory (new, or empty)")
    w.add_argument("--master", required=True, metavar="HOST:PORT", help="where the master's workers port is")
    w.add_argument("--name", required=True, help="the worker's name, as in the master's bsdkm.yml")
    w.add_argument("--kind", choices=list(KINDS), default="userspace",
                   help="what it runs (default userspace)")
    w.add_argument("--password-file", required=True, metavar="FILE",
                   help="the worker's password: a copy of the master's DIR/secrets/NAME")
    w.set_defaults(func=run_worker)


# --------------------------------------------------------------------------- shared


def _fresh_dir(path: Path, what: str) -> None:
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(f"{path}: not empty; {what} is written into a new or empty directory only")


def _write_private(path: Path, text: str) -> None:
    """A file only its owner may read, created so from the start (no moment of a wider mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _tool(name: str) -> str:
    """A script of this environment (the venv's bin), else from PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if not found:
        raise UsageError(f"{name} not found: install the Buildbot extra "
                         "(pip install 'buildbot-bsdkm[buildbot]')")
    return found


# --------------------------------------------------------------------------- master


def _workers(specs: list[str]) -> list[tuple[str, WorkerKind]]:
    out: list[tuple[str, WorkerKind]] = []
    for spec in specs:
        name, _, kind = spec.partition(":")
        if not NAME_RE.match(name):
            raise UsageError(f"--worker {spec}: a worker name is letters, digits, '.', '_' and '-'")
        if kind not in KINDS:
            raise UsageError(f"--worker {spec}: KIND must be one of {', '.join(KINDS)}")
        if any(n == name for n, _ in out):
            raise UsageError(f"--worker {spec}: the name {name} is given twice")
        out.append((name, KINDS[kind]))
    return out


def _flow(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(items) + "]"


def master_sections(workers: list[tuple[str, WorkerKind]],
                    workers_listen: str = DEFAULT_WORKERS_LISTEN) -> str:
    """The master's own part of bsdkm.yml: where it listens, its workers, who may use its web UI,
    GitHub to fill in."""
    lines = [
        "",
        "# ---- written by `bsdkm-ci init master` -------------------------------------------------",
        "# Where this master listens. The web UI (and GitHub's webhook) stays on loopback: put a proxy",
        "# in front that publishes change_hook/github, or listen on 0.0.0.0. The workers port is",
        "# Buildbot's unencrypted worker protocol: loopback, unless workers on other machines reach it",
        "# over a network you trust (0.0.0.0, or this machine's address there).",
        "master:",
        f"  www_port: {DEFAULT_WWW_PORT}",
        f"  workers_port: {DEFAULT_WORKERS_PORT}",
        "  listen:",
        f"    www: {DEFAULT_WWW_LISTEN}",
        f"    workers: {workers_listen}",
        "",
        *www_section(),
        "# Each worker's password is the file secrets/<name> next to this file (mode 0600); give the",
        "# worker a copy: bsdkm-ci init worker DIR --master HOST:PORT --name NAME --password-file FILE",
        "# A trust level in a worker's tags (trusted, untrusted or vm-reset) says which builds it may take;",
        "# with none it takes every build, pull requests of untrusted authors too (docs: security model).",
        "workers:",
    ]
    for name, kind in workers:
        entry = f"  {name}: {{password: {{secret: {name}}}, tags: {_flow(kind.tags)}"
        if kind.targets is not None:
            entry += f", targets: {_flow(kind.targets)}"
        lines.append(entry + "}" + f"  # {kind.name}: {kind.what}")
    lines += [
        "",
        "# GitHub: the webhook (<www.url>change_hook/github, JSON; pull requests, issue comments),",
        "# a commit status per builder, one PR comment. A GitHub App, or a personal token:",
        "# github:",
        "#   repo: wolfSSL/wolfssl",
        "#   app_id: 123456",
        "#   app_key: {secret: github-app-key}   # the App's private key in secrets/github-app-key",
        "#   # token: {secret: github-token}     # or a personal token (token_env: VAR, token_file: FILE)",
        "#   webhook_secret: {secret: github-webhook}  # secrets/github-webhook (or webhook_secret_env)",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- master: web UI login

WWW_USER = "admin"
WWW_PASSWORDS = "www.htpasswd"  # beside bsdkm.yml, which names it relative to itself


def www_section() -> list[str]:
    """bsdkm.yml's ``www:``: Buildbot's own htpasswd login; reading stays open, acting needs it."""
    return [
        "# The web UI: anyone who reaches it may read; forcing, stopping and cancelling builds need a",
        f"# login from {WWW_PASSWORDS} (user:password lines, mode 0600; every user in it is an admin).",
        "www:",
        "  anonymous: read",
        f"  auth: {{type: htpasswd, file: {WWW_PASSWORDS}}}",
        "  # url: https://ci.example.org/      # links in statuses and comments point here",
        "",
    ]


def write_www_login(target: Path) -> Path:
    """The web UI's one user, with a generated password (Buildbot's htpasswd file holds it plain)."""
    path = target / WWW_PASSWORDS
    _write_private(path, f"{WWW_USER}:{secrets.token_urlsafe(18)}\n")
    return path


def www_login_lines(target: Path) -> list[str]:
    path = target / WWW_PASSWORDS
    return [f"bsdkm-ci: web UI http://{DEFAULT_WWW_LISTEN}:{DEFAULT_WWW_PORT}/: to force, stop or cancel "
            f"builds log in (top right) as {WWW_USER}, with the password after '{WWW_USER}:' in {path}"]


def remote_worker_lines(workers: list[tuple[str, WorkerKind]], workers_listen: str) -> list[str]:
    """A FreeBSD worker is a machine of its own: say that a loopback workers port keeps it out."""
    remote = [name for name, kind in workers if kind.name == "freebsd"]
    if not remote or not ipaddress.ip_address(workers_listen).is_loopback:
        return []
    return [f"bsdkm-ci: {', '.join(remote)} run on other machines, which cannot reach {workers_listen}:"
            f"{DEFAULT_WORKERS_PORT}: set master.listen.workers in bsdkm.yml (0.0.0.0, or this machine's "
            "address on a network you trust; the worker protocol is not encrypted)"]


# --------------------------------------------------------------------------- master: its database


def keep_db_url(secrets_dir: Path, db_url: str) -> None:
    """Where the master reads its database URL at start (it may hold a password: mode 0600)."""
    if db_url != DEFAULT_DB_URL:
        _write_private(secrets_dir / DB_URL_SECRET, db_url + "\n")


def _without_top_keys(text: str, keys: tuple[str, ...]) -> str:
    """The packaged bsdkm.yml less the top-level entries the master writes itself (each with its
    indented lines)."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines():
        if skipping and (line.startswith((" ", "\t"))):
            continue
        skipping = any(line.startswith(f"{k}:") for k in keys)
        if not skipping:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def run_master(args: argparse.Namespace) -> int:
    target = Path(args.dir).absolute()
    workers = _workers(args.worker or list(DEFAULT_WORKERS))
    workers_listen = _listen_address(args.workers_listen)
    _fresh_dir(target, "a master")
    buildbot = _tool("buildbot")
    packaged = resources.default_config_path().read_text(encoding="utf-8")
    config_text = (_without_top_keys(packaged, ("workers", "github", "master", "www"))
                   + master_sections(workers, workers_listen))
    try:
        config = parse_config(config_text, str(target / "bsdkm.yml"), target)
    except ConfigError as e:  # the packaged file and what is written here must stay one document
        raise UsageError(f"the bsdkm.yml to write is not usable: {e}") from None
    db_url = args.db_url or os.environ.get("BSDKM_DB_URL") or DEFAULT_DB_URL
    target.mkdir(parents=True, exist_ok=True)  # create-master makes the last directory only
    made = subprocess.run([buildbot, "create-master", "-q", "-r", "--db", db_url, str(target)],
                          capture_output=True, text=True, check=False)
    # Its exit status is 0 even when it failed (a traceback on stderr): what it writes tells.
    if made.returncode != 0 or not (target / "buildbot.tac").is_file():
        tail = (made.stdout + made.stderr).strip().splitlines()[-5:]
        raise UsageError("buildbot create-master failed: " + " / ".join(tail))
    (target / "master.cfg.sample").unlink(missing_ok=True)  # ours is master.cfg
    shutil.copyfile(resources.master_cfg_path(), target / "master.cfg")
    # bsdkm.yml names its policy relative to itself: the master's copy, to edit like bsdkm.yml.
    shutil.copytree(resources.default_policy_path().parent, target / "policies")
    (target / "bsdkm.yml").write_text(config_text, encoding="utf-8")
    secrets_dir = target / "secrets"
    secrets_dir.mkdir(mode=0o700, exist_ok=True)
    for name, _ in workers:
        _write_private(secrets_dir / name, secrets.token_urlsafe(24) + "\n")
    keep_db_url(secrets_dir, db_url)
    write_www_login(target)
    names = ", ".join(n for n, _ in workers)
    print(f"bsdkm-ci: master in {target}: master.cfg, bsdkm.yml, policies/, {WWW_PASSWORDS}, "
          f"secrets/ ({names})")
    print(f"bsdkm-ci: web UI on {DEFAULT_WWW_LISTEN}:{DEFAULT_WWW_PORT}, workers on "
          f"{workers_listen}:{DEFAULT_WORKERS_PORT} (bsdkm.yml master:)")
    for line in [*www_login_lines(target), *remote_worker_lines(workers, workers_listen)]:
        print(line)
    _say_builders(config, workers)
    print(f"bsdkm-ci: next: edit {target / 'bsdkm.yml'} (github:), then buildbot checkconfig {target} "
          f"&& buildbot start {target}")
    for name, kind in workers:
        print(f"bsdkm-ci: worker {name}: bsdkm-ci init worker DIR --kind {kind.name} --master HOST:"
              f"{DEFAULT_WORKERS_PORT} --name {name} --password-file {secrets_dir / name}")
    return EXIT_OK


def _say_builders(config: Config, workers: list[tuple[str, WorkerKind]]) -> None:
    """The builders these workers allow, the flags that add the rest, and where trust levels go."""
    for line in coverage_lines(config, [kind.spec(name) for name, kind in workers]):
        print(f"bsdkm-ci: {line}")
    print("bsdkm-ci: a worker whose tags name no trust level (trusted, untrusted or vm-reset) runs every "
          "build: bsdkm.yml workers:, docs: security model")


# --------------------------------------------------------------------------- worker


def _listen_address(text: str) -> str:
    try:
        ipaddress.ip_address(text.strip())
    except ValueError:
        raise UsageError(f"--workers-listen {text}: must be an IP address (127.0.0.1, 0.0.0.0 for every "
                         "interface, ::)") from None
    return text.strip()


def _master_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--master {text}: must be HOST:PORT (the master's workers_port)")
    return host, int(port)


def _password(path: str) -> str:
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise UsageError(f"--password-file {path}: cannot read it: {e.strerror}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--password-file {path}: not UTF-8 text; it must hold the password written by "
                         "`bsdkm-ci init master` (its secrets/NAME)") from None
    if not value or "\n" in value:
        raise UsageError(f"--password-file {path}: must hold the password alone, on one line")
    return value


def run_worker(args: argparse.Namespace) -> int:
    target = Path(args.dir).absolute()
    host, port = _master_address(args.master)
    if not NAME_RE.match(args.name):
        raise UsageError(f"--name {args.name}: a worker name is letters, digits, '.', '_' and '-'")
    kind = KINDS[args.kind]
    password = _password(args.password_file)
    _fresh_dir(target, "a worker")
    if kind.name != "freebsd":
        _tool("buildbot-worker")  # the worker runs here: it must be installed here
    target.mkdir(parents=True, exist_ok=True)
    _write_private(target / "password", password + "\n")
    setup = resources.data_path("workers", kind.setup, "setup.sh") if kind.setup else None
    if kind.name == "freebsd" and setup is not None:
        for name in ("setup.sh", "README.md"):
            shutil.copyfile(setup.with_name(name), target / name)
        (target / "setup.sh").chmod(0o755)
        # setup.sh makes the machine a worker (packages, kernel sources, user, sudo rule, sysctls)
        # and creates the worker itself; this directory carries it and the password there.
        print(f"bsdkm-ci: FreeBSD worker {args.name} in {target}: copy it to the FreeBSD machine, "
              "then as root:")
        # The third argument is the path of the file holding the password, never the password.
        print(f"  cd {target.name} && sh setup.sh {host}:{port} {args.name} ./password")
        print("  (./password is the file in this directory holding the worker's password; setup.sh reads it "
              "and never prints it)")
        return EXIT_OK
    # The tac reads worker.json and the password file: the password is never in a command line.
    shutil.copyfile(resources.local_worker_tac_path(), target / "buildbot.tac")
    doc = {"name": args.name, "master_host": host, "master_port": port, "kind": kind.name}
    (target / "worker.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"bsdkm-ci: worker {args.name} ({kind.name}) in {target}, for the master at {host}:{port}")
    if setup is not None:
        print(f"bsdkm-ci: first, as root: sh {setup}  (QEMU, the kernel and its headers, the loader)")
    print(f"bsdkm-ci: start it: buildbot-worker start {target}")
    return EXIT_OK

