"""What every ``action`` subcommand shares: the run directory's file names, reading and writing
files with errors that name them, the runner's output files, and the Action's empty inputs.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from ..exit_codes import UsageError
from . import workflow as actions

SUMMARY_JSON = "summary.json"
RUN_EXIT_CODE = "run.exit-code"  # written by action/run-bsdkm-ci.sh


def optional_path(text: str) -> Path | None:
    """An action input left empty arrives as ``--flag ""``: that means "not given"."""
    return Path(text) if text.strip() else None


def optional_int(text: str) -> int | None:
    if not text.strip():
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what} file {path} is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"cannot read {what} file {path}: {e.strerror}") from None


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror}") from None


def write_runner_files(env: Mapping[str, str], outputs: Mapping[str, str], markdown: str) -> None:
    """Outputs and job summary into the runner's files; printed instead when run by hand."""
    try:
        out_file = actions.env_path(env, "GITHUB_OUTPUT")
        if out_file is not None:
            actions.write_outputs(out_file, outputs)
        else:
            for k, v in outputs.items():
                print(f"{k}={v}")
        summary_file = actions.env_path(env, "GITHUB_STEP_SUMMARY")
        if summary_file is not None and markdown:
            actions.append_step_summary(summary_file, markdown)
    except actions.ActionsError as e:
        raise UsageError(str(e)) from None
