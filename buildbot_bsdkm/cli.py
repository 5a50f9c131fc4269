"""The ``bsdkm-ci`` command: a thin shell over the core.

Exit codes (a contract other shells rely on): 0 everything passed, 1 a test or
threshold failed, 2 unusable input or usage error (reason on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNUSABLE = 2


class UsageError(Exception):
    """Unusable input: the message names the problem; exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep the wording ours
        self.print_usage(sys.stderr)
        print(f"bsdkm-ci: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_UNUSABLE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="bsdkm-ci", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"bsdkm-ci {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    from . import commands  # registers each subcommand; kept in one module per command

    commands.register_all(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as e:
        print(f"bsdkm-ci {args.command}: {e}", file=sys.stderr)
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        print("bsdkm-ci: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Run through the importable module so `python -m` shares one UsageError class
    # with the subcommands (which import it from buildbot_bsdkm.cli).
    from buildbot_bsdkm.cli import main as _main

    sys.exit(_main())
