"""What loading a kernel module on a worker produced, whatever the OS.

The FreeBSD (kldload) and Linux (QEMU) loaders both return a ``ModuleLoadOutcome``;
the pipeline turns it into a ``RunResult`` by parsing ``kernel_log`` with the
core parsers and classifying any failure. Loaders never parse benchmark or
self-test lines themselves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ModuleLoadOutcome:
    kernel_log: Path  # kernel messages from just before the load to after the unload
    load_rc: int | None  # exit status of the load (kldload / finit_module), None if never reached
    unload_rc: int | None  # exit status of the unload, None if never reached
    timed_out: bool = False  # the load (or whole VM) exceeded its time limit
    timed_out_stage: str | None = None  # "load", "unload", "boot"
    duration_s: float = 0.0
    loaded_seen: bool = False  # module was listed as loaded (kldstat -m / /proc/modules)
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    notes: list[str] = field(default_factory=list)  # human facts: "kldload: an error occurred ..."
    extra_logs: dict[str, Path] = field(default_factory=dict)  # name -> path (console, loader output)
    # Appended last so positional construction stays valid.
    load_errno: int | None = None  # errno the kernel gave a failed load (125 = ECANCELED: init failed)
    unload_errno: int | None = None  # errno of a failed unload (16 = EBUSY)
    # One outcome per kernel when a run boots several (freebsd-kmod-qemu: debug, release).
    parts: dict[str, ModuleLoadOutcome] = field(default_factory=dict)
    not_covered: list[str] = field(default_factory=list)  # kernels the run could not use, and why
    # The guest printed more than the console cap: stopped there; bytes written by then.
    console_flood_bytes: int | None = None
    # Kernels the run was configured for but could not get (their sets unreachable), and why:
    # each is reported not run, never dropped.
    not_run: dict[str, str] = field(default_factory=dict)
    # What each kernel booted is, to reproduce the run (a FreeBSD set's name, REVISION, BUILDDATE, ...).
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_status(path: Path) -> dict[str, str]:
    """A ``key=value`` status file written by the scripts; the last value of a key wins."""
    status: dict[str, str] = {}
    if not path.is_file():
        return status
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            status[key.strip()] = value.strip()
    return status


def outcome_record(outcome: ModuleLoadOutcome) -> dict[str, Any]:
    """The outcome as plain JSON data (``state.json``'s ``outcome``); paths become strings."""
    d = asdict(outcome)
    d["kernel_log"] = str(outcome.kernel_log)
    d["extra_logs"] = {k: str(v) for k, v in outcome.extra_logs.items()}
    d["parts"] = {k: outcome_record(v) for k, v in outcome.parts.items()}
    return d


def outcome_from_record(d: dict[str, Any]) -> ModuleLoadOutcome:
    d = dict(d)
    d["kernel_log"] = Path(d["kernel_log"])
    d["extra_logs"] = {k: Path(v) for k, v in d.get("extra_logs", {}).items()}
    d["parts"] = {k: outcome_from_record(v) for k, v in d.get("parts", {}).items()}
    known = set(ModuleLoadOutcome.__dataclass_fields__)
    return ModuleLoadOutcome(**{k: v for k, v in d.items() if k in known})
