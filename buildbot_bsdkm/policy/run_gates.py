"""Gates on one run by itself: stages and logs complete, self-tests, failed items, required, floors."""

from __future__ import annotations

from ..checks import COMPLETE_PREFIX, CheckKind
from ..model import RATE_UNITS, Benchmark, FailureReason, RunResult
from ..parsers.formats import carries_wolfcrypt_benchmark
from . import kernel_health
from .context import Evaluation
from .measure import CYCLES, PER_SECOND, display_unit, fmt_num, matches, measure, metric_note
from .rules import FloorRule


def note_clocks(ev: Evaluation) -> None:
    """A note per clock-quantised run: its throughput under-reports, so cycles are gated instead."""
    for run in ev.runs:
        if not run.clock_quantised:
            continue
        res = max(log.clock_resolution or 0 for log in run.logs)
        how = ("throughput gates use cycles per byte/op instead"
               if ev.policy.metric == "auto" else f"policy metric is {ev.policy.metric}")
        ev.note(f"{run.target}/{run.variant}: benchmark clock is quantised ({res:g} s resolution): "
                f"its throughput under-reports by up to one tick per item; {how}.")


def check_run(ev: Evaluation, run: RunResult) -> None:
    """Every gate the policy asks of ``run`` on its own, kernel health included."""
    if ev.policy.complete:
        _complete(ev, run)
    if ev.policy.selftests:
        _selftests(ev, run)
    _benchmark_errors(ev, run)
    _required(ev, run)
    _floors(ev, run)
    for kc in kernel_health.checks(run, ev.policy.kernel):
        ev.add(run, **kc)


# -- stages, self-tests ------------------------------------------------


def _complete(ev: Evaluation, run: RunResult) -> None:
    if run.failure is not None:
        f = run.failure
        # what the failure's signature is made of, when only the check is at hand
        detail: dict = {"failure": {k: v for k, v in f.to_dict().items() if k != "evidence"}}
        test = next((t for t in run.tests if not t.passed), None)
        if f.reason is FailureReason.SELFTEST and test is not None:
            detail["test"] = {"name": test.name, "code": test.code, "return_code": test.return_code}
        ev.add(run, f"stage:{f.stage}", CheckKind.COMPLETE, False,
               f"{f.stage} failed ({f.category}{', ' + f.reason if f.reason else ''}): {f.message}",
               error=True, detail=detail)
    if not run.logs and run.failure is None:
        ev.add(run, "logs", CheckKind.COMPLETE, False, "no logs were collected for this run", error=True)
    for log in run.logs:
        if log.complete:
            ev.add(run, f"{COMPLETE_PREFIX}{log.source}", CheckKind.COMPLETE, True,
                   f"{log.source} is complete")
        else:
            reason = log.incomplete_reason or "the log ends before its closing line"
            ev.add(run, f"{COMPLETE_PREFIX}{log.source}", CheckKind.COMPLETE, False,
                   f"{log.source} is incomplete: {reason}", error=True, detail={"incomplete": reason})


def _selftests(ev: Evaluation, run: RunResult) -> None:
    for log in run.logs:
        for t in log.tests:
            detail = (t.error or "").strip()
            msg = (f"{t.name} self-test passed" if t.passed else
                   f"{t.name} self-test failed{': ' + detail if detail else ''}")
            # what the failure's signature is made of, when only the check is at hand
            fields = {"return_code": t.return_code, "console": t.console}
            ev.add(run, t.name, CheckKind.SELFTEST, t.passed, msg,
                   value=float(t.code) if t.code is not None else None,
                   detail={k: v for k, v in fields.items() if v is not None})
        if log.selftest_summary is False and not log.failed_tests:
            ev.add(run, f"summary:{log.source}", CheckKind.SELFTEST, False,
                   f"{log.source}: the self-test reported failure without naming an algorithm")
        elif log.selftest_summary is True and not log.tests:
            ev.add(run, f"summary:{log.source}", CheckKind.SELFTEST, True,
                   f"{log.source}: wolfCrypt self-test passed (summary line only)")


def _benchmark_errors(ev: Evaluation, run: RunResult) -> None:
    for i, b in enumerate(run.benchmarks):
        if b.failed:
            ev.add(run, b.name, CheckKind.BENCHMARK, False, f"{b.name}: {b.error}", item=i,
                   detail={} if b.code is None else {"code": b.code})


# -- per-run gates -----------------------------------------------------


def _required(ev: Evaluation, run: RunResult) -> None:
    # Only runs with a log wolfCrypt's benchmark prints in (the format's registration says): a
    # self-test-only run or an ``openssl speed`` run is not blamed for missing wolfCrypt items.
    if not any(carries_wolfcrypt_benchmark(log.format) for log in run.logs):
        return
    names = [b.name for b in run.benchmarks]
    for rule in ev.policy.required:
        if not rule.scope.covers(run):
            continue
        found = [n for n in names if matches(n, rule.pattern)]
        msg = (f"required benchmark {rule.pattern!r} present ({len(found)} item(s))" if found else
               f"required benchmark {rule.pattern!r} is missing from {run.target}/{run.variant}")
        ev.add(run, f"required:{rule.pattern}", CheckKind.REQUIRED, bool(found), msg,
               value=float(len(found)))


def _floors(ev: Evaluation, run: RunResult) -> None:
    for rule in ev.policy.floors:
        if not rule.scope.covers(run):
            continue
        for i, b in enumerate(run.benchmarks):
            if matches(b.name, rule.pattern) and not b.failed:
                _floor(ev, run, rule, b, i)


def _floor(ev: Evaluation, run: RunResult, rule: FloorRule, b: Benchmark, index: int) -> None:
    if rule.max_cycles is not None:
        v = measure(b, CYCLES)
        unit = display_unit(b, CYCLES)
        if v is None:
            ev.add(run, b.name, CheckKind.FLOOR, False, f"{b.name} has no cycles value to compare with "
                   f"the limit {fmt_num(rule.max_cycles)} {unit}", threshold=rule.max_cycles, unit=unit,
                   item=index)
            return
        ok = v <= rule.max_cycles
        word = "within" if ok else "above"
        ev.add(run, b.name, CheckKind.FLOOR, ok,
               f"{b.name} {fmt_num(v)} {unit} is {word} the limit {fmt_num(rule.max_cycles)} {unit}",
               value=v, unit=unit, threshold=rule.max_cycles, metric=CYCLES, item=index)
        return
    assert rule.min_value is not None and rule.unit is not None
    rate = measure(b, PER_SECOND)
    if rate is None:
        return
    v = rate / RATE_UNITS[rule.unit]
    ok = v >= rule.min_value
    note = metric_note(CYCLES, run) if run.clock_quantised else ""
    ev.add(run, b.name, CheckKind.FLOOR, ok,
           f"{b.name} {fmt_num(v)} {rule.unit} is {'at or above' if ok else 'below'} the floor "
           f"{fmt_num(rule.min_value)} {rule.unit}"
           + (" (throughput of a clock-quantised run under-reports)" if note else ""),
           value=v, unit=rule.unit, threshold=rule.min_value, metric=PER_SECOND, item=index)
