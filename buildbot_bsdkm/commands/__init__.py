"""Subcommands of ``bsdkm-ci``, one module each, each with ``register(subparsers)``.

Each module only turns arguments into calls to the core and results into an
exit status; it does not parse logs or decide verdicts itself.
"""

from __future__ import annotations

import argparse
import importlib

# Module name under buildbot_bsdkm.commands for every subcommand; a module that
# does not exist yet is skipped so the command works while pieces land.
SUBCOMMANDS = ["parse", "junit", "compare", "run", "main", "stage", "retry", "action", "release", "history"]


def register_all(sub: argparse._SubParsersAction) -> None:
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}_cmd":
                continue
            raise
        mod.register(sub)
