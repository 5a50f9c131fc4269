"""A release candidate against the release before it: the full matrix, measured fairly, one report.

``run_release`` fetches both sources, builds every (target, variant) of the config (disabled
variants included) for both with the same flags in the same (fresh) build area on this
worker, then measures them interleaved -- candidate, previous, previous, candidate, ... for
``release.repeats`` rounds -- so drift of the machine falls on both sides alike. The candidate
is then judged by ``judge_candidate`` (the one place a comparison rule is chosen) and the
comparison in ``report/release_report.py`` is written next to the runs.

FreeBSD: one matrix item per declared OS release (``release.freebsd_releases``); a release
runs here when this host is that release, is "covered elsewhere" when some worker carries its
``freebsd-<release>-<arch>`` tag, and is "not covered" otherwise. A target whose sources the
previous tree lacks (``bsdkm/`` before 5.9) is "not in previous": the candidate still runs.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import re
import shutil
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config.bsdkm_yml import (
    Config,
    DebianSource,
    GitSource,
    LocalSource,
    SourceSpec,
    TarballSource,
    usable_git_ref,
)
from ...contract import RELEASE_OUTCOMES_FILE
from ...model import Benchmark, FailureCategory, RunResult, StageFailure, to_json
from ...policy import Policy, Verdict, evaluate, load_policy
from ...report.release_report import comparison, compiler_warnings, html_release, markdown_release, parse_size
from ...targets import get as target_row
from ...targets import os_release_tag
from ...triage.outcomes import outcomes_of
from .. import targets as registry
from ..job import MEASURE_LOCK, OUTCOME, SOURCE, STAGE_TIMES, Job, Progress, stderr_progress
from ..phases import build_phase, concurrency, measure_phase, record_failure, timed
from ..runtime import fips as fipsmod
from ..runtime.loading import outcome_record
from ..runtime.locks import write_atomic
from ..runtime.source import SourceTree, cache_root, fetch_source
from ..runtime.stage_error import StageError
from ..stages import collect, stage_fetch, target_of
from ..targets import kernel

SIDES = ("candidate", "previous")

# Item status in the matrix.
RUN = "run"
NOT_COVERED = "not covered"  # a declared FreeBSD release no worker carries
ELSEWHERE = "covered elsewhere"  # a worker has the release, this host is not it
NOT_IN_CANDIDATE = "not in candidate"


def target_dir(target: str) -> str | None:
    """The source directory a kernel target is built from (a tree without it has no such target)."""
    row = target_row(target)
    return row.source_dir if row is not None else None


class SourceSyntaxError(ValueError):
    """A SOURCE argument in none of the accepted forms; the message names it."""


class UnknownSourceError(ValueError):
    """A SOURCE the archive or repository does not have (a version, tag or path); names it."""


SOURCE_FORMS = (
    "debian:SUITE/VERSION (debian:trixie/5.7.2), debian:SUITE/PACKAGE=VERSION, debian:SUITE; "
    "git:URL[@REF]; tarball:PATH|URL[#SHA256] or a path/URL ending in .tar.gz/.tar.xz/.tgz; "
    "dir:PATH or an existing directory"
)
_DEBIAN = re.compile(
    r"^debian:(?P<suite>[a-z][a-z0-9-]*)(?:/(?:(?P<package>[a-z0-9][a-z0-9.+-]*)=)?(?P<version>\d[\w.+~-]*))?$"
)
_TARBALL_NAME = re.compile(r"\.(tar\.(gz|xz|bz2)|tgz)$")


def parse_source(text: str, base: Path | None = None) -> SourceSpec:
    """A ``--candidate``/``--previous`` SOURCE as a config source; ``SourceSyntaxError`` otherwise."""
    base = base or Path.cwd()
    raw = text.strip()
    if not raw:
        raise SourceSyntaxError("empty source")
    if raw.startswith("debian:"):
        m = _DEBIAN.match(raw)
        if not m:
            raise SourceSyntaxError(f"unknown source {text!r}: a Debian source is debian:SUITE/VERSION")
        return DebianSource(suite=m["suite"], package=m["package"] or "wolfssl", version=m["version"])
    if raw.startswith("git:"):
        url, ref = raw[4:], "HEAD"
        head, sep, tail = url.rpartition("@")
        if sep and head and ":" not in tail and "/" not in tail.split("refs/", 1)[0]:
            url, ref = head, tail
        if not url or url.startswith("-") or not usable_git_ref(ref):
            raise SourceSyntaxError(f"unknown source {text!r}: a git source is git:URL[@REF]")
        return GitSource(url=url, ref=ref)
    if raw.startswith("tarball:") or _TARBALL_NAME.search(raw.split("#", 1)[0]):
        loc, _, sha = raw.removeprefix("tarball:").partition("#")
        if sha and not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
            raise SourceSyntaxError(f"unknown source {text!r}: #SHA256 must be 64 hex digits")
        if not re.match(r"^(https?|ftp)://", loc):
            path = Path(loc).expanduser()
            loc = str(path if path.is_absolute() else base / path)
            if not Path(loc).is_file():
                raise SourceSyntaxError(f"unknown source {text!r}: no tarball at {loc}")
        return TarballSource(location=loc, sha256=sha.lower() or None)
    path = Path(raw.removeprefix("dir:")).expanduser()
    path = path if path.is_absolute() else base / path
    if path.is_dir():
        return LocalSource(path.resolve())
    raise SourceSyntaxError(f"unknown source {text!r} (accepted: {SOURCE_FORMS})")


# --------------------------------------------------------------------------- the matrix


@dataclass
class MatrixItem:
    target: str
    variant: str
    os_release: str | None = None  # FreeBSD release for freebsd-kmod
    status: str = RUN
    note: str = ""
    in_previous: bool = True

    @property
    def label(self) -> str:
        where = f"{self.target}@{self.os_release}" if self.os_release else self.target
        return f"{where}/{self.variant}"

    def record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "label": self.label}


def host_freebsd_release() -> str | None:
    """``14.3`` on a FreeBSD 14.3 host, None elsewhere."""
    if platform.system() != "FreeBSD":
        return None
    m = re.match(r"(\d+\.\d+)", platform.release())
    return m.group(1) if m else None


def release_workers(config: Config, os_release: str) -> list[str]:
    """Workers whose tags say they run this FreeBSD release on the configured arch."""
    tag = os_release_tag(os_release, config.release.arch)
    out = []
    for name, raw in (config.workers or {}).items():
        tags = raw.get("tags", []) if isinstance(raw, dict) else []
        tags = tags.split() if isinstance(tags, str) else tags
        if tag in tags:
            out.append(str(name))
    return out


def plan_matrix(
    config: Config,
    variants: list[str] | None,
    targets: list[str] | None,
    host_release: str | None,
) -> list[MatrixItem]:
    """Every (target, variant[, FreeBSD release]) to report on; ``config.pairs`` checks the names."""
    items = []
    for target, variant in config.pairs(variants or list(config.variants), targets):
        t = registry.get(target)
        if t is None or not t.per_os_release:
            items.append(MatrixItem(target, variant))
            continue
        releases = list(config.release.freebsd_releases)
        if host_release and host_release not in releases:
            releases.append(host_release)
        for rel in releases:
            workers = release_workers(config, rel)
            if rel == host_release:
                items.append(MatrixItem(target, variant, rel, RUN, "this host"))
            elif workers:
                tag = os_release_tag(rel, config.release.arch)
                items.append(MatrixItem(target, variant, rel, ELSEWHERE, f"worker(s) {', '.join(workers)} "
                                        f"({tag}) run it; not this host"))
            else:
                items.append(MatrixItem(target, variant, rel, NOT_COVERED,
                                        f"no worker has tag {os_release_tag(rel, config.release.arch)}"))
    return items


def has_target(tree: Path, target: str) -> bool:
    sub = target_dir(target)
    return sub is None or (tree / sub).is_dir()


# --------------------------------------------------------------------------- judging


def median_run(repeats: list[RunResult]) -> RunResult:
    """One run standing for its repeats: each benchmark's numbers are the median over the repeats.

    The first repeat gives the shape (logs, self-tests, failure); a self-test that failed in any
    repeat is kept failed, so a flaky failure is never averaged away.
    """
    first = repeats[0]
    if len(repeats) == 1:
        return first
    by_key: dict[tuple[str, int | None], list[Benchmark]] = {}
    for r in repeats:
        for b in r.benchmarks:
            by_key.setdefault((b.name, b.block_size), []).append(b)
    logs = []
    for log in first.logs:
        benches = []
        for b in log.benchmarks:
            same = [x for x in by_key.get((b.name, b.block_size), [b]) if not x.failed] or [b]
            benches.append(dataclasses.replace(
                b,
                value=statistics.median(x.value for x in same),
                per_second=statistics.median(x.per_second for x in same),
                cycles=statistics.median(x.cycles for x in same if x.cycles is not None)
                if any(x.cycles is not None for x in same) else None,
            ))
        logs.append(dataclasses.replace(log, benchmarks=benches))
    failed_first = {t.name for t in first.tests if not t.passed}
    extra = [t for r in repeats[1:] for t in r.tests if not t.passed and t.name not in failed_first]
    host = next((i for i, log in enumerate(logs) if log.tests), None)
    if extra and host is not None:
        logs[host] = dataclasses.replace(logs[host], tests=[*logs[host].tests, *extra])
    failure = next((r.failure for r in repeats if r.failure is not None), None)
    return dataclasses.replace(first, logs=logs, failure=failure,
                               metadata={**first.metadata, "repeats": len(repeats)})


def judge_candidate(
    candidate: dict[str, list[RunResult]],
    previous: dict[str, list[RunResult]],
    policy: Policy,
) -> Verdict:
    """Is the candidate at least as good as the previous release? The one comparison rule in use.

    Both sides come as repeats per matrix item, and the previous release is the baseline.
    A policy with learned limits (the statistical gate, ``buildbot_bsdkm/perf``) gets every
    repeat of both sides; with fixed limits only, the candidate is reduced to its medians so
    each item is judged once (the baseline's repeats are reduced to their median by the policy).
    """
    learned = any(getattr(r, "limit", "fixed") == "learned" for r in policy.regressions)
    if learned:
        runs = [r for reps in candidate.values() for r in reps]
    else:
        runs = [median_run(reps) for reps in candidate.values() if reps]
    baseline = [r for reps in previous.values() if reps and _usable(reps) for r in reps]
    # A QEMU TCG target's speeds are the emulator's, never a regression: evaluate leaves them ungated.
    return evaluate(runs, policy, baseline=baseline or None)


def candidate_outcomes(candidate: dict[str, list[RunResult]], policy: Policy) -> list[dict[str, Any]]:
    """The candidate's base outcomes: its runs judged on their own, not against the previous release
    (a slowdown against another release line is no failure a pull request could share)."""
    runs = [r for reps in candidate.values() for r in reps]
    if not runs:
        return []
    return [o.to_dict() for o in outcomes_of(runs, evaluate(runs, policy)) if o.fingerprint]


def _usable(reps: list[RunResult]) -> bool:
    """A previous run that failed before measuring anything is no baseline."""
    return any(r.benchmarks or r.tests for r in reps)


# --------------------------------------------------------------------------- running


@dataclass
class SideResult:
    side: str
    spec: SourceSpec
    tree: SourceTree | None = None
    fetch_failure: StageFailure | None = None
    runs: dict[str, list[RunResult]] = field(default_factory=dict)  # item label → repeats
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)  # item label → build facts

    def record(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "source": self.spec.describe(),
            "tree": self.tree.as_dict() if self.tree else None,
            "fetch_failure": dataclasses.asdict(self.fetch_failure) if self.fetch_failure else None,
        }


@dataclass
class ReleaseResult:
    items: list[MatrixItem]
    candidate: SideResult
    previous: SideResult
    verdict: Verdict
    repeats: int
    software_variant: str = "noasm"
    seconds: float = 0.0
    outputs: dict[str, Path] = field(default_factory=dict)
    comparison: dict[str, Any] = field(default_factory=dict)
    outcomes: list[dict[str, Any]] = field(default_factory=list)  # the candidate's, as base outcomes

    @property
    def passed(self) -> bool:
        cand_failed = any(r.failure is not None for reps in self.candidate.runs.values() for r in reps)
        return self.candidate.fetch_failure is None and self.verdict.accepted and not cand_failed


def _side_config(config: Config, spec: SourceSpec, build_cache: Path) -> Config:
    # Each side builds in its own area (the FreeBSD module's work tree is named by variant only).
    return dataclasses.replace(config, source=spec, cache_dir=build_cache)


def _fetch(side: SideResult, config: Config, say: Progress) -> None:
    # Both sides are often one repository: each gets its own cached work tree, or the second
    # fetch would check its commit out over the first side's tree before either is built.
    spec = dataclasses.replace(side.spec, slot=side.side) if isinstance(side.spec, GitSource) else side.spec
    try:
        side.tree = fetch_source(spec, cache=cache_root(config), timeout_s=config.timeout("fetch"),
                                 progress=say)
        say(f"{side.side}: {side.tree.origin} wolfSSL {side.tree.version} at {side.tree.path}")
    except StageError as e:
        side.fetch_failure = e.failure
        say(f"{side.side}: fetch FAILED ({e.failure.category}): {e.failure.message}")


def _run_fips(job: Job) -> None:
    """The FIPS round trip as the job's load, recorded like any stage (one step sequence)."""
    started = time.monotonic()
    config = job.config
    var = config.variants[job.variant]
    path = Path(job.need(SOURCE, "fetch")["path"])

    def build(hash_value: str) -> Path:
        kept = tuple(c for c in var.cflags if fipsmod.HASH_DEFINE not in c)
        cflags = (*kept, fipsmod.hash_cflag(hash_value))
        cfg = dataclasses.replace(config, variants={**config.variants,
                                                    job.variant: dataclasses.replace(var, cflags=cflags)})
        return kernel.build_module(cfg, job.target, job.variant, path, cache_root(cfg), job.jobs,
                                   job.build_log, job.patterns)

    def load(ko: Path, attempt: int) -> tuple[Any, Any]:
        with MEASURE_LOCK:
            outcome = kernel.load_module(config, job.target, ko, job.dir / f"vm-{attempt}")
        return outcome, kernel.parse_kernel_log(job.target, outcome.kernel_log)

    try:
        trip = fipsmod.fips_round_trip(build, load)
    except StageError as e:
        record_failure(job, e)
        return
    job.state["fips"] = trip.record()
    if trip.outcome is not None:
        job.put(OUTCOME, outcome_record(trip.outcome))
    job.need(STAGE_TIMES, "fetch")["load"] = round(time.monotonic() - started, 3)
    if not trip.passed:
        failure = StageFailure("load", trip.failure or "FIPS round trip failed", FailureCategory.REAL,
                               "fips", [str(job.dir)])
        record_failure(job, StageError(failure))
    job.save()


def _measure(job: Job) -> RunResult:
    flags = job.config.configure_flags(job.target, job.variant)
    if target_of(job, "load").release_fips(flags):
        if job.failure is None:
            _run_fips(job)
        run, _ = collect(job)
        run.failure = job.failure or run.failure
        run.stages = dict(job.state.get("stages", {}))
        run.metadata["fips"] = job.state.get("fips")
        return run
    return measure_phase(job)


def module_size(ko: str | None) -> dict[str, int] | None:
    """text/data/bss of a built ``.ko`` (binutils ``size``), None without a module or the tool."""
    if not ko or not Path(ko).is_file() or shutil.which("size") is None:
        return None
    proc = subprocess.run(["size", ko], capture_output=True, text=True, timeout=60, check=False)
    return parse_size(proc.stdout) if proc.returncode == 0 else None


REUSED_MARKS = ("# configure skipped:", "# module reused from cache:")


def _facts_file(job: Job) -> Path | None:
    """Where the build that made this job's build directory left its time and warnings."""
    built = job.state.get("build_dir") or (str(Path(job.state["ko"]).parent) if job.state.get("ko") else None)
    return Path(built + ".release-facts.json") if built else None


def _build_facts(job: Job) -> dict[str, Any]:
    """Build time and warnings of the build behind this job.

    A reused build directory (same inputs as an earlier run) prints no compiler output, so the
    build that made it records its time and warnings beside it and a reuse reads them back:
    the figures are always those of a real build, and ``reused`` says when it was not this run's.
    """
    stages = job.state.get("stages", {})
    try:
        log = job.build_log.read_text(errors="replace")
    except OSError:
        log = ""
    build_s: float | None = round(float(stages.get("configure", 0.0)) + float(stages.get("build", 0.0)), 2)
    # No build log at all (a kernel builder that kept its log elsewhere): the count is unknown, not 0.
    warnings: Counter[str] | None = compiler_warnings(log) if job.build_log.is_file() else None
    sidecar = _facts_file(job)
    reused = any(mark in log for mark in REUSED_MARKS)
    if reused:  # unknown unless the build that made the directory said
        build_s, warnings = None, None
    if sidecar is not None and job.failure is None:
        if reused and sidecar.is_file():
            known = json.loads(sidecar.read_text())
            build_s, warnings = known["build_s"], Counter(known["warnings"])
        elif not reused:
            # Read by another release run reusing this build, perhaps at this very moment.
            write_atomic(sidecar, json.dumps({"build_s": build_s, "warnings": dict(warnings or {})}))
    return {
        "build_s": build_s,
        "reused": reused,
        "build_log": str(job.build_log),
        "ko": job.state.get("ko"),
        "size": module_size(job.state.get("ko")),
        "warnings": None if warnings is None else dict(warnings),
        "warning_count": None if warnings is None else sum(warnings.values()),
        "failed": job.failure.message if job.failure else None,
    }


def run_release(
    config: Config,
    candidate: SourceSpec,
    previous: SourceSpec,
    out_dir: Path,
    *,
    variants: list[str] | None = None,
    targets: list[str] | None = None,
    host_release: str | None = None,
    repeats: int | None = None,
    progress: Progress = stderr_progress,
    write: Callable[[ReleaseResult, Path], dict[str, Path]] | None = None,
) -> ReleaseResult:
    """The whole release comparison into ``out_dir``; never raises ``StageError``."""
    started = time.monotonic()
    out_dir = out_dir.resolve()  # programs run from their build directories: paths must be absolute
    say = timed(progress, started, "release: ")
    host_release = host_release if host_release is not None else host_freebsd_release()
    items = plan_matrix(config, variants, targets, host_release)
    policy = load_policy(config.policy)
    repeats = max(1, repeats or config.release.repeats)
    out_dir.mkdir(parents=True, exist_ok=True)
    build_cache = cache_root(config) / "release"
    sides = {s: SideResult(s, spec) for s, spec in zip(SIDES, (candidate, previous), strict=True)}
    for side in sides.values():
        _fetch(side, config, say)
        f = side.fetch_failure
        if f is not None and f.category == FailureCategory.REAL:
            # The archive or repository answered and has no such thing: a wrong SOURCE, not a run.
            raise UnknownSourceError(f"--{side.side} {side.spec.describe()}: {f.message}")

    cand_tree, prev_tree = sides["candidate"].tree, sides["previous"].tree
    for item in items:
        if item.status != RUN:
            continue
        if cand_tree is not None and not has_target(cand_tree.path, item.target):
            item.status, item.note = NOT_IN_CANDIDATE, f"the candidate has no {target_dir(item.target)}/"
            continue
        if prev_tree is not None and not has_target(prev_tree.path, item.target):
            item.in_previous = False
            item.note = f"not in previous: {previous.describe()} has no {target_dir(item.target)}/"
    runnable = [i for i in items if i.status == RUN]
    say(f"{len(items)} matrix item(s), {len(runnable)} run here, {repeats} interleaved repeat(s)")

    jobs: dict[tuple[str, str, int], Job] = {}
    for side in sides.values():
        if side.tree is None:
            continue
        cfg = _side_config(config, side.spec, build_cache / side.side)
        for item in runnable:
            if side.side == "previous" and not item.in_previous:
                continue
            for rep in range(repeats):
                root = out_dir / "runs" / side.side / f"r{rep + 1}"
                job = Job(cfg, item.target, item.variant, root, jobs=1, progress=progress, started=started)
                job.state = {"target": item.target, "variant": item.variant, "stages": {}}
                stage_fetch(job, side.tree)
                job.state["stages"]["fetch"] = 0.0
                job.save()
                jobs[(side.side, item.label, rep)] = job

    first = [j for (s, _, rep), j in jobs.items() if rep == 0]
    parallel, per_build = concurrency(config, max(1, len(first)))
    for j in jobs.values():
        j.jobs = per_build
    say(f"building {len(first)} (side, item) pair(s), {parallel} at once, make -j{per_build}")
    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="bsdkm-release-build") as pool:
        list(pool.map(build_phase, first))
    for (side_name, label, rep), job in jobs.items():
        if rep == 0:
            sides[side_name].builds[label] = _build_facts(job)
        elif job.failure is None:  # the same inputs: configure is skipped, make finds nothing to do
            build_phase(job)

    # Interleaved: round r measures candidate then previous, round r+1 previous then candidate.
    for rep in range(repeats):
        order = SIDES if rep % 2 == 0 else SIDES[::-1]
        for item in runnable:
            for side_name in order:
                job = jobs.get((side_name, item.label, rep))
                if job is None:
                    continue
                say(f"measure {side_name} {item.label} (round {rep + 1}/{repeats})")
                run = _measure(job)
                if item.os_release:
                    run.metadata["os_release"] = item.os_release
                sides[side_name].runs.setdefault(item.label, []).append(run)

    verdict = judge_candidate(sides["candidate"].runs, sides["previous"].runs, policy)
    result = ReleaseResult(items, sides["candidate"], sides["previous"], verdict, repeats,
                           software_variant=config.release.software_variant)
    result.outcomes = candidate_outcomes(sides["candidate"].runs, policy)
    result.seconds = time.monotonic() - started
    result.outputs = (write or write_release)(result, out_dir)
    say(f"done in {result.seconds:.1f} s: {verdict.summary()}")
    return result




