"""Subcommands of ``bsdkm-ci``, one module each, each with ``register(subparsers)``.

Each module only turns arguments into calls to the core and results into an
exit status; it does not parse logs or decide verdicts itself.
"""

from __future__ import annotations

import argparse
import importlib

# Module name under buildbot_bsdkm.commands for every subcommand: each must exist.
SUBCOMMANDS = ["parse", "junit", "compare", "run", "main", "stage", "action", "release", "history"]


def register_all(sub: argparse._SubParsersAction) -> None:
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}_cmd").register(sub)
