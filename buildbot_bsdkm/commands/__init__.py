"""Subcommands of ``bsdkm-ci``, one module (or package) each, each with ``register(subparsers)``.

Each module only turns arguments into calls to the core and results into an
exit status; it does not parse logs or decide verdicts itself. Imported by name
here, so a subcommand listed without its module fails at import, never silently.
"""

from __future__ import annotations

import argparse

from . import (
    action,
    bisect_cmd,
    compare_cmd,
    doctor_cmd,
    force_cmd,
    history_cmd,
    init_cmd,
    junit_cmd,
    main_cmd,
    parse_cmd,
    release_cmd,
    run_cmd,
    schema_cmd,
    signature_cmd,
    stage_cmd,
)

# Every subcommand, in the order ``bsdkm-ci --help`` lists them.
SUBCOMMANDS = (parse_cmd, junit_cmd, compare_cmd, signature_cmd, run_cmd, main_cmd, stage_cmd, action,
               release_cmd, history_cmd, bisect_cmd, init_cmd, force_cmd, doctor_cmd, schema_cmd)


def register_all(sub: argparse._SubParsersAction) -> None:
    for module in SUBCOMMANDS:
        module.register(sub)
