"""Bring a local master and its embedded worker(s) up on loopback, run builds, read results back.

``scripts/master.sh`` is a thin wrapper around ``python -m buildbot_bsdkm.buildbot.control``:

* ``up``: create the master (sqlite by default, or ``--db-url``) and the local worker, start both,
  force the default builds (the ``userspace`` target), print each verdict and the web UI address;
* ``down``: stop the worker(s) and the master;
* ``status``: what is running and where.

The REST client here is also what the integration tests use to read builds back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from ..config.bsdkm_yml import ConfigError, load_config
from ..contract import (
    REGRESSIONS_PROPERTY,
    RETRY_SUMMARY_PROPERTY,
    SELFTEST_PROPERTY,
    VERDICT_PROPERTY,
    builder_name,
)
from ..support import resources
from ..targets import USERSPACE
from .master_config import SETTINGS_FILE

STATE_HOME = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local/state")
DEFAULT_DIR = Path(os.environ.get("BSDKM_MASTER_DIR") or STATE_HOME / "bsdkm-ci/buildbot")
VENV_BIN = Path(sys.executable).parent
RESULT_NAMES = {0: "SUCCESS", 1: "WARNINGS", 2: "FAILURE", 3: "SKIPPED", 4: "EXCEPTION", 5: "RETRY",
                6: "CANCELLED"}


class ControlError(RuntimeError):
    """Something a person has to fix; the message says what."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Layout:
    """Where the master and the local workers live."""

    base: Path

    @property
    def master(self) -> Path:
        return self.base / "master"

    def worker(self, name: str) -> Path:
        return self.base / "workers" / name

    @property
    def settings_file(self) -> Path:
        return self.master / SETTINGS_FILE

    def settings(self) -> dict[str, Any]:
        try:
            return json.loads(self.settings_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ControlError(f"no master at {self.master} (run: scripts/master.sh up)") from None
        except (OSError, json.JSONDecodeError) as e:
            raise ControlError(f"{self.settings_file}: unreadable: {e}") from None

    def www_url(self) -> str:
        return f"http://127.0.0.1:{self.settings()['www_port']}/"

    def worker_names(self) -> list[str]:
        return list(self.settings().get("local_workers", {}))


# What the master's environment holds for the master alone: the GitHub token, the webhook secret,
# OAuth and database credentials. A worker runs PR code, so it never inherits them.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|(^|_)KEY$|_KEY_|API_KEY|AUTH|DB_URL",
                          re.IGNORECASE)


def named_secrets(config_path: str | None) -> set[str]:
    """The variables ``bsdkm.yml`` names for the master's secrets (``*_env`` keys of github/www)."""
    names = {"GITHUB_TOKEN", "BSDKM_WEBHOOK_SECRET"}
    try:
        config = load_config(config_path) if config_path else None
    except ConfigError:
        return names  # the master reports the config; the pattern still covers the usual names
    sections = [getattr(config, "github", None) or {}, (getattr(config, "www", None) or {}).get("auth") or {}]
    for section in sections:
        if isinstance(section, Mapping):
            names |= {str(v) for k, v in section.items() if str(k).endswith("_env") and v}
    return names


def worker_environment(env: Mapping[str, str] | None = None, also: Iterable[str] = ()) -> dict[str, str]:
    """The environment a local worker starts with: the master's, less every secret in it."""
    source = os.environ if env is None else env
    drop = set(also)
    return {k: v for k, v in source.items() if k not in drop and not _SECRET_NAME.search(k)}


def _worker_env(layout: Layout) -> dict[str, str]:
    try:
        config_path = layout.settings().get("config_path")
    except ControlError:
        config_path = None
    return worker_environment(also=named_secrets(config_path))


def _run(cmd: Sequence[str], what: str, timeout: float = 300.0, env: Mapping[str, str] | None = None) -> str:
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False,
                              env=None if env is None else dict(env))
    except FileNotFoundError:
        raise ControlError(f"{what}: {cmd[0]} not found (is the venv's bin on PATH?)") from None
    except subprocess.TimeoutExpired:
        raise ControlError(f"{what}: no answer after {timeout:g} s") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise ControlError(f"{what} failed (exit {done.returncode}):\n  " + "\n  ".join(tail))
    return done.stdout


