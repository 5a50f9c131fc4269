"""wolfSSL's FreeBSD kernel module (bsdkm, ``libwolfssl.ko``) on a FreeBSD worker.

Target ``freebsd-kmod``. The shell side is ``kmod/freebsd/`` (``build.sh``,
``load.sh``, ``unload.sh``, ``collect.sh``, ``offload.sh``: plain sh, usable by hand on the
worker). A worker user runs the root ones through ``sudo -n`` from ``worker.LIBEXEC_DIR``, where
``workers/freebsd/setup.sh`` installs them; root runs the package's own. This module runs those
scripts and turns what they leave behind
(``load.status``/``unload.status`` key=value files, the sliced ``kernel.log``)
into a ``ModuleLoadOutcome``. Benchmark and self-test lines are left to the
parsers; nothing here reads them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .... import targets
from ....config.bsdkm_yml import Config
from ....contract import TARGET_UNAVAILABLE
from ....model import LogFormat, LogResult
from ....retry.classify_failure import Patterns, classify
from ....support.yaml_reader import At
from ....support.yaml_schema import STRING, option, string
from ...runtime.loading import ModuleLoadOutcome, read_status
from ...runtime.locks import exclusive
from ...runtime.proc import run_captured, run_logged
from ...runtime.stage_error import StageError, infra_error
from .._freebsd import FREEBSD_BASE_FLAGS, FreeBSDFlagError, check_flag, freebsd_kmod_dir
from ..base import KernelTarget, Prerequisite
from .offload import offload_logs, registered_crid
from .worker import INSTALLED_FILES, LIBEXEC_DIR, SETUP_FIX, SH, SUDO, prerequisites

SCRIPTS = INSTALLED_FILES

# load.sh / unload.sh exit statuses (kmod/freebsd/README.md).
EX_USAGE = 2
EX_TIMEOUT = 3
# Extra wall time for the script around kldload's own limit: snapshots, kill grace, kldstat.
SCRIPT_SLACK_S = 30
DEFAULT_UNLOAD_TIMEOUT_S = 120


def _absolute(at: At) -> str:
    path = at.string()
    if not Path(path).is_absolute():
        raise at.error(f"must be an absolute path (configure's --with-kernel-source), not {path!r}")
    return path


@dataclass(frozen=True)
class FreeBSDKmodOptions:
    """``targets.freebsd-kmod``'s own keys."""

    kmod_dir: str | None = option(STRING)  # the worker's kmod scripts (default: the packaged ones)
    kernel_source: str | None = option(string(_absolute, "^/"))  # default /usr/src/sys


def freebsd_configure_flags(
    variant_flags: Iterable[str], kernel_source: str | Path | None = None
) -> list[str]:
    """Full ``./configure`` arguments for one variant of the FreeBSD module.

    The base flags come first so a variant can override them (autoconf keeps
    the last occurrence), e.g. ``--disable-kernel-benchmarks``.
    """
    flags = list(variant_flags)
    for flag in flags:
        check_flag(flag)
    if kernel_source is not None:
        if any(f.startswith("--with-kernel-source") for f in flags):
            raise FreeBSDFlagError("kernel source given twice: as an argument and as --with-kernel-source")
        if not Path(kernel_source).is_absolute():
            raise FreeBSDFlagError(f"kernel source {str(kernel_source)!r} must be an absolute path")
        flags.append(f"--with-kernel-source={kernel_source}")
    return [*FREEBSD_BASE_FLAGS, *flags]


@dataclass
class ScriptRun:
    rc: int | None  # None: the script itself had to be killed
    stderr: str
    seconds: float


def _run_script(cmd: Sequence[str], timeout_s: float, env: dict[str, str] | None) -> ScriptRun:
    # Own process group (proc.py), so a script stuck behind an unkillable kldload can be stopped whole.
    res = run_captured(list(cmd), timeout_s=timeout_s, env=env)
    return ScriptRun(res.exit_code, res.stderr.decode("utf-8", "replace"), res.seconds)


def default_privilege() -> list[str]:
    """kldload/kldunload need root; a non-root worker uses passwordless sudo."""
    return [] if os.geteuid() == 0 else [SUDO, "-n"]


