"""The counting plugin on this worker: built with the system compiler, checked against this QEMU.

``plugin_for(cache)`` compiles ``kmod/qemu/bsdkm_count.c`` once per plugin source, compiler and
QEMU (cached under ``<cache>/qemu-plugin/<key>/``) and asks this ``qemu-system-x86_64`` to load
it. Either step failing gives a ``PluginUnavailable`` whose message says why in one sentence: the
run then has no module counts (a note, never a pass) and falls back to the proxy when that is on.
``module_layout(ko)`` reads the module's executable sections, their sizes and function symbols with
``readelf``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...perf.kernel_counts import KernelCountError, TextLayout, text_layout
from ...support.resources import data_path
from .locks import exclusive

QEMU = "qemu-system-x86_64"
PLUGIN_NAME = "bsdkm_count.so"
# The files of a counted boot, in its directory, for every target that counts in a guest.
COUNT_FILE = "counts.txt"  # the plugin's output
COUNT_PLAN = "counts.plan.json"  # the fixed work asked for; its presence means counting was asked
COUNT_UNAVAILABLE = "counts.unavailable"  # why the plugin could not count (one sentence)
COUNT_SYMBOLS = "text.syms"
PROXY_STATE_KEY = "instructions_proxy"  # the build's proxy counts, kept while the module's stand in


class PluginUnavailable(RuntimeError):
    """The plugin cannot count here (no compiler, no QEMU, a QEMU that refuses it)."""


@dataclass(frozen=True)
class Plugin:
    path: Path
    qemu: str  # "QEMU emulator version 7.2.22 (...)"


def plugin_source() -> Path:
    return data_path("kmod", "qemu", "bsdkm_count.c")


def _first_line(cmd: list[str]) -> str | None:
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (res.stdout or res.stderr).strip().splitlines()
    return lines[0] if res.returncode == 0 and lines else None


def probe(plugin: Path, qemu: str = QEMU, timeout_s: float = 60.0) -> str | None:
    """Why this QEMU does not load ``plugin`` (its own words), or None when it does."""
    out = plugin.with_suffix(".probe")
    args = f"{plugin},out={out},nonce={'0' * 32},size=1"
    try:
        res = subprocess.run([qemu, "-M", "none", "-S", "-display", "none", "-monitor", "stdio",
                              "-plugin", args], input="quit\n", capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{qemu} could not be run to try the plugin: {e}"
    finally:
        out.unlink(missing_ok=True)
    if res.returncode != 0:
        said = " ".join((res.stderr or res.stdout).split())[:300]
        return f"{qemu} refused the plugin (exit {res.returncode}: {said or 'no message'})"
    return None


def plugin_for(cache: Path, *, cc: str = "gcc", qemu: str = QEMU) -> Plugin:
    """The built and load-checked plugin; PluginUnavailable with the reason otherwise."""
    if shutil.which(qemu) is None:
        raise PluginUnavailable(f"{qemu} is not installed")
    version = _first_line([qemu, "--version"])
    if version is None:
        raise PluginUnavailable(f"{qemu} --version failed")
    if shutil.which(cc) is None:
        raise PluginUnavailable(f"no C compiler ({cc}) to build the counting plugin")
    src = plugin_source()
    ident = {"source": hashlib.sha256(src.read_bytes()).hexdigest(), "cc": _first_line([cc, "--version"]),
             "qemu": version}
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    home = cache / "qemu-plugin" / key
    so, record = home / PLUGIN_NAME, home / "plugin.json"
    # Runs that start together would compile into one temporary file and move it twice.
    with exclusive(cache / "locks" / f"qemu-plugin-{key}.lock"):
        if not (so.is_file() and record.is_file()):
            _build_plugin(src, home, so, record, ident, cc, qemu)
    return Plugin(so, version)


def _build_plugin(src: Path, home: Path, so: Path, record: Path, ident: dict[str, str | None], cc: str,
                  qemu: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f"{PLUGIN_NAME}.tmp"
    try:
        res = subprocess.run([cc, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(tmp), str(src)],
                             capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PluginUnavailable(f"the counting plugin did not compile: {e}") from None
    if res.returncode != 0:
        first = next((ln for ln in res.stderr.splitlines() if "error" in ln), res.stderr.strip()[:200])
        raise PluginUnavailable(f"the counting plugin did not compile: {first}")
    why = probe(tmp, qemu)
    if why is not None:
        tmp.unlink(missing_ok=True)
        raise PluginUnavailable(why)
    tmp.replace(so)
    record.write_text(json.dumps(ident))


def readelf_tables(ko: Path) -> tuple[str, str]:
    """``readelf -SW`` and ``-sW`` of ``ko``: its sections and its symbols (PluginUnavailable when
    readelf cannot read it)."""
    outs = []
    for flag in ("-SW", "-sW"):
        try:
            res = subprocess.run(["readelf", flag, str(ko)], capture_output=True, text=True, timeout=120,
                                 check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PluginUnavailable(f"readelf could not read {ko.name}: {e}") from None
        if res.returncode != 0:
            raise PluginUnavailable(f"readelf could not read {ko.name}: {res.stderr.strip()[:200]}")
        outs.append(res.stdout)
    return outs[0], outs[1]


def module_layout(ko: Path) -> TextLayout:
    """The module's ``.text`` and every other executable section, with their symbols
    (PluginUnavailable when readelf cannot say, or a section could not be counted)."""
    try:
        return text_layout(*readelf_tables(ko))
    except KernelCountError as e:
        raise PluginUnavailable(f"{ko.name}: {e}") from None
