"""``bsdkm-ci run``: fetch wolfSSL, build and run every (target, variant) of a config, gate the results.

Prints where the JUnit XML and the reports are, then the verdict.
Exit 0 everything passed, 1 a stage, test or threshold failed, 2 unusable config/input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config.bsdkm_yml import (
    SourceSpec,
)
from ..model import RunResult
from .exit_codes import UsageError
from .io import config_path, history_files, read_all, read_config
from .log_groups import StageLogGroups
from .matrix_run import (
    add_run_arguments,
    add_source_arguments,
    add_unavailable_argument,
    base_side,
    execute,
    print_result,
    source_override,
    with_source,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="build, run and gate the configured variants and targets",
        description=__doc__.splitlines()[0],
    )
    add_run_arguments(p)
    add_unavailable_argument(p)
    add_source_arguments(p)
    p.add_argument(
        "--config", metavar="FILE", help="bsdkm.yml to use (default: ./bsdkm.yml, else the repo's)"
    )
    p.add_argument("--variant", action="append", metavar="V", help="only this variant (repeatable)")
    p.add_argument("--target", action="append", metavar="T", help="only this target (repeatable)")
    add_base_arguments(p)
    p.add_argument("--log-groups", action="store_true",
                   help="on a GitHub Actions runner: each stage's lines in a log group of its own")
    p.set_defaults(func=run)


def add_base_arguments(p: argparse.ArgumentParser) -> None:
    """A second source built next to the head and measured interleaved with it (the perf gate's base)."""
    g = p.add_argument_group("base build (gated against; measured interleaved with the head)")
    g.add_argument("--base-git", metavar="URL", help="fetch the base wolfSSL from this git repository")
    g.add_argument("--base-ref", metavar="REF", help="with --base-git: the base's branch, tag, commit or ref")
    g.add_argument("--base-dir", metavar="DIR", help="use this local wolfSSL checkout as the base")
    g.add_argument("--repeats", type=int, metavar="N",
                   help="rounds of base, head benchmark runs with a base (default: the config's "
                        "benchmark.repeats, 5)")
    g.add_argument("--history", metavar="DIR", nargs="+",
                   help="perf history (bsdkm-ci history's directory, or results files): learned limits' "
                        "spread, and the base when there is no base build")


def base_override(args: argparse.Namespace) -> SourceSpec | None:
    """The base source the command line names (same rules as the head's override), or None."""
    named = argparse.Namespace(source_git=getattr(args, "base_git", None),
                               source_ref=getattr(args, "base_ref", None),
                               source_dir=getattr(args, "base_dir", None), source_commit=None)
    try:
        spec = source_override(named)
    except UsageError as e:
        raise UsageError(str(e).replace("--source-", "--base-")) from None
    return base_side(spec)


def run(args: argparse.Namespace) -> int:
    config = with_source(read_config(config_path(args.config)), args)
    out = Path(args.out)
    base = base_override(args)
    history = read_history(args.history) if getattr(args, "history", None) else None
    repeats = config.benchmark.repeats if args.repeats is None else args.repeats
    groups = StageLogGroups() if getattr(args, "log_groups", False) else None
    try:
        result = execute(config, args.variant, args.target, out, args.jobs, base, repeats, history,
                         args.unavailable, progress=groups)
    finally:
        if groups is not None:
            groups.close()
    return print_result(result, out)


def read_history(specs: list[str]) -> list[RunResult]:
    return read_all(history_files(specs))