def default_kmod_dir(privilege: Sequence[str]) -> Path:
    """Root runs the package's scripts; sudo runs only the root-owned copies the sudoers rule names."""
    return LIBEXEC_DIR if privilege else freebsd_kmod_dir()


def _first_line(path: Path) -> str | None:
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return lines[0] if lines else None


SLICE_NOTES = {
    "snapshot": "markers did not reach the kernel message buffer (kern.log_console_output=0?); "
    "kernel.log was cut by aligning dmesg snapshots",
    "whole-buffer": "the kernel message buffer wrapped (or markers were lost): kernel.log is the whole "
    "remaining buffer and may hold lines from before this load, or miss early lines of it",
}


def _check_kmod_dir(kmod_dir: Path) -> None:
    missing = [s for s in SCRIPTS if not (kmod_dir / s).is_file()]
    if missing:
        names = ", ".join(missing)
        raise infra_error("load", "ci-exception", f"FreeBSD scripts missing in {kmod_dir}: {names}")


def _usage_failure(script: str, run: ScriptRun, work_dir: Path) -> Exception:
    reason = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else "no message"
    return infra_error("load", "ci-exception", f"{script} could not run: {reason}", [str(work_dir)])


def _not_run_failure(runner: _Runner, script: str, run: ScriptRun, work_dir: Path) -> Exception:
    """The script never started (it writes its status first): sudo refused it, or no shell ran it."""
    said = run.stderr.strip().splitlines()
    reason = said[-1] if said else f"exit {run.rc} and no message"
    how = " ".join([*runner.prefix, SH, str(runner.kmod_dir / script)])
    return infra_error("load", "worker-setup", f"{how} did not run {script}: {reason}; fix: {SETUP_FIX}",
                       [str(work_dir)])


@dataclass
class _Collected:
    notes: list[str]
    extra_logs: dict[str, Path]


def _collect(work_dir: Path, statuses: list[dict[str, str]]) -> _Collected:
    notes: list[str] = []
    for name in ("kldload.out", "kldunload.out"):
        line = _first_line(work_dir / name)
        if line:
            notes.append(line)
    for status in statuses:
        note = SLICE_NOTES.get(status.get("slice_method", ""))
        if note and note not in notes:
            notes.append(note)
    extra = {
        name: work_dir / file
        for name, file in (
            ("kldload", "kldload.out"),
            ("kldunload", "kldunload.out"),
            ("load-kernel", "load.kernel.log"),
            ("unload-kernel", "unload.kernel.log"),
            ("worker", "worker.txt"),
        )
        if (work_dir / file).is_file()
    }
    return _Collected(notes, extra)


def _check_inputs(ko: Path, kmod_dir: Path, timeout_s: int, unload_timeout_s: int) -> None:
    if timeout_s <= 0 or unload_timeout_s <= 0:
        limits = f"{timeout_s}, {unload_timeout_s}"
        raise infra_error("load", "ci-exception", f"time limits must be > 0 s (got {limits})")
    if not ko.is_file():
        msg = f"kernel module {ko} does not exist (did the build stage run?)"
        raise infra_error("load", "ci-exception", msg)
    _check_kmod_dir(kmod_dir)


@dataclass
class _Runner:
    """Runs one script of kmod/freebsd with the worker's privilege prefix."""

    kmod_dir: Path
    prefix: list[str]
    env: dict[str, str] | None

    def run(self, script: str, args: Sequence[str], limit_s: float) -> ScriptRun:
        return _run_script([*self.prefix, SH, str(self.kmod_dir / script), *args], limit_s, self.env)


def _load(runner: _Runner, ko: Path, work_dir: Path, timeout_s: int) -> tuple[ScriptRun, dict[str, str]]:
    (work_dir / "load.status").unlink(missing_ok=True)
    load = runner.run("load.sh", [str(ko), str(timeout_s), str(work_dir)], timeout_s + SCRIPT_SLACK_S)
    if load.rc == EX_USAGE:
        raise _usage_failure("load.sh", load, work_dir)
    if load.rc not in (0, None) and not (work_dir / "load.status").is_file():
        raise _not_run_failure(runner, "load.sh", load, work_dir)
    status = read_status(work_dir / "load.status")
    if status.get("result") == "already-loaded":
        msg = f"{ko.stem} was already loaded on the worker before this run"
        raise infra_error("load", "ci-exception", msg, [str(work_dir)])
    return load, status


