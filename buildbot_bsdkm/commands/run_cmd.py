"""``bsdkm-ci run``: fetch wolfSSL, build and run every (target, variant) of a config, gate the results.

Prints where the JUnit XML and the reports are, then the verdict.
Exit 0 everything passed, 1 a stage, test or threshold failed, 2 unusable config/input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli import EXIT_FAILED, EXIT_OK, UsageError
from ..config import Config, ConfigError, default_config_path, load_config
from ..pipeline.report_out import BaselineError
from ..pipeline.run import MatrixResult, run_matrix
from ..policy import PolicyError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="build, run and gate the configured variants and targets",
        description=__doc__.splitlines()[0],
    )
    add_run_arguments(p)
    p.add_argument(
        "--config", metavar="FILE", help="bsdkm.yml to use (default: ./bsdkm.yml, else the repo's)"
    )
    p.add_argument("--variant", action="append", metavar="V", help="only this variant (repeatable)")
    p.add_argument("--target", action="append", metavar="T", help="only this target (repeatable)")
    p.set_defaults(func=run)


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", default="bsdkm-out", help="output directory (default: bsdkm-out)")
    p.add_argument("--jobs", type=int, metavar="N", help="compile jobs in total (default: the config's)")


def config_path(given: str | None) -> Path:
    if given:
        return Path(given)
    local = Path("bsdkm.yml")
    return local if local.is_file() else default_config_path()


def read_config(path: Path) -> Config:
    try:
        return load_config(path)
    except ConfigError as e:
        raise UsageError(f"bad config: {e}") from None


def execute(
    config: Config, variants: list[str] | None, targets: list[str] | None, out: Path, jobs: int | None
) -> MatrixResult:
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    try:
        return run_matrix(config, variants, targets, out, jobs=jobs)
    except ConfigError as e:
        raise UsageError(f"bad selection: {e}") from None
    except PolicyError as e:
        raise UsageError(f"bad policy: {e}") from None
    except BaselineError as e:
        raise UsageError(f"bad baseline: {e}") from None
    except OSError as e:
        raise UsageError(f"{out}: cannot write results: {e.strerror or e}") from None


def print_result(result: MatrixResult, out: Path) -> int:
    print(f"JUnit:   {result.outputs.get('junit.xml', out / 'junit.xml')}")
    print(f"Report:  {result.outputs.get('report.md')} (HTML: {result.outputs.get('report.html')})")
    print(f"Summary: {result.outputs.get('summary.json')}")
    for r in result.runs:
        status = (
            "ok"
            if r.failure is None
            else f"FAILED {r.failure.stage} ({r.failure.category}): {r.failure.message}"
        )
        print(
            f"  {r.target}/{r.variant}: {len(r.tests)} self-tests, {len(r.benchmarks)} benchmarks; {status}"
        )
    print(result.verdict.summary())
    for c in result.verdict.failures:
        print(f"  {c.run_label} {c.kind}{' (error)' if c.error else ''}: {c.message}")
    return EXIT_OK if result.passed else EXIT_FAILED


def run(args: argparse.Namespace) -> int:
    config = read_config(config_path(args.config))
    out = Path(args.out)
    return print_result(execute(config, args.variant, args.target, out, args.jobs), out)
