"""``bsdkm-ci stage STAGE --variant V --target T --out DIR``: one pipeline stage, for one Buildbot step.

State between stages is kept in ``DIR/<target>/<variant>/state.json``. For userspace, ``load``
runs testwolfcrypt and the benchmark. A failed stage prints its category (infrastructure or
real) and reason; later stages then refuse to run, except ``collect`` and ``gate``.
Exit 0 the stage passed, 1 it failed (or was skipped), 2 unusable input.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ..config.bsdkm_yml import ConfigError
from ..contract import BASE_DIR, BASE_SIDE, BaselineError
from ..pipeline.jobs.pair import gate_against_base, load_interleaved
from ..pipeline.stages import STAGES, Job, StageSkipped, run_stage
from ..policy import PolicyError
from ..triage.known import KnownIssueError
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError
from .io import config_path, read_config
from .matrix_run import add_source_arguments, base_side, source_override, with_source


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stage", help="run one pipeline stage (one Buildbot step)", description=__doc__.splitlines()[0]
    )
    p.add_argument("stage", choices=STAGES)
    p.add_argument("--variant", required=True, metavar="V")
    p.add_argument("--target", required=True, metavar="T")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--config", metavar="FILE", help="bsdkm.yml (default: ./bsdkm.yml, else the repo's)")
    p.add_argument("--jobs", type=int, metavar="N", help="make -j (default: the config's jobs)")
    add_source_arguments(p)
    g = p.add_argument_group("base build (a PR's base, built by the same stages into DIR/base)")
    g.add_argument("--side", choices=("head", "base"), default="head",
                   help="base: this stage for the base, in DIR/base (fetch: a git work tree of its own)")
    g.add_argument("--base-out", metavar="DIR",
                   help="load: measure the base built there and this head interleaved (A B A B); "
                        "gate: judge the head against that base instead of history")
    g.add_argument("--repeats", type=int, metavar="N",
                   help="load with --base-out: rounds of base, head (default: benchmark.repeats)")
    p.set_defaults(func=run)


def _base_options(args: argparse.Namespace) -> None:
    base_out, repeats = getattr(args, "base_out", None), getattr(args, "repeats", None)
    if getattr(args, "side", "head") == "base" and (base_out is not None or repeats is not None):
        raise UsageError("--side base is the base itself: --base-out/--repeats belong to the head's stages")
    if base_out is not None and args.stage not in ("load", "gate"):
        raise UsageError(f"--base-out applies to 'stage load' and 'stage gate', not '{args.stage}'")
    if repeats is not None and (args.stage != "load" or base_out is None):
        raise UsageError("--repeats applies to 'stage load --base-out DIR' only")
    if repeats is not None and repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {repeats}")
    if base_out is not None and Path(base_out).resolve() == Path(args.out).resolve():
        raise UsageError(f"--base-out {base_out}: the same directory as --out (the base needs its own)")


def run(args: argparse.Namespace) -> int:
    # Only fetch reads the source; later stages use the tree fetch recorded in state.json, so an
    # override given to them would be silently ignored: refuse it instead.
    if args.stage != "fetch" and source_override(args) is not None:
        raise UsageError(f"--source-* options apply to 'stage fetch', not '{args.stage}'")
    _base_options(args)
    config = with_source(read_config(config_path(args.config)), args)
    out = Path(args.out)
    side = ""
    if getattr(args, "side", "head") == "base":
        side = BASE_SIDE
        config = dataclasses.replace(config, source=base_side(config.source))
        out = out / BASE_DIR
    try:
        config.pairs([args.variant], [args.target])
    except ConfigError as e:
        raise UsageError(str(e)) from None
    if args.target not in config.variants[args.variant].targets:
        raise UsageError(
            f"variant {args.variant!r} does not run on {args.target!r} "
            f"(its targets: {', '.join(config.variants[args.variant].targets)})"
        )
    try:
        base_out = Path(args.base_out) if getattr(args, "base_out", None) else None
        job = Job(config, args.target, args.variant, out, jobs=args.jobs or config.jobs,
                  base_out=base_out, side=side)
        if args.stage == "load" and base_out is not None and job.failure is None:
            base = Job(config, args.target, args.variant, base_out, jobs=job.jobs, side=BASE_SIDE)
            failure = load_interleaved(job, base, args.repeats or config.benchmark.repeats)
        elif args.stage == "gate" and base_out is not None:  # confirm: true can measure both again here
            failure = gate_against_base(job, Job(config, args.target, args.variant, base_out, jobs=job.jobs,
                                                 side=BASE_SIDE))
        else:
            failure = run_stage(job, args.stage)
    except StageSkipped as e:
        print(f"bsdkm-ci stage {args.stage}: {e}", file=sys.stderr)
        return EXIT_FAILED
    except (PolicyError, BaselineError, KnownIssueError) as e:
        raise UsageError(f"{args.stage}: {e}") from None
    except OSError as e:
        raise UsageError(f"{args.out}: {e.strerror or e}") from None
    if failure is not None:
        print(
            f"FAILED {failure.stage} category={failure.category} reason={failure.reason}: {failure.message}"
        )
        for path in failure.evidence:
            print(f"  evidence: {path}")
        return EXIT_FAILED
    if args.stage == "gate":
        verdict = job.state.get("verdict", {})
        print(verdict.get("summary", ""))
        print(f"JUnit: {job.dir / 'junit.xml'}")
        return EXIT_OK if verdict.get("passed") else EXIT_FAILED
    print(f"{args.stage} ok: {job.label} (state: {job.state_path})")
    return EXIT_OK