def _unload(
    runner: _Runner, ko: Path, work_dir: Path, timeout_s: int, outcome: ModuleLoadOutcome
) -> dict[str, str]:
    unload = runner.run("unload.sh", [ko.stem, str(work_dir), str(timeout_s)], timeout_s + SCRIPT_SLACK_S)
    status = read_status(work_dir / "unload.status")
    outcome.stages["unload"] = round(unload.seconds, 3)
    outcome.unload_rc = _int_or_none(status.get("unload_rc"))
    if unload.rc is None or unload.rc == EX_TIMEOUT:
        outcome.timed_out, outcome.timed_out_stage = True, "unload"
    if status.get("result") in ("still-listed", "no-cleanup-line"):
        outcome.notes.append(f"unload: {status['result']}")
    return status


def _offload(runner: _Runner, work_dir: Path, timeout_s: int, outcome: ModuleLoadOutcome) -> None:
    """A crypto-register module attached a driver: measure it against software while it is loaded."""
    run = runner.run("offload.sh", [str(work_dir)], timeout_s + SCRIPT_SLACK_S)
    outcome.stages["offload"] = round(run.seconds, 3)
    if run.rc != 0:
        # The measurement's own files say what is missing (offload_logs makes them incomplete logs);
        # the note keeps the script's reason beside the run.
        why = "did not return in time" if run.rc in (None, EX_TIMEOUT) else f"exited {run.rc}"
        result = read_status(work_dir / "offload.status").get("result", "no status written")
        outcome.notes.append(f"offload.sh {why} (result: {result})")


def run_freebsd_module(
    ko: Path,
    work_dir: Path,
    *,
    timeout_s: int,
    kmod_dir: Path | None = None,
    unload_timeout_s: int = DEFAULT_UNLOAD_TIMEOUT_S,
    privilege: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
    offload: bool = True,
) -> ModuleLoadOutcome:
    """Load ``ko`` with kldload (under ``timeout_s``), unload it if it loaded, keep the kernel log.

    Load errors, hangs and unload failures are outcomes, not exceptions; only a
    worker that cannot run the scripts at all raises ``StageError``. ``offload``: measure a
    registered crypto driver against software (``offload.sh``) while the module is loaded.
    """
    ko, work_dir = Path(ko).resolve(), Path(work_dir).resolve()
    prefix = list(default_privilege() if privilege is None else privilege)
    kmod_dir = Path(kmod_dir) if kmod_dir is not None else default_kmod_dir(prefix)
    _check_inputs(ko, kmod_dir, timeout_s, unload_timeout_s)
    work_dir.mkdir(parents=True, exist_ok=True)
    runner = _Runner(kmod_dir, prefix, env)
    started = time.monotonic()

    load, load_status = _load(runner, ko, work_dir, timeout_s)
    outcome = ModuleLoadOutcome(
        kernel_log=work_dir / "kernel.log",
        load_rc=_int_or_none(load_status.get("load_rc")),
        unload_rc=None,
        loaded_seen=load_status.get("loaded_seen") == "1",
        stages={"load": round(load.seconds, 3)},
    )
    statuses = [load_status]
    if load.rc is None or load.rc == EX_TIMEOUT:
        outcome.timed_out, outcome.timed_out_stage, outcome.load_rc = True, "load", None
        if load.rc is None:
            limit = timeout_s + SCRIPT_SLACK_S
            outcome.notes.append(f"load.sh did not return within {limit} s and was killed")
    elif outcome.load_rc == 0:
        if offload and registered_crid(work_dir / "load.kernel.log") is not None:
            _offload(runner, work_dir, timeout_s, outcome)
        statuses.append(_unload(runner, ko, work_dir, unload_timeout_s, outcome))
    if load_status.get("result") == "not-listed":
        outcome.notes.append("kldload returned 0 but kldstat did not list the module")
    if outcome.load_rc != 0:
        # unload.sh, which calls collect.sh, did not run: gather what there is.
        runner.run("collect.sh", [str(work_dir)], SCRIPT_SLACK_S)

    collected = _collect(work_dir, statuses)
    outcome.notes[:0] = collected.notes
    outcome.extra_logs = collected.extra_logs
    if not outcome.kernel_log.is_file():
        outcome.kernel_log.write_text("", encoding="utf-8")
        outcome.notes.append("no kernel log could be read from the worker")
    outcome.duration_s = round(time.monotonic() - started, 3)
    return outcome


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _only_on_freebsd(stage: str) -> None:
    if os.uname().sysname != "FreeBSD":
        this = os.uname().sysname
        raise infra_error(stage, TARGET_UNAVAILABLE,
                          f"target not available: freebsd-kmod needs a FreeBSD worker (this is {this})")


