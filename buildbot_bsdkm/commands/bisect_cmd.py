"""``bsdkm-ci bisect``: name the commit between a good and a bad one that broke a check or slowed an item.

Each step builds and runs one commit with the pipeline's stages (git source, the config's time
limits and retry rules); the culprit is verified before it is named. Writes bisect.json,
bisect.md and bisect.html to --out.
Exit 0 a culprit was named, 1 could not decide, 2 unusable input.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..bisection.search import BisectSettings
from ..config.bsdkm_yml import ConfigError, GitSource, LocalSource, usable_git_ref
from ..pipeline.jobs.bisect import FailureSpec, HistoryError, RegressionSpec, bisect_range
from ..pipeline.stages import StageError
from ..policy import load_policy
from ..report.bisection_report import headline, write_reports
from ..targets import measures_base
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError, run_input_errors
from .io import config_path, read_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bisect", help="find the commit that broke a check or made an item slower",
                       description=__doc__.splitlines()[0])
    p.add_argument("--good", required=True, metavar="REF", help="a commit (branch, tag, sha) known good")
    p.add_argument("--bad", required=True, metavar="REF", help="a later commit that shows the problem")
    p.add_argument("--target", required=True, metavar="T", help="the target to build and run")
    p.add_argument("--variant", required=True, metavar="V", help="the variant to build and run")
    p.add_argument("--config", metavar="FILE", help="bsdkm.yml (default: ./bsdkm.yml, else the repo's)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--source-git", metavar="URL", help="the repository (default: the config's git source)")
    src.add_argument("--source-dir", metavar="DIR", help="a local git checkout to take the commits from")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--failure", metavar="SIGNATURE",
                      help="a failure signature (bsdkm-ci signature), or CHECK[: PATTERN]: a failed check's "
                           "name (glob) and a regular expression its message matches")
    what.add_argument("--regression", metavar="ITEM", help="a benchmark item, or geomean")
    p.add_argument("--pct", type=float, metavar="P",
                   help="with --regression: the size of the slowdown in percent (a step is bad from P/2)")
    p.add_argument("--metric", choices=("time", "instructions"), default="time",
                   help="with --regression: wall-clock rounds against the good end and the learned gate "
                        "(time, default), or counted instructions of the item's fixed work (deterministic)")
    p.add_argument("--flaky", action="store_true",
                   help="the failure is flaky: a step is good only after the policy's bisect.flaky_k "
                        "passing runs (default 3)")
    p.add_argument("--k", type=int, metavar="N",
                   help="verification runs of the culprit and its parent (default: the policy's bisect.k, 1)")
    p.add_argument("--out", metavar="DIR", default="bsdkm-bisect",
                   help="output directory (default: bsdkm-bisect)")
    p.set_defaults(func=run)


def repository(args: argparse.Namespace, source: object) -> str:
    """The repository's URL or path: the command line's, else the config's git (or local git) source."""
    if args.source_git is not None:
        if not args.source_git.strip() or args.source_git.startswith("-"):
            raise UsageError(f"--source-git {args.source_git!r}: not a usable repository URL")
        return str(args.source_git)
    if args.source_dir is not None:
        path = Path(args.source_dir).expanduser().resolve()
        if not (path / ".git").exists():
            raise UsageError(f"--source-dir {args.source_dir}: not a git checkout (no .git), no history")
        return str(path)
    if isinstance(source, GitSource):
        return source.url
    if isinstance(source, LocalSource) and (source.path / ".git").exists():
        return str(source.path)
    raise UsageError("bisect needs a git repository: --source-git URL or --source-dir DIR "
                     "(the config's source is no git repository)")


def run(args: argparse.Namespace) -> int:
    for name in ("good", "bad"):
        ref = getattr(args, name)
        if not usable_git_ref(ref):
            raise UsageError(f"--{name} {ref!r}: not a usable git ref")
    failure = regression = None
    if args.failure is not None:
        if args.pct is not None or args.metric != "time":
            raise UsageError("--pct and --metric go with --regression, not --failure")
        failure = FailureSpec(args.failure)
        try:
            failure.check()
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        if args.pct is not None and not (math.isfinite(args.pct) and 0 < args.pct < 100):
            raise UsageError(f"--pct {args.pct:g}: a slowdown in percent, above 0 and below 100")
        regression = RegressionSpec(args.regression, args.pct, args.metric)
        if args.metric == "instructions" and args.target != "userspace":
            raise UsageError(f"--metric instructions counts a userspace build, not {args.target}")
        if not measures_base(args.target):
            raise UsageError(f"--regression on {args.target}: this target's benchmark is not measured "
                             "against a base (not regression-gated); bisect its failures instead")
    if args.k is not None and args.k < 1:
        raise UsageError(f"--k: bisect.k must be an integer of at least 1, got {args.k}")
    config = read_config(config_path(args.config))
    try:
        pairs = config.pairs([args.variant], [args.target])
    except ConfigError as e:
        raise UsageError(f"bad selection: {e}") from None
    if not pairs:
        raise UsageError(f"variant {args.variant} is not built on target {args.target} in {config.path}")
    url = repository(args, config.source)
    out = Path(args.out)
    with run_input_errors(out):
        wanted = load_policy(config.policy).bisect  # k and flaky_k: the policy's bisect: section
        try:
            settings = BisectSettings(k=wanted.k if args.k is None else args.k, flaky_k=wanted.flaky_k,
                                      flaky=args.flaky)
        except ValueError as e:
            raise UsageError(f"--k: {e}") from None
        try:
            done = bisect_range(config, url, args.good, args.bad, args.target, args.variant, out,
                                failure=failure, regression=regression, settings=settings)
        except HistoryError as e:
            raise UsageError(f"cannot bisect {args.good}..{args.bad}: {e}") from None
        except StageError as e:  # the good end of a perf bisection cannot be built or run
            print(f"bisect: the good end cannot be measured: {e.failure.stage}: {e.failure.message}")
            return EXIT_FAILED
    paths = write_reports(done.result, done.about, out)
    print(f"Report:  {paths['md']} (HTML: {paths['html']}, JSON: {paths['json']})")
    print(headline(done.result))
    return EXIT_OK if done.result.decided else EXIT_FAILED
