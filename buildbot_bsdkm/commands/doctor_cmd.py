"""``bsdkm-ci doctor``: is this machine ready to run its targets? One line per prerequisite, with the fix.

The prerequisites are each target's own (the list the configure stage checks: its first missing
required one fails a build as an infrastructure failure), for the targets of ``--config`` (default:
./bsdkm.yml, else the packaged one) or those named with ``--target``; then bsdkm-ci's Python
packages, and whether the master's workers port answers (``--master HOST:PORT``, or the master a
worker directory connects to, ``--worker-dir DIR``).
Exit 0 every required prerequisite holds, 1 one is missing, 2 unusable input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..pipeline.jobs.doctor import (
    DoctorInputError,
    Finding,
    check_up,
    configured_targets,
    master_of_worker,
    parse_master,
)
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError
from .io import config_path, read_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check this machine's prerequisites for its targets, with fixes",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", metavar="FILE", help="bsdkm.yml (default: ./bsdkm.yml, else the packaged one)")
    p.add_argument("--target", action="append", metavar="NAME",
                   help="check this target (repeatable; default: every target of the config)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--master", metavar="HOST:PORT", help="the master's workers port to try")
    where.add_argument("--worker-dir", metavar="DIR",
                       help="a worker directory: try the master its buildbot.tac names; buildbot-worker "
                            "is then required")
    p.set_defaults(func=run)


def _line(f: Finding) -> str:
    state = "ok" if f.need.ok else "MISSING" if f.need.required else "advice"
    fix = f" -- fix: {f.need.fix}" if f.need.fix and not f.need.ok else ""
    return f"{state:<8} {f.owner:<18} {f.need.name}: {f.need.detail}{fix}"


def run(args: argparse.Namespace) -> int:
    config = read_config(config_path(args.config))
    try:
        master = parse_master(args.master) if args.master else None
        if args.worker_dir:
            master = master_of_worker(Path(args.worker_dir))
        names = list(dict.fromkeys(args.target)) if args.target else configured_targets(config)
        findings = check_up(config, names, master, worker=bool(args.worker_dir))
    except DoctorInputError as e:
        raise UsageError(str(e)) from None
    for f in findings:
        print(_line(f))
    if master is None:
        print(f"{'-':<8} {'worker':<18} master: not tried (give --master HOST:PORT or --worker-dir DIR)")
    missing = [f for f in findings if f.missing]
    if missing:
        listed = "; ".join(f"{f.owner}: {f.need.name}" for f in missing)
        print(f"bsdkm-ci doctor: {len(missing)} required prerequisite(s) missing: {listed}", file=sys.stderr)
        return EXIT_FAILED
    print(f"bsdkm-ci doctor: every required prerequisite of {', '.join(names) or 'no target'} holds",
          file=sys.stderr)
    return EXIT_OK