class FreeBSDWorkerTarget(KernelTarget):
    """``freebsd-kmod``: built and kldloaded on a FreeBSD worker by the ``kmod/freebsd`` scripts."""

    facts = targets.FREEBSD_KMOD
    options_type = FreeBSDKmodOptions
    log_format = LogFormat.FREEBSD_KERNEL_LOG
    log_name = "kernel.log"

    def prerequisites(self, config: Config) -> list[Prerequisite]:
        """FreeBSD, its commands where FreeBSD keeps them, the privileged scripts and sudo rule, the
        kernel sources of the running kernel, cryptodev (for crypto-register) and the kernel log."""
        return prerequisites(config, self.name, self.options(config).kernel_source)

    def check_worker(self, config: Config) -> None:
        # Elsewhere than FreeBSD the run is "not run" with the reason, not a broken worker.
        _only_on_freebsd("configure")
        super().check_worker(config)

    def build(self, config: Config, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Patterns | None = None) -> Path:
        _only_on_freebsd("build")
        try:
            args = freebsd_configure_flags(
                config.variants[variant].flags, self.options(config).kernel_source
            )
        except ValueError as e:
            raise StageError(classify("configure", exit_code=2, output=f"configure: error: {e}")) from None
        # One tree per source: a PR build's base and head of one variant build at the same time.
        where = hashlib.sha256(str(Path(source).resolve()).encode()).hexdigest()[:12]
        work = cache / "build" / f"freebsd-{variant}-{where}"
        cflags = " ".join(config.cflags(self.name, variant))
        if cflags:
            args.append(f"CFLAGS={cflags}")
        # Another run of the same variant and source (two release builders on one worker) makes
        # this tree afresh: one build at a time, and the module is copied out to this run's own folder.
        with exclusive(work.with_name(work.name + ".lock")):
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(source, work, symlinks=True)
            for stage, cmd in (("configure", ["./configure", *args]), ("build", ["make", f"-j{jobs}"])):
                res = run_logged(cmd, cwd=work, log=log, timeout_s=config.timeout(stage))
                if res.exit_code != 0:
                    raise StageError(
                        classify(
                            stage,
                            exit_code=res.exit_code,
                            output=log.read_text(errors="replace"),
                            timed_out=res.timed_out,
                            timeout_s=config.timeout(stage),
                            patterns=patterns,
                            evidence=[str(log)],
                        )
                    )
            built = work / "bsdkm" / "libwolfssl.ko"
            if not built.is_file():
                raise StageError(classify("build", exit_code=0,
                                          output=f"make succeeded but produced no {built}"))
            ko = log.parent / "libwolfssl.ko"
            shutil.copyfile(built, ko)
        return ko

    def measured_logs(self, state: dict[str, Any], run_dir: Path, outcome: ModuleLoadOutcome,
                      kernel_log: Path) -> list[LogResult]:
        work = outcome.kernel_log.parent  # run_freebsd_module's work dir: offload.sh's files are there
        return offload_logs(work) if (work / "offload.status").is_file() else []

    def load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        return run_freebsd_module(ko, work, **self._options(config))

    def repeat_load(self, config: Config, ko: Path, work: Path) -> ModuleLoadOutcome:
        """kldload, kldunload once more: the benchmark again; the offload measurement stays the first's."""
        return run_freebsd_module(ko, work, offload=False, **self._options(config))

    def _options(self, config: Config) -> dict[str, Any]:
        opts: FreeBSDKmodOptions = self.options(config)
        kwargs: dict[str, Any] = {"timeout_s": int(config.timeout("load"))}
        if opts.kmod_dir:
            kwargs["kmod_dir"] = Path(opts.kmod_dir)
        return kwargs


TARGET = FreeBSDWorkerTarget()