def _write_secret(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value + "\n")


def create(
    layout: Layout,
    *,
    config_path: Path,
    db_url: str = "sqlite:///state.sqlite",
    workers: Iterable[str] = ("local",),
    www_port: int | None = None,
    pb_port: int | None = None,
    bsdkm_ci: str | None = None,
) -> dict[str, Any]:
    """A master directory (master.cfg linked from the repository) and one directory per local worker."""
    if not config_path.is_file():
        raise ControlError(f"{config_path}: configuration file not found")
    layout.master.mkdir(parents=True, exist_ok=True)
    cfg_link = layout.master / "master.cfg"
    if cfg_link.is_symlink() or cfg_link.exists():
        cfg_link.unlink()
    cfg_link.symlink_to(resources.master_cfg_path())
    names = list(workers)
    settings = {
        "www_port": www_port or free_port(),
        "pb_port": pb_port or free_port(),
        "db_url": db_url,
        "config_path": str(config_path.resolve()),
        "local_workers": {name: f"secrets/worker-{name}" for name in names},
        "bsdkm_ci": bsdkm_ci or str(VENV_BIN / "bsdkm-ci"),
    }
    for name in names:
        password = secrets.token_urlsafe(24)
        _write_secret(layout.master / "secrets" / f"worker-{name}", password)
        wdir = layout.worker(name)
        wdir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(resources.local_worker_tac_path(), wdir / "buildbot.tac")
        (wdir / "worker.json").write_text(json.dumps({"name": name, "master_port": settings["pb_port"]}))
        _write_secret(wdir / "password", password)
    layout.settings_file.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    if not (layout.master / "buildbot.tac").exists():
        _run([str(VENV_BIN / "buildbot"), "create-master", "-r", "-q", "--db", db_url, str(layout.master)],
             "buildbot create-master")
    # create-master leaves a sample config that would confuse a reader of the directory
    (layout.master / "master.cfg.sample").unlink(missing_ok=True)
    return settings


