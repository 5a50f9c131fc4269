"""``bsdkm-ci main``: the main job, the repository's ``bsdkm.yml`` (Debian sid wolfSSL 5.9.2,
an accelerated variant and ``noasm``, userspace and the Linux module in QEMU, short benchmarks).

Exit 0 everything passed, 1 a stage, test or threshold failed, 2 unusable config/input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config.bsdkm_yml import default_config_path
from .io import read_config
from .matrix_run import add_run_arguments, add_unavailable_argument, execute, print_result


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "main", help="the main job: run the default configuration", description=__doc__.splitlines()[0]
    )
    add_run_arguments(p)
    add_unavailable_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = default_config_path()
    print(f"config:  {path}")
    config = read_config(path)
    out = Path(args.out)
    return print_result(execute(config, None, None, out, args.jobs, unavailable=args.unavailable), out)
