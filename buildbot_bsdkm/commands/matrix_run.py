"""Running the configured matrix from the command line, shared by ``run``, ``main``, ``stage``,
``release`` and ``bisect``: the output/jobs arguments, the override of the config's ``source:``
(and the base's own work tree), the call into the pipeline and the printed result."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

from ..config.bsdkm_yml import Config, GitSource, LocalSource, SourceSpec, usable_git_ref
from ..model import RunResult
from ..pipeline.jobs.matrix import MatrixResult, run_matrix
from ..report.junit import junit_tally
from .exit_codes import EXIT_FAILED, EXIT_OK, UsageError, run_input_errors

NOT_RUN = "not-run"


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", default="bsdkm-out", help="output directory (default: bsdkm-out)")
    p.add_argument("--jobs", type=int, metavar="N", help="compile jobs in total (default: the config's)")


def add_unavailable_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--unavailable", choices=(NOT_RUN, "fail"), default=NOT_RUN,
        help="a run this machine cannot do (no FreeBSD set reachable, freebsd-kmod off FreeBSD): "
             "report it not run (default), or fail it as the infrastructure failure it is (CI)")


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """Overrides of the config's ``source:``: a PR build builds the PR's head, not the config's tree."""
    g = p.add_argument_group("source override (instead of the config's source:)")
    g.add_argument("--source-git", metavar="URL", help="fetch wolfSSL from this git repository")
    g.add_argument(
        "--source-ref",
        metavar="REF",
        help="with --source-git: branch, tag, commit or refs/pull/N/head|merge (default: HEAD)",
    )
    g.add_argument(
        "--source-commit",
        metavar="SHA",
        help="with --source-git: fail unless the ref resolves to this commit (a PR build's head)",
    )
    g.add_argument("--source-dir", metavar="DIR", help="use this local wolfSSL checkout as is")


def source_override(args: argparse.Namespace) -> SourceSpec | None:
    """The source the command line asks for, or None to keep the config's; bad combinations → exit 2."""
    url = getattr(args, "source_git", None)
    ref = getattr(args, "source_ref", None)
    local = getattr(args, "source_dir", None)
    commit = getattr(args, "source_commit", None)
    if url is not None and local is not None:
        raise UsageError("--source-git and --source-dir are two different sources: give one")
    if ref is not None and url is None:
        raise UsageError(f"--source-ref {ref!r} needs --source-git URL (a ref of which repository?)")
    if commit is not None and url is None:
        raise UsageError(f"--source-commit {commit!r} needs --source-git URL")
    if local is not None:
        path = Path(local).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"--source-dir {local}: not a directory")
        return LocalSource(path)
    if url is None:
        return None
    # A URL or ref starting with '-' would reach git as an option, not as a repository or ref.
    if not url.strip() or url.startswith("-"):
        raise UsageError(f"--source-git {url!r}: not a usable repository URL")
    ref = "HEAD" if ref is None else ref
    if not usable_git_ref(ref):
        raise UsageError(f"--source-ref {ref!r}: not a usable git ref")
    if commit is not None and not re.fullmatch(r"[0-9a-fA-F]{7,64}", commit):
        raise UsageError(f"--source-commit {commit!r}: not a commit sha (7 to 64 hex digits)")
    return GitSource(url=url, ref=ref, commit=commit.lower() if commit else None)


def with_source(config: Config, args: argparse.Namespace) -> Config:
    """``config`` with the command line's source override applied (unchanged when there is none)."""
    spec = source_override(args)
    return config if spec is None else dataclasses.replace(config, source=spec)


def base_side(spec: SourceSpec | None) -> SourceSpec | None:
    """The base's source with a git work tree of its own (it is often the head's repository)."""
    return dataclasses.replace(spec, slot="base") if isinstance(spec, GitSource) else spec


def execute(
    config: Config, variants: list[str] | None, targets: list[str] | None, out: Path, jobs: int | None,
    base: SourceSpec | None = None, repeats: int = 5, history: list[RunResult] | None = None,
    unavailable: str = NOT_RUN, progress: Callable[[str], None] | None = None,
) -> MatrixResult:
    """The matrix run; ``progress`` hears the pipeline's progress lines (default: standard error)."""
    if jobs is not None and jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    if repeats < 1:
        raise UsageError(f"--repeats must be at least 1, got {repeats}")
    with run_input_errors(out):
        config.selected_pairs(variants, targets)  # nothing to run is a usage error, before any fetch
        result = run_matrix(config, variants, targets, out, jobs=jobs, base_source=base, repeats=repeats,
                            history=history, not_run_ok=unavailable == NOT_RUN,
                            **({"progress": progress} if progress is not None else {}))
    return result


def print_result(result: MatrixResult, out: Path) -> int:
    print(f"JUnit:   {result.outputs.get('junit.xml', out / 'junit.xml')}: "
          f"{junit_tally(result.runs, result.verdict)}")
    print(f"Report:  {result.outputs.get('report.md')} (HTML: {result.outputs.get('report.html')})")
    print(f"Summary: {result.outputs.get('summary.json')}")
    for r in result.runs:
        status = (
            f"not run: {r.not_run}" if r.not_run
            else "ok" if r.failure is None
            else f"FAILED {r.failure.stage} ({r.failure.category}): {r.failure.message}"
        )
        status += "".join(f"; {part} not run: {why}" for part, why in r.not_run_parts.items())
        print(
            f"  {r.target}/{r.variant}: {len(r.tests)} self-tests, {len(r.benchmarks)} benchmarks; {status}"
        )
    print(result.verdict.summary())
    for c in result.verdict.failures:
        print(f"  {c.run_label} {c.kind}{' (error)' if c.error else ''}: {c.message}")
    return EXIT_OK if result.passed else EXIT_FAILED