def running(directory: Path) -> bool:
    """A twistd pid file whose process is alive (a stale file after a crash does not count)."""
    try:
        pid = int((directory / "twistd.pid").read_text().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        (directory / "twistd.pid").unlink(missing_ok=True)
        return False
    except PermissionError:
        return True
    return True


def start_master(layout: Layout) -> None:
    if running(layout.master):
        return
    _run([str(VENV_BIN / "buildbot"), "upgrade-master", "-q", str(layout.master)], "buildbot upgrade-master")
    _run([str(VENV_BIN / "buildbot"), "start", str(layout.master)], "buildbot start", timeout=180)


def _force_stop(directory: Path, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL, the twistd of ``directory``: for when a clean stop did not happen."""
    try:
        pid = int((directory / "twistd.pid").read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and running(directory):
            time.sleep(0.5)
        if running(directory):
            os.kill(pid, signal.SIGKILL)
    (directory / "twistd.pid").unlink(missing_ok=True)


def stop_master(layout: Layout) -> None:
    if not running(layout.master):
        return
    try:
        _run([str(VENV_BIN / "buildbot"), "stop", str(layout.master)], "buildbot stop", timeout=120)
    except ControlError:
        _force_stop(layout.master)


def start_worker(layout: Layout, name: str) -> None:
    if running(layout.worker(name)):
        return
    _run([str(VENV_BIN / "buildbot-worker"), "start", str(layout.worker(name))], f"worker {name} start",
         env=_worker_env(layout))


def stop_worker(layout: Layout, name: str) -> None:
    if not running(layout.worker(name)):
        return
    try:
        _run([str(VENV_BIN / "buildbot-worker"), "stop", str(layout.worker(name))], f"worker {name} stop")
    except ControlError:
        _force_stop(layout.worker(name))


def worker_process(layout: Layout, name: str) -> subprocess.Popen[bytes]:
    """The worker in the foreground, in its own session: tests kill it, and everything it started."""
    log = open(layout.worker(name) / "console.log", "ab")  # noqa: SIM115 - lives as long as the process
    return subprocess.Popen(
        [str(VENV_BIN / "buildbot-worker"), "start", "--nodaemon", str(layout.worker(name))],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=_worker_env(layout),
    )


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc), children first discovered first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process and all it started, like a machine that loses power."""
    for p in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


class Rest:
    """Buildbot's REST API (``/api/v2``) on the local master."""

    def __init__(self, base_url: str, timeout: float = 30.0, session: requests.Session | None = None) -> None:
        self.base = base_url.rstrip("/") + "/api/v2"
        self.timeout = timeout
        self.http: Any = session or requests  # a session keeps the web UI's login cookie

    def get(self, path: str, **params: Any) -> list[dict[str, Any]]:
        r = self.http.get(f"{self.base}/{path.lstrip('/')}", params=params, timeout=self.timeout)
        if r.status_code != 200:
            raise ControlError(f"GET {path}: HTTP {r.status_code}: {r.text[:200]}")
        doc = r.json()
        key = next((k for k in doc if k != "meta"), None)
        return list(doc.get(key, [])) if key else []

    def one(self, path: str) -> dict[str, Any]:
        got = self.get(path)
        if not got:
            raise ControlError(f"GET {path}: nothing there")
        return got[0]

    def properties(self, buildid: int) -> dict[str, Any]:
        got = self.get(f"builds/{buildid}/properties")
        return {k: v[0] for k, v in (got[0] if got else {}).items()}

    def force(self, builder_names: Sequence[str], reason: str = "bsdkm-ci: forced") -> int:
        body = {"jsonrpc": "2.0", "method": "force", "id": 1,
                "params": {"builderNames": list(builder_names), "reason": reason}}
        r = self.http.post(f"{self.base}/forceschedulers/force", json=body, timeout=self.timeout)
        doc = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        if r.status_code != 200 or "error" in doc:
            problem = doc.get("error", r.text)
            raise ControlError(f"force {', '.join(builder_names)}: HTTP {r.status_code}: {problem}")
        return int(doc["result"][0])

    def wait(self, predicate: Any, what: str, timeout: float, interval: float = 1.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                got = predicate()
            except (requests.RequestException, ControlError):
                got = None
            if got:
                return got
            time.sleep(interval)
        raise ControlError(f"timed out after {timeout:g} s waiting for {what}")

    def connected(self, name: str) -> bool:
        got = self.get(f"workers/{name}")
        return bool(got and got[0].get("connected_to"))

    def wait_workers(self, names: Sequence[str], timeout: float = 60.0) -> None:
        self.wait(lambda: all(self.connected(n) for n in names), f"worker(s) {', '.join(names)} to connect",
                  timeout)

    def buildset_if_complete(self, bsid: int) -> dict[str, Any] | None:
        bs = self.one(f"buildsets/{bsid}")
        return bs if bs.get("complete") else None

    def wait_buildset(self, bsid: int, timeout: float) -> dict[str, Any]:
        return self.wait(lambda: self.buildset_if_complete(bsid), f"buildset {bsid}", timeout, interval=2.0)

    def builds_of_buildset(self, bsid: int) -> list[dict[str, Any]]:
        out = []
        for br in self.get("buildrequests", buildsetid=bsid):
            out.extend(self.get(f"buildrequests/{br['buildrequestid']}/builds"))
        return sorted(out, key=lambda b: b["buildid"])

    def builder_names(self) -> dict[int, str]:
        return {b["builderid"]: b["name"] for b in self.get("builders")}


def verdict_lines(rest: Rest, bsid: int) -> tuple[list[str], bool]:
    """One line per build request: result, what the gate/retry said, the attempts."""
    names = rest.builder_names()
    lines, ok = [], True
    for br in rest.get("buildrequests", buildsetid=bsid):
        builds = rest.get(f"buildrequests/{br['buildrequestid']}/builds")
        if not builds:
            lines.append(f"{names.get(br['builderid'], br['builderid'])}: no build ran")
            ok = False
            continue
        last = max(builds, key=lambda b: b["buildid"])
        props = rest.properties(last["buildid"])
        result = RESULT_NAMES.get(last.get("results"), str(last.get("results")))
        ok = ok and result in ("SUCCESS", "WARNINGS")
        extra = [props.get(SELFTEST_PROPERTY), props.get(RETRY_SUMMARY_PROPERTY)]
        regressions = props.get(REGRESSIONS_PROPERTY) or []
        if regressions:
            extra.append("regressions: " + ", ".join(regressions))
        detail = "; ".join(x for x in extra if x)
        attempts = f"{len(builds)} attempt{'s' if len(builds) != 1 else ''}"
        verdict = props.get(VERDICT_PROPERTY, "?")
        name = names.get(last["builderid"])
        lines.append(f"{name}: {result} (verdict {verdict}, {attempts}) {detail}".rstrip())
    return lines, ok


def default_builders(rest: Rest, config_path: str | None, target: str = USERSPACE.name) -> list[str]:
    """The enabled variants of ``target`` (what the main job runs), as the master names them."""
    known = set(rest.builder_names().values())
    try:
        pairs = load_config(config_path).pairs(targets=[target]) if config_path else []
    except ConfigError as e:
        raise ControlError(str(e)) from None
    return [n for n in (builder_name(t, v) for t, v in pairs) if n in known]


# --------------------------------------------------------------------------- command line


def cmd_up(args: argparse.Namespace) -> int:
    layout = Layout(Path(args.dir))
    if args.recreate or not layout.settings_file.exists():
        create(layout, config_path=Path(args.config), db_url=args.db_url, www_port=args.www_port)
    start_master(layout)
    for name in layout.worker_names():
        start_worker(layout, name)
    rest = Rest(layout.www_url())
    rest.wait_workers(layout.worker_names())
    print(f"bsdkm-ci: master and worker(s) up; web UI: {layout.www_url()}")
    if args.no_build:
        return 0
    builders = args.builder or default_builders(rest, layout.settings().get("config_path"))
    if not builders:
        raise ControlError("no userspace builder in the configuration: pass --builder NAME")
    print(f"bsdkm-ci: building {', '.join(builders)} (this builds wolfSSL; a few minutes)")
    bsid = rest.force(builders, "scripts/master.sh up: default build")
    rest.wait_buildset(bsid, timeout=args.timeout)
    lines, ok = verdict_lines(rest, bsid)
    print("\n".join(lines))
    print(f"bsdkm-ci: web UI (waterfall, console, grid): {layout.www_url()}")
    print("bsdkm-ci: stop with: scripts/master.sh down")
    return 0 if ok else 1


def cmd_down(args: argparse.Namespace) -> int:
    layout = Layout(Path(args.dir))
    if not layout.settings_file.exists():
        print(f"bsdkm-ci: no master at {layout.master}")
        return 0
    for name in layout.worker_names():
        stop_worker(layout, name)
    stop_master(layout)
    print("bsdkm-ci: master and worker(s) stopped")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    layout = Layout(Path(args.dir))
    state = "running" if running(layout.master) else "stopped"
    print(f"master {layout.master}: {state}; web UI {layout.www_url()}")
    for name in layout.worker_names():
        print(f"worker {name}: {'running' if running(layout.worker(name)) else 'stopped'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/master.sh", description="local Buildbot master for bsdkm-ci")
    p.add_argument("--dir", default=str(DEFAULT_DIR), help=f"master and worker directory ({DEFAULT_DIR})")
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start master + local worker, run the default build, print the verdict")
    up.add_argument("--config", default=str(resources.default_config_path()), help="bsdkm.yml to use")
    up.add_argument("--db-url", default=os.environ.get("BSDKM_DB_URL", "sqlite:///state.sqlite"))
    up.add_argument("--www-port", type=int, default=None, help="web UI port (default: a free one)")
    up.add_argument("--builder", action="append", help="builder to run (default: every userspace one)")
    up.add_argument("--no-build", action="store_true", help="only start master and worker")
    up.add_argument("--recreate", action="store_true", help="rewrite settings, ports and passwords")
    up.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the build")
    up.set_defaults(func=cmd_up)
    sub.add_parser("down", help="stop worker(s) and master").set_defaults(func=cmd_down)
    sub.add_parser("status", help="what is running").set_defaults(func=cmd_status)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ControlError as e:
        print(f"bsdkm-ci master: {e}", file=sys.stderr)
        return 2
    except requests.RequestException as e:
        print(f"bsdkm-ci master: cannot reach the master's web API: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
