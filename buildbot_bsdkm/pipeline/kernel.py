"""Kernel targets (``linux-kmod-qemu``, ``freebsd-kmod``): build the module, load it, judge the outcome.

The loaders live in ``linuxkm.py`` / ``freebsd.py`` (imported lazily: a worker
without one reports "target not available"); this module only wires them to the
config and turns a ``ModuleLoadOutcome`` into parsed logs and a classified failure.
"""

from __future__ import annotations

import importlib
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

from ..classify import Patterns, classify
from ..config import Config
from ..model import LogFormat, LogResult, Problem, StageFailure
from ..parsers import ParseError, parse_file
from .build import run_logged
from .errors import StageError, infra_error
from .loading import ModuleLoadOutcome

LOADER_MODULES = {"linux-kmod-qemu": "linuxkm", "freebsd-kmod": "freebsd"}
LOG_FORMATS = {"linux-kmod-qemu": LogFormat.LINUX_KERNEL_LOG, "freebsd-kmod": LogFormat.FREEBSD_KERNEL_LOG}
LOG_NAMES = {"linux-kmod-qemu": "console.log", "freebsd-kmod": "kernel.log"}


def loader(target: str) -> ModuleType:
    name = LOADER_MODULES[target]
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError as e:
        raise infra_error(
            "build",
            "target-unavailable",
            f"target not available: {target} (pipeline/{name}.py cannot be imported: {e})",
        ) from None


def _call(mod: ModuleType, func: str, target: str, *args: Any, **kwargs: Any) -> Any:
    fn = getattr(mod, func, None)
    if fn is None:
        raise infra_error("build", "target-unavailable", f"target not available: {target} has no {func}()")
    return fn(*args, **kwargs)


def build_module(
    config: Config, target: str, variant: str, source: Path, cache: Path, jobs: int, log: Path
) -> Path:
    """The module's ``.ko`` for this variant; its build output is appended to ``log``."""
    opts = config.targets[target].options
    cflags = " ".join(config.cflags(target, variant))
    own = [f for f in config.configure_flags(target, variant) if "linuxkm" not in f and "freebsdkm" not in f]
    mod = loader(target)
    if target == "linux-kmod-qemu":
        spec = mod.LinuxModuleSpec(
            variant_flags=tuple(own), cflags=cflags, kernel_version=opts.get("kernel_version")
        )
        built = _call(
            mod,
            "cached_linux_module",
            target,
            source,
            spec,
            cache,
            jobs=jobs,
            timeout_s=config.timeout("build"),
        )
        _append(
            log,
            built.build_log,
            note=f"# module {'reused from cache' if built.cached else 'built'}: {built.ko}",
        )
        return Path(built.ko)
    return _build_freebsd(config, mod, variant, source, cache, jobs, log, cflags)


def _build_freebsd(
    config: Config,
    mod: ModuleType,
    variant: str,
    source: Path,
    cache: Path,
    jobs: int,
    log: Path,
    cflags: str,
) -> Path:
    if os.uname().sysname != "FreeBSD":
        raise infra_error(
            "build",
            "target-unavailable",
            f"target not available: freebsd-kmod needs a FreeBSD worker (this is {os.uname().sysname})",
        )
    try:
        args = mod.freebsd_configure_flags(
            config.variants[variant].flags, config.targets["freebsd-kmod"].options.get("kernel_source")
        )
    except ValueError as e:
        raise StageError(classify("configure", exit_code=2, output=f"configure: error: {e}")) from None
    work = cache / "build" / f"freebsd-{variant}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work, symlinks=True)
    if cflags:
        args.append(f"CFLAGS={cflags}")
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
                    evidence=[str(log)],
                )
            )
    ko = work / "bsdkm" / "libwolfssl.ko"
    if not ko.is_file():
        raise StageError(classify("build", exit_code=0, output=f"make succeeded but produced no {ko}"))
    return ko


def _append(log: Path, other: Path, note: str) -> None:
    with open(log, "a", encoding="utf-8") as out:
        out.write(note + "\n")
        if Path(other).is_file():
            out.write(Path(other).read_text(errors="replace"))


def load_module(config: Config, target: str, ko: Path, work: Path) -> ModuleLoadOutcome:
    mod = loader(target)
    timeout = int(config.timeout("load"))
    opts = config.targets[target].options
    if target == "linux-kmod-qemu":
        extra: dict[str, Any] = {}
        if opts.get("cpu"):
            # QEMU's -cpu: "max" exercises every instruction the asm uses (ADX included),
            # "max,-adx,-bmi2" avoids the intermittent ECC self-test failure seen under TCG.
            extra["options"] = mod.VmOptions(cpu=str(opts["cpu"]))
        return _call(
            mod,
            "run_linux_module",
            target,
            ko,
            work,
            timeout_s=timeout,
            kernel_version=opts.get("kernel_version"),
            **extra,
        )
    kwargs: dict[str, Any] = {"timeout_s": timeout}
    if opts.get("kmod_dir"):
        kwargs["kmod_dir"] = Path(opts["kmod_dir"])
    return _call(mod, "run_freebsd_module", target, ko, work, **kwargs)


def outcome_record(outcome: ModuleLoadOutcome) -> dict[str, Any]:
    d = asdict(outcome)
    d["kernel_log"] = str(outcome.kernel_log)
    d["extra_logs"] = {k: str(v) for k, v in outcome.extra_logs.items()}
    return d


def outcome_from_record(d: dict[str, Any]) -> ModuleLoadOutcome:
    d = dict(d)
    d["kernel_log"] = Path(d["kernel_log"])
    d["extra_logs"] = {k: Path(v) for k, v in d.get("extra_logs", {}).items()}
    known = set(ModuleLoadOutcome.__dataclass_fields__)
    return ModuleLoadOutcome(**{k: v for k, v in d.items() if k in known})


def parse_kernel_log(target: str, path: Path) -> LogResult:
    try:
        return parse_file(path, LOG_FORMATS[target])
    except ParseError as e:
        return LogResult(
            source=str(path), format=LOG_FORMATS[target], problems=[Problem(str(e))], incomplete_reason=str(e)
        )


def judge_outcome(
    outcome: ModuleLoadOutcome, log: LogResult, timeout_s: float, patterns: Patterns | None = None
) -> StageFailure | None:
    """The load's failure, classified (self-test names and codes come from the parsed log)."""
    text = outcome.kernel_log.read_text(errors="replace") if outcome.kernel_log.is_file() else ""
    text += "\n" + "\n".join(outcome.notes)
    ev = [str(outcome.kernel_log)]

    def judged(stage: str, exit_code: int | None, program: str = "the module", **extra: Any) -> StageFailure:
        return classify(stage, exit_code=exit_code, output=text, log_results=[log], patterns=patterns,
                        evidence=ev, program=program, **extra)

    if outcome.timed_out:
        stage = outcome.timed_out_stage if outcome.timed_out_stage in ("load", "unload") else "load"
        return judged(stage, outcome.load_rc, timed_out=True, timeout_s=timeout_s)
    if outcome.load_rc != 0:
        failure = judged("load", outcome.load_rc)
        if failure.reason in ("load-error", "incomplete-log") and outcome.notes:
            failure.message = f"module load failed: {outcome.notes[0]}"
            failure.reason = "load-error"
        return failure
    if outcome.unload_rc not in (0, None):
        return judged("unload", outcome.unload_rc, program="module unload")
    if not log.complete or log.failed_tests or log.selftest_summary is False:
        return judged("load", outcome.load_rc)
    return None
