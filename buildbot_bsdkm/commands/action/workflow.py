"""GitHub Actions plumbing: workflow commands, step outputs and the job summary.

Pure helpers with no knowledge of wolfSSL: they turn values into the exact
text GitHub's runner reads (``::error ...::`` lines on stdout, ``name<<DELIM``
blocks in ``$GITHUB_OUTPUT``, Markdown appended to ``$GITHUB_STEP_SUMMARY``).
The rules follow the runner's own toolkit so a message with ``%``, newlines,
``:`` or ``,`` arrives intact instead of being cut or re-interpreted.
"""

from __future__ import annotations

import re
import secrets
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

# GitHub renders at most 10 errors and 10 warnings per step (50 per job) and
# silently drops the rest, so we cap ourselves and say how many were left out.
MAX_ANNOTATIONS_PER_LEVEL = 10

# The job summary of one step is rejected above 1 MiB; keep a margin for the
# truncation note we append.
MAX_STEP_SUMMARY_BYTES = 1024 * 1024 - 1024

OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


class ActionsError(ValueError):
    """A value that cannot be handed to the runner as asked (bad output name, missing file)."""


class Level(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    NOTICE = "notice"


def escape_data(value: str) -> str:
    """Escape the message part of a workflow command (after the second ``::``)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a ``key=value`` property; ``:`` and ``,`` would end the property list."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def log_line(text: str) -> str:
    """``text`` as one line of log the runner takes for no workflow command.

    The runner acts on ``::name::data`` at the start of a line and on the legacy ``##[name]data``
    anywhere in one, so text from an artifact (the PR author's) is folded onto one line, with
    every control and line-separator character a space, and both forms are broken up.
    """
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    flat = flat.replace("##[", "# #[")
    return ": :" + flat[2:] if flat.startswith("::") else flat


def say(text: str, *, err: bool = False) -> None:
    """Print one log line made safe by ``log_line`` (stdout, or stderr with ``err``)."""
    print(log_line(text), file=sys.stderr if err else sys.stdout)


@dataclass(frozen=True)
class Annotation:
    """One ``::error``/``::warning``/``::notice`` line shown on the run and the PR."""

    level: Level
    message: str
    title: str | None = None
    file: str | None = None
    line: int | None = None

    def command(self) -> str:
        props: list[str] = []
        if self.title:
            props.append(f"title={escape_property(self.title)}")
        if self.file:
            props.append(f"file={escape_property(self.file)}")
            if self.line is not None:
                props.append(f"line={self.line}")
        head = f"::{self.level.value}"
        if props:
            head += " " + ",".join(props)
        return f"{head}::{escape_data(self.message)}"


@dataclass
class CappedAnnotations:
    """Annotations ready to print, at most ``limit`` per level plus a note about the rest."""

    shown: list[Annotation] = field(default_factory=list)
    dropped: dict[Level, int] = field(default_factory=dict)

    def commands(self) -> list[str]:
        lines = [a.command() for a in self.shown]
        for level, count in self.dropped.items():
            note = Annotation(
                Level.NOTICE,
                f"{count} more {level.value} annotation(s) not shown; see the job summary",
                title="bsdkm-ci: annotations truncated",
            )
            lines.append(note.command())
        return lines


def cap_annotations(
    annotations: Iterable[Annotation], limit: int = MAX_ANNOTATIONS_PER_LEVEL
) -> CappedAnnotations:
    """Keep the first ``limit`` per level, in order; count what was dropped."""
    out = CappedAnnotations()
    seen: dict[Level, int] = {}
    for a in annotations:
        seen[a.level] = seen.get(a.level, 0) + 1
        if seen[a.level] <= limit:
            out.shown.append(a)
        else:
            out.dropped[a.level] = out.dropped.get(a.level, 0) + 1
    return out


def _delimiter_for(value: str) -> str:
    # A random delimiter means a value (e.g. a log line) cannot close the block early.
    while True:
        delim = f"ghadelimiter_{secrets.token_hex(8)}"
        if delim not in value:
            return delim


def output_block(name: str, value: str) -> str:
    """The ``$GITHUB_OUTPUT``/``$GITHUB_ENV`` text for one name, safe for any value."""
    if not OUTPUT_NAME.match(name):
        raise ActionsError(f"invalid output name {name!r}: use letters, digits, '_' and '-'")
    delim = _delimiter_for(value)
    return f"{name}<<{delim}\n{value}\n{delim}\n"


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append every output to the runner's ``$GITHUB_OUTPUT`` file."""
    text = "".join(output_block(k, v) for k, v in outputs.items())
    _append(path, text, "GITHUB_OUTPUT")


def read_outputs(text: str) -> dict[str, str]:
    """Parse a ``$GITHUB_OUTPUT`` file the way the runner does (both ``k=v`` and heredoc forms)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            if i >= len(lines):
                raise ActionsError(f"output {name!r}: no closing delimiter {delim!r}")
            i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        else:
            raise ActionsError(f"line {i}: neither 'name=value' nor 'name<<DELIMITER': {line!r}")
    return out


def summary_text(markdown: str, limit: int = MAX_STEP_SUMMARY_BYTES) -> str:
    """The Markdown for ``$GITHUB_STEP_SUMMARY``, cut at a line boundary if over GitHub's limit."""
    data = markdown.encode("utf-8")
    if len(data) <= limit:
        return markdown if markdown.endswith("\n") else markdown + "\n"
    cut = data[:limit].decode("utf-8", errors="ignore")
    cut = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
    return cut + "\n\n_Summary truncated: over GitHub's 1 MiB step-summary limit; see the report artifact._\n"


def append_step_summary(path: Path, markdown: str) -> None:
    _append(path, summary_text(markdown), "GITHUB_STEP_SUMMARY")


def _append(path: Path, text: str, what: str) -> None:
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise ActionsError(f"cannot write {what} file {path}: {e.strerror}") from None


def stop_commands_token() -> str:
    """A fresh token for ``::stop-commands::``; echoing untrusted output between the pair
    keeps a log line such as ``::add-mask::`` or ``::error::`` from acting on the runner."""
    return secrets.token_hex(16)


def stop_commands(token: str) -> str:
    return f"::stop-commands::{token}"


def resume_commands(token: str) -> str:
    return f"::{token}::"


def env_path(env: Mapping[str, str], name: str) -> Path | None:
    """``$GITHUB_OUTPUT`` and friends as a Path, or None when not running under Actions."""
    value = env.get(name, "")
    return Path(value) if value else None
