"""The machine fingerprint: which measurements may be compared with which.

Numbers from different CPUs, kernels, compilers or configure flags are different experiments.
A run's ``metadata["fingerprint"]`` holds the fields below and ``id``, a short hash of them;
history and baselines are only used for runs with the same id.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FIELDS = ("cpu_model", "cpu_flags", "kernel", "os", "compiler", "configure_args", "target", "variant")


def _cpuinfo(path: Path = Path("/proc/cpuinfo")) -> tuple[str | None, str | None]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return platform.processor() or None, None
    model = flags = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and flags is None:
            flags = " ".join(sorted(value.split()))
    return model, flags


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


@functools.lru_cache(maxsize=8)
def compiler_version(cc: str = "cc") -> str | None:
    exe = shutil.which(cc)
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.splitlines()[:1]
    return first[0].strip() if first else None


def fingerprint_id(fp: Mapping[str, Any]) -> str:
    canonical = json.dumps({k: fp.get(k) for k in FIELDS}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def machine_fingerprint(target: str, variant: str, configure_args: Sequence[str] | None,
                        cc: str = "cc") -> dict[str, Any]:
    """This worker's fingerprint for one (target, variant); CPU flags are kept as their hash."""
    model, flags = _cpuinfo()
    fp: dict[str, Any] = {
        "cpu_model": model,
        "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16] if flags else None,
        "kernel": platform.release(),
        "os": _os_release(),
        "compiler": compiler_version(cc),
        "configure_args": list(configure_args or []),
        "target": target,
        "variant": variant,
    }
    fp["id"] = fingerprint_id(fp)
    return fp


def of_run(metadata: Mapping[str, Any]) -> str | None:
    """The fingerprint id recorded in a run's metadata, or None for a run without one."""
    fp = metadata.get("fingerprint")
    if isinstance(fp, Mapping) and isinstance(fp.get("id"), str):
        return fp["id"]
    return None


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Names of the fingerprint fields where two fingerprints differ."""
    return [k for k in FIELDS if a.get(k) != b.get(k)]