# --------------------------------------------------------------------------- output


def release_line(version: str | None) -> str:
    """``5.9`` for wolfSSL 5.9.2: the line whose baseline a candidate replaces."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{m.group(1)}.{m.group(2)}" if m else "unknown"


def release_comparison(result: ReleaseResult) -> dict[str, Any]:
    return comparison(
        items=[i.record() for i in result.items],
        candidate=result.candidate.runs,
        previous=result.previous.runs,
        builds={"candidate": result.candidate.builds, "previous": result.previous.builds},
        verdict=result.verdict,
        sources={"candidate": result.candidate.record(), "previous": result.previous.record()},
        software_variant=result.software_variant,
        repeats=result.repeats,
    )


def write_release(result: ReleaseResult, out_dir: Path) -> dict[str, Path]:
    """release.json/.md/.html and ``baseline-<line>.json`` (the candidate's medians) in ``out_dir``."""
    doc = release_comparison(result)
    doc["seconds"] = round(result.seconds, 1)
    result.comparison = doc
    tree = result.candidate.tree
    line = release_line(tree.version if tree else None)
    paths = {name: out_dir / name for name in ("release.json", "release.md", "release.html")}
    paths["release.json"].write_text(json.dumps(doc, indent=2, default=str))
    paths["release.md"].write_text(markdown_release(doc))
    paths["release.html"].write_text(html_release(doc))
    if result.outcomes:
        paths["outcomes"] = out_dir / RELEASE_OUTCOMES_FILE
        paths["outcomes"].write_text(json.dumps({"base_outcomes": result.outcomes}, indent=2))
    medians = [median_run(reps) for reps in result.candidate.runs.values() if reps]
    if medians:
        paths["baseline"] = out_dir / f"baseline-{line}.json"
        paths["baseline"].write_text(to_json(medians, release_line=line,
                                             source=result.candidate.spec.describe()))
    return paths
