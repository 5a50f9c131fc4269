"""A worker's check-up: every prerequisite of the targets it runs, and the two no target owns.

Each target lists its own (``Target.prerequisites``); this adds the Python packages bsdkm-ci needs
and whether the master's workers port answers. ``bsdkm-ci doctor`` prints the result, one line
each; nothing here keeps a second list of what a target needs.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from ...config.bsdkm_yml import Config
from ..targets import all_targets
from ..targets.base import Prerequisite

DISTRIBUTION = "buildbot-bsdkm"
WORKER_DISTRIBUTION = "buildbot-worker"
MASTER_TIMEOUT_S = 5.0


class DoctorInputError(ValueError):
    """Unusable input to the check-up (an unknown target, a worker directory without a master)."""


@dataclass(frozen=True)
class Finding:
    """One prerequisite, and whose it is (a target's name, or ``worker``)."""

    owner: str
    need: Prerequisite

    @property
    def missing(self) -> bool:
        return self.need.required and not self.need.ok


def _requirement_name(spec: str) -> str | None:
    """The distribution a requirement names, or None for an extra's (``x; extra == "test"``)."""
    if "extra ==" in spec:
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec)
    return match.group(0) if match else None


def _installed(dist: str, required: bool, fix: str) -> Prerequisite:
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return Prerequisite(f"python package {dist}", False, "not installed", fix, required)
    return Prerequisite(f"python package {dist}", True, version, fix, required)


def python_packages(worker: bool) -> list[Prerequisite]:
    """bsdkm-ci's own dependencies in this interpreter, and buildbot-worker (required on a worker)."""
    fix = f"pip install the {DISTRIBUTION} package into this environment (workers/freebsd/setup.sh does)"
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return [Prerequisite(f"python package {DISTRIBUTION}", False, "not installed (a bare checkout?)",
                             fix)]
    names = sorted({n for n in map(_requirement_name, requires) if n})
    found = [_installed(name, True, fix) for name in names]
    found.append(_installed(WORKER_DISTRIBUTION, worker, "pip install 'buildbot-worker>=4,<5' (on FreeBSD: "
                            "pkg install py311-buildbot-worker)"))
    return found


def parse_master(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DoctorInputError(f"--master must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def master_of_worker(worker_dir: Path) -> tuple[str, int]:
    """Where a worker directory connects: its ``buildbot.tac`` (as ``buildbot-worker create-worker``
    writes it), or the ``worker.json`` beside the tac ``bsdkm-ci init worker`` writes."""
    meta = worker_dir / "worker.json"
    if meta.is_file():
        try:
            doc = json.loads(meta.read_text(encoding="utf-8"))
            return str(doc["master_host"]), int(doc["master_port"])
        except (ValueError, KeyError, TypeError) as e:
            raise DoctorInputError(f"{meta}: no master_host/master_port ({e})") from None
    tac = worker_dir / "buildbot.tac"
    try:
        tree = ast.parse(tac.read_text(encoding="utf-8"), str(tac))
    except (OSError, SyntaxError) as e:
        raise DoctorInputError(f"{tac}: cannot read the worker's master from it ({e})") from None
    values: dict[str, object] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant)):
            values[node.targets[0].id] = node.value.value
    host, port = values.get("buildmaster_host"), values.get("port")
    if not isinstance(host, str) or not isinstance(port, int):
        raise DoctorInputError(f"{tac}: no buildmaster_host and port assignments")
    return host, port


def master_reachable(host: str, port: int, timeout_s: float = MASTER_TIMEOUT_S) -> Prerequisite:
    name = f"master {host}:{port}"
    fix = "start the master, or open its workers port to this machine (firewall, listen address)"
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return Prerequisite(name, True, "its workers port accepts a connection", fix)
    except OSError as e:
        return Prerequisite(name, False, f"no connection: {e.strerror or e}", fix)


def check_up(config: Config, names: list[str], master: tuple[str, int] | None, worker: bool) -> list[Finding]:
    """Every prerequisite of ``names`` (each checked now), then the Python packages and the master."""
    known = all_targets()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise DoctorInputError(f"unknown target {', '.join(unknown)} (known: {', '.join(known)})")
    found = [Finding(name, need) for name in names for need in known[name].prerequisites(config)]
    found += [Finding("worker", need) for need in python_packages(worker)]
    if master is not None:
        found.append(Finding("worker", master_reachable(*master)))
    return found


def configured_targets(config: Config) -> list[str]:
    """The targets a config names that this installation knows, in the config's order."""
    return [name for name in config.targets if name in all_targets()]
