"""The ``bsdkm-ci`` command: a thin shell over the core.

Exit codes (a contract other shells rely on; ``commands/exit_codes.py``): 0 everything passed,
1 a test or threshold failed, 2 unusable input or usage error (reason on stderr).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from importlib import metadata

from . import commands
from .commands.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_UNUSABLE, UsageError
from .policy import BaselineMismatch
from .targets import TargetPluginError

# The exit statuses and UsageError are commands/exit_codes.py's; named here too for callers of the CLI.
__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_UNUSABLE", "UsageError", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def format_help(self) -> str:
        # Descriptions are the commands' docstrings, written for the docs: ``x`` reads x here.
        return super().format_help().replace("``", "")

    def error(self, message: str) -> None:  # argparse exits 2 too; keep the wording ours
        self.print_usage(sys.stderr)
        print(f"bsdkm-ci: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_UNUSABLE)


DISTRIBUTION = "buildbot-bsdkm"
# What the base install lacks, and the extra of pyproject.toml that brings it.
EXTRA_OF_MODULE = {"twisted": "github", "treq": "github", "buildbot": "buildbot", "sqlalchemy": "buildbot",
                   "requests": "buildbot", "jwt": "buildbot", "cryptography": "buildbot"}


def version() -> str:
    """The installed distribution's version: pyproject.toml is the only place it is written."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # a source tree on sys.path that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bsdkm-ci", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"bsdkm-ci {version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    commands.register_all(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args))
        sys.stdout.flush()  # a reader that has gone shows here, inside the handler below
        return status
    except BrokenPipeError:
        return _reader_gone()
    except UsageError as e:
        print(f"bsdkm-ci {args.command}: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except TargetPluginError as e:  # an installed package's target, read with the first config
        print(f"bsdkm-ci {args.command}: bad target plug-in: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except BaselineMismatch as e:  # whichever subcommand gated with that baseline
        print(f"bsdkm-ci {args.command}: bad baseline: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except ModuleNotFoundError as e:
        extra = EXTRA_OF_MODULE.get((e.name or "").partition(".")[0])
        if extra is None:
            raise
        print(f"bsdkm-ci {args.command}: needs {DISTRIBUTION}[{extra}] ({e.name} is not installed): "
              f"pip install '{DISTRIBUTION}[{extra}]'", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print("bsdkm-ci: interrupted", file=sys.stderr)
        return 130


def _reader_gone() -> int:
    """The output's reader went away (``bsdkm-ci parse --json | head``): stop quietly, as a program
    killed by SIGPIPE would, without a traceback, and without another failed flush at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE  # what a shell reports for a program SIGPIPE ended


if __name__ == "__main__":
    sys.exit(main())
