"""``bsdkm-ci release``: a release candidate against the previous release, the full matrix, one report.

SOURCE (both options): ``debian:SUITE/VERSION`` (``debian:trixie/5.7.2``, ``debian:sid/5.9.2``;
``debian:SUITE/PACKAGE=VERSION``; ``debian:SUITE`` = the newest there), ``git:URL[@REF]``,
``tarball:PATH|URL[#SHA256]`` (or any path/URL ending in .tar.gz/.tar.xz/.tgz), ``dir:PATH``
or an existing directory. Writes DIR/release.html, release.md, release.json and
DIR/baseline-<major.minor>.json (the candidate's results: the new baseline of its release line).
Exit 0 the candidate passed, 1 it failed or regressed, 2 unusable input (an unknown source names it).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ..config.bsdkm_yml import SourceSpec
from ..pipeline.jobs.release import SourceSyntaxError, UnknownSourceError, parse_source, run_release
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError, run_input_errors
from .io import config_path, read_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("release", help="judge a release candidate against the previous release",
                       description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--candidate", required=True, metavar="SOURCE", help="the release candidate's source")
    p.add_argument("--previous", required=True, metavar="SOURCE", help="the previous release's source")
    p.add_argument("--config", metavar="FILE", help="bsdkm.yml (default: ./bsdkm.yml, else the repo's)")
    p.add_argument("--out", metavar="DIR", default="bsdkm-release", help="output directory")
    p.add_argument("--variant", action="append", metavar="V",
                   help="only this variant (repeatable; default: every variant, disabled ones included)")
    p.add_argument("--target", action="append", metavar="T", help="only this target (repeatable)")
    p.add_argument("--repeats", type=int, metavar="N", help="interleaved repeats per side (default: config)")
    p.add_argument("--freebsd-release", metavar="X.Y",
                   help="the FreeBSD release this host is (default: detected; none off FreeBSD)")
    p.set_defaults(func=run)


def _source(option: str, text: str) -> SourceSpec:
    try:
        return parse_source(text)
    except SourceSyntaxError as e:
        raise UsageError(f"{option}: {e}") from None


def run(args: argparse.Namespace) -> int:
    candidate = _source("--candidate", args.candidate)
    previous = _source("--previous", args.previous)
    if args.repeats is not None and args.repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
    if args.freebsd_release is not None and not re.fullmatch(r"\d+\.\d+", args.freebsd_release):
        raise UsageError(f"--freebsd-release {args.freebsd_release!r}: a FreeBSD release is MAJOR.MINOR")
    config = read_config(config_path(args.config))
    out = Path(args.out)
    with run_input_errors(out):
        try:
            result = run_release(config, candidate, previous, out, variants=args.variant, targets=args.target,
                                 host_release=args.freebsd_release, repeats=args.repeats)
        except UnknownSourceError as e:
            raise UsageError(f"unknown source: {e}") from None
    for name in ("release.html", "release.md", "release.json", "baseline"):
        if name in result.outputs:
            print(f"{name + ':':14} {result.outputs[name]}")
    for row in result.comparison.get("matrix", []):
        print(f"  {row['label']}: {row['status']}; candidate {row['candidate']}; previous {row['previous']}")
    print(result.verdict.summary())
    for c in result.verdict.failures:
        print(f"  {c.run_label} {c.kind}: {c.message}")
    return EXIT_OK if result.passed else EXIT_FAILED
