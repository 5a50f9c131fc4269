"""End-to-end reporting throughput: log -> records -> verdict -> JUnit + Markdown.

    .venv/bin/python bench/junit_throughput.py [--mb 100] [--batch 20000]

Concatenates the real fixtures (bench, CSV, self-test, kernel, openssl logs) until the
size is reached, streams it through ``parsers.iter_records``, and every ``--batch``
results forms one run (as a CI job would gate one variant) that is evaluated with the
default policy against a baseline (regression, speedup, required gates all run), then
rendered as JUnit XML and as a Markdown report. Prints MB of log processed end to end per
CPU second (and per wall second, which on a shared machine mostly measures the load) and
the CPU time per stage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.model import Benchmark, LogFormat, LogResult, RunResult, SelfTest  # noqa: E402
from buildbot_bsdkm.parsers import iter_records  # noqa: E402
from buildbot_bsdkm.policy import Verdict, evaluate, load_policy  # noqa: E402
from buildbot_bsdkm.report.junit import junit_xml  # noqa: E402
from buildbot_bsdkm.report.markdown import markdown_report  # noqa: E402

FIXTURES = Path(os.environ.get("BSDKM_SHARED", ROOT.parent / "shared")) / "fixtures"


def fixture_logs() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name.endswith((".txt", ".log"))
                  and not p.name.endswith(".sh.txt"))


def build_input(path: Path, megabytes: int) -> int:
    blob = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in fixture_logs())
    written = 0
    with path.open("wb") as f:
        while written < megabytes * 1_000_000:
            f.write(blob)
            written += len(blob)
    return written


STAGES = ("parse", "evaluate", "junit", "markdown")


@dataclasses.dataclass
class Timings:
    """CPU seconds per stage: on a shared machine wall time mostly measures the neighbours."""

    parse: float = 0.0
    evaluate: float = 0.0
    junit: float = 0.0
    markdown: float = 0.0
    junit_bytes: int = 0
    markdown_bytes: int = 0
    runs: int = 0
    results: int = 0
    checks: int = 0
    failed_checks: int = 0


def batches(path: Path, size: int, t: Timings) -> Iterator[RunResult]:
    """Runs of ``size`` results each, parsed lazily so parse time is measured apart."""
    benches: list[Benchmark] = []
    tests: list[SelfTest] = []
    n = 0
    start = time.process_time()
    with path.open("rb") as f:
        for record in iter_records(f):
            if isinstance(record, Benchmark):
                benches.append(record)
            elif isinstance(record, SelfTest):
                tests.append(record)
            if len(benches) + len(tests) >= size:
                t.parse += time.process_time() - start
                yield _run(n, benches, tests)
                n += 1
                benches, tests = [], []
                start = time.process_time()
    t.parse += time.process_time() - start
    if benches or tests:
        yield _run(n, benches, tests)


def _run(n: int, benches: list[Benchmark], tests: list[SelfTest]) -> RunResult:
    log = LogResult(f"batch{n}", LogFormat.WOLFCRYPT_BENCH, complete=True, benchmarks=benches, tests=tests,
                    benchmark_complete=True)
    return RunResult("aesni-avx", "userspace", logs=[log])


def gate(run: RunResult, baseline: list[RunResult], t: Timings) -> Verdict:
    policy = load_policy()
    start = time.process_time()
    verdict = evaluate([run], policy, baseline)
    t.evaluate += time.process_time() - start
    start = time.process_time()
    xml = junit_xml([run], verdict)
    t.junit += time.process_time() - start
    start = time.process_time()
    md = markdown_report([run], verdict)
    t.markdown += time.process_time() - start
    t.junit_bytes += len(xml.encode())
    t.markdown_bytes += len(md.encode())
    t.runs += 1
    t.results += len(run.benchmarks) + len(run.tests)
    t.checks += len(verdict.checks)
    t.failed_checks += len(verdict.failures)
    return verdict


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="log megabytes to process (default 100)")
    ap.add_argument("--batch", type=int, default=20000, help="results per gated run (default 20000)")
    args = ap.parse_args()
    t = Timings()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "concatenated.log"
        size = build_input(path, args.mb)
        baseline: list[RunResult] = []
        wall, cpu = time.perf_counter(), time.process_time()
        for run in batches(path, args.batch, t):
            if not baseline:
                baseline = [run]  # the first batch is every later batch's baseline
            gate(run, baseline, t)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    mb = size / 1e6
    out = {
        "log_mb": round(mb, 1), "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
        "end_to_end_mb_per_cpu_s": round(mb / cpu, 2), "end_to_end_mb_per_wall_s": round(mb / wall, 2),
        "results": t.results, "results_per_cpu_s": round(t.results / cpu), "runs": t.runs, "checks": t.checks,
        "failed_checks": t.failed_checks, "junit_mb": round(t.junit_bytes / 1e6, 1),
        "markdown_kb_per_run": round(t.markdown_bytes / max(t.runs, 1) / 1e3, 1),
        "cpu_seconds": {k: round(getattr(t, k), 2) for k in STAGES},
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
