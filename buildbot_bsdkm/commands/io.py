"""What the subcommands read and write, and the exit status of a verdict: results documents, text logs,
history files, policies and configs in, text files out. Every problem is a ``UsageError`` naming the file
(exit 2). Shared by the subcommands so none imports another's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ..config.bsdkm_yml import Config, ConfigError, default_config_path, load_config
from ..model import ModelError, RunResult, from_json
from ..parsers import ParseError, parse_file
from ..policy import Policy, PolicyError, Verdict, load_policy
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError


def read_results(path: str) -> list[RunResult]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot be read: {e}") from None
    try:
        return from_json(text, path)
    except ModelError as e:
        raise UsageError(str(e)) from None


def load_runs(paths: Sequence[str], variant: str, target: str) -> list[RunResult]:
    """Results documents as they are; every text log together as one run."""
    runs: list[RunResult] = []
    text_logs = []
    for path in paths:
        if path.endswith(".json"):
            runs.extend(read_results(path))
            continue
        try:
            text_logs.append(parse_file(path))
        except ParseError as e:
            raise UsageError(str(e)) from None
    if text_logs:
        runs.insert(0, RunResult(variant, target, logs=text_logs))
    return runs


def _non_finite(runs: list[RunResult], path: str) -> None:
    for run in runs:
        for b in run.benchmarks:
            for field in ("value", "per_second", "cycles"):
                v = getattr(b, field)
                if isinstance(v, float) and not math.isfinite(v):
                    raise UsageError(f"{path}: {run.target}/{run.variant} {b.name}: {field} is {v!r}, "
                                     "not a finite number")


def read_all(paths: list[str]) -> list[RunResult]:
    runs: list[RunResult] = []
    for path in paths:
        got = read_results(path)
        _non_finite(got, path)
        runs += got
    return runs


def history_files(specs: list[str]) -> list[str]:
    """Files named, and every ``*.json`` under directories named, oldest first by name."""
    out: list[str] = []
    for spec in specs:
        p = Path(spec)
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*.json"))
            if not found:
                raise UsageError(f"{spec}: history directory has no .json results documents")
            out += found
        else:
            out.append(spec)
    return out


def read_policy(path: str | None) -> Policy:
    try:
        return load_policy(path)
    except PolicyError as e:
        raise UsageError(f"bad policy: {e}") from None


def config_path(given: str | None) -> Path:
    if given:
        return Path(given)
    local = Path("bsdkm.yml")
    return local if local.is_file() else default_config_path()


def read_config(path: Path) -> Config:
    try:
        return load_config(path)
    except ConfigError as e:
        raise UsageError(f"bad config: {e}") from None


def write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None


def exit_status(verdict: Verdict) -> int:
    """0 unless a check failed, or the policy fails unjudged items (``Verdict.accepted``)."""
    return EXIT_OK if verdict.accepted else EXIT_FAILED
