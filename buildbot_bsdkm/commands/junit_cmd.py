"""``bsdkm-ci junit LOG... -o FILE``: gate logs with a policy, write JUnit (and Markdown/HTML).

Text LOGs are parsed and form one run (``--variant`` on ``--target``). A LOG ending in
``.json`` is a results document (``bsdkm-ci parse --json`` / ``summary.json``) and brings
its own runs with their own variant and target names, so several variants can be gated
together, e.g. for the speedup gates: ``bsdkm-ci junit aesni.json noasm.json -o junit.xml``.

Exit 0 every check passed, 1 a test or threshold failed, 2 unusable input.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..cli import EXIT_FAILED, EXIT_OK, UsageError
from ..junit import junit_xml
from ..model import ModelError, RunResult, from_json
from ..parsers import ParseError, parse_file
from ..policy import Policy, PolicyError, Verdict, evaluate, load_policy
from ..report import html_report, markdown_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("junit", help="gate logs with a threshold policy and write JUnit XML",
                       description=__doc__.replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files, or results documents ending in .json")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="JUnit XML to write")
    p.add_argument("--variant", default="unknown", help="variant of the text LOGs (e.g. aesni-avx)")
    p.add_argument("--target", default="unknown", help="target of the text LOGs (e.g. freebsd-kmod)")
    p.add_argument("--policy", metavar="FILE", help="threshold policy YAML (default: policies/default.yml)")
    p.add_argument("--baseline", metavar="FILE", help="baseline results JSON for regression gates")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report here")
    p.add_argument("--html", metavar="FILE", help="also write the standalone HTML report here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    runs = load_runs(args.logs, args.variant, args.target)
    policy = read_policy(args.policy)
    baseline = read_results(args.baseline) if args.baseline else None
    verdict = evaluate(runs, policy, baseline)
    write_text(args.output, junit_xml(runs, verdict))
    if args.markdown:
        write_text(args.markdown, markdown_report(runs, verdict))
    if args.html:
        write_text(args.html, html_report(runs, verdict))
    print_verdict(verdict)
    return exit_status(verdict)


def load_runs(paths: Sequence[str], variant: str, target: str) -> list[RunResult]:
    """Results documents as they are; every text log together as one run."""
    runs: list[RunResult] = []
    text_logs = []
    for path in paths:
        if path.endswith(".json"):
            runs.extend(read_results(path))
            continue
        try:
            text_logs.append(parse_file(path))
        except ParseError as e:
            raise UsageError(str(e)) from None
    if text_logs:
        runs.insert(0, RunResult(variant, target, logs=text_logs))
    return runs


def read_results(path: str) -> list[RunResult]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot be read: {e}") from None
    try:
        runs = from_json(text, path)
    except ModelError as e:
        raise UsageError(str(e)) from None
    problem = type_problem(runs)
    if problem:
        raise UsageError(f"{path}: {problem}")
    return runs


_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
_RUN_FIELDS = {"variant": str, "target": str}
_LOG_FIELDS = {"source": str, "complete": bool, "clock_resolution": _OPTIONAL_NUMBER}
_BENCH_FIELDS = {"name": str, "value": _NUMBER, "unit": str, "per_second": _NUMBER,
                 "cycles": _OPTIONAL_NUMBER, "block_size": (int, type(None)), "error": (str, type(None))}
_TEST_FIELDS = {"name": str, "passed": bool, "error": (str, type(None)), "code": (int, type(None))}


def type_problem(runs: list[RunResult]) -> str | None:
    """The first field of a results document whose type the gates cannot use, or None.

    ``from_json`` checks the shape; this checks the values the policy computes with, so a
    hand-edited or foreign document is refused with its field named instead of crashing.
    """
    for obj, fields, where in _typed_fields(runs):
        problem = _field_problem(obj, fields, where)
        if problem:
            return problem
    return None


def _typed_fields(runs: list[RunResult]) -> Iterator[tuple[object, dict, str]]:
    for i, run in enumerate(runs):
        yield run, _RUN_FIELDS, f"runs[{i}]"
        for j, log in enumerate(run.logs):
            where = f"runs[{i}].logs[{j}]"
            yield log, _LOG_FIELDS, where
            for k, b in enumerate(log.benchmarks):
                yield b, _BENCH_FIELDS, f"{where}.benchmarks[{k}]"
            for k, t in enumerate(log.tests):
                yield t, _TEST_FIELDS, f"{where}.tests[{k}]"


def _field_problem(obj: object, fields: dict[str, type | tuple[type, ...]], where: str) -> str | None:
    for name, types in fields.items():
        value = getattr(obj, name)
        wrong_bool = isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,))
        if wrong_bool or not isinstance(value, types):
            return f"{where}.{name} has the wrong type: {value!r}"
    return None


def read_policy(path: str | None) -> Policy:
    try:
        return load_policy(path)
    except PolicyError as e:
        raise UsageError(f"bad policy: {e}") from None


def write_text(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{path}: cannot write: {e.strerror or e}") from None


def print_verdict(verdict: Verdict) -> None:
    print(verdict.summary())
    for note in verdict.notes:
        print(f"  note: {note}")
    for c in verdict.failures:
        print(f"  {c.run_label} {c.kind}{' (error)' if c.error else ''}: {c.message}")


def exit_status(verdict: Verdict) -> int:
    return EXIT_OK if verdict.passed else EXIT_FAILED
