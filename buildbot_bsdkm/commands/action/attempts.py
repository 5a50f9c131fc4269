"""``action retry`` and ``action vm-check``: run a step again only when ``classify`` calls its
failure infrastructure, under the same bounded rules as Buildbot (``retry_rules``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...config.bsdkm_yml import ConfigError, load_config
from ...model import FailureCategory, StageFailure
from ...pipeline.runtime.proc import run_streamed
from ...retry.classify_failure import Patterns, classify
from ...retry.decision import Attempt, RetryConfigError, RetrySettings, decide, worker_lost_failure
from ..exit_codes import EXIT_OK, UsageError
from . import workflow as actions
from .run_files import RUN_EXIT_CODE, SUMMARY_JSON, write_runner_files
from .workflow import Annotation, Level

# The last lines of an attempt are what classification needs; older ones are already on screen.
OUTPUT_TAIL_LINES = 400
TIMED_OUT_EXIT = 124  # what timeout(1) exits with; the step fails with it after a last timeout


def register_retry(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("retry", help="run CMD, retrying only infrastructure failures")
    p.add_argument("--stage", required=True,
                   help="what CMD does, for classification: fetch, deps, vm-boot, ...")
    p.add_argument("--attempts", type=int, default=3, help="at most this many runs in all (default 3)")
    p.add_argument("--delay", type=float, action="append", help="seconds before retry N (repeatable)")
    p.add_argument("--timeout", type=float, help="seconds one attempt may take")
    p.add_argument("--config", type=Path, help="bsdkm.yml, for its retry patterns and backoff")
    p.add_argument("--record", type=Path, help="append the attempts to this JSON file")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    p.set_defaults(func=run_retry)


def register_vm_check(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("vm-check", help="after a failed FreeBSD VM step: retry it (infrastructure) or not")
    p.add_argument("--out", type=Path, required=True, help="the out-dir the VM copies back")
    p.set_defaults(func=run_vm_check)


@dataclass(frozen=True)
class AttemptRun:
    """One execution of the wrapped command."""

    exit_code: int | None  # None: killed at its timeout
    output: str
    timed_out: bool
    seconds: float


@dataclass
class RetryOutcome:
    exit_code: int
    attempts: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


def run_with_retries(
    cmd: Sequence[str], stage: str, settings: RetrySettings, *, timeout: float | None = None,
    patterns: Patterns | None = None, sleep: Callable[[float], None] = time.sleep,
) -> RetryOutcome:
    """Run ``cmd`` until it passes, a real failure happens, or infrastructure retries run out."""
    history: list[Attempt] = []
    while True:
        number = len(history) + 1
        run = run_attempt(cmd, timeout)
        if run.exit_code == 0 and not run.timed_out:
            history.append(Attempt.passing(number, None))
        else:
            failure = classify(stage, exit_code=run.exit_code, output=run.output, timed_out=run.timed_out,
                               timeout_s=timeout, patterns=patterns)
            history.append(Attempt.failing(number, None, failure))
        decision = decide(history, settings)
        if not decision.retry:
            code = TIMED_OUT_EXIT if run.timed_out or run.exit_code is None else run.exit_code
            return RetryOutcome(code, decision.history_dicts(), decision.summary)
        print(Annotation(Level.WARNING, decision.summary,
                         title=f"bsdkm-ci: retrying {stage} (attempt {number + 1})").command(), flush=True)
        sleep(decision.delay_s)


def run_attempt(cmd: Sequence[str], timeout: float | None) -> AttemptRun:
    """Run once (``proc.run_streamed``), echoing output live with workflow commands off; keep its tail."""
    token = actions.stop_commands_token()
    tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)

    def echo(line: str) -> None:
        sys.stdout.write(line)
        tail.append(line)

    print(actions.stop_commands(token), flush=True)
    try:
        result = run_streamed(list(cmd), timeout_s=timeout, on_line=echo)
    except OSError as e:
        raise UsageError(f"retry: cannot run {cmd[0]!r}: {e.strerror}") from None
    finally:
        sys.stdout.flush()
        print(actions.resume_commands(token), flush=True)
    return AttemptRun(result.exit_code, "".join(tail), result.timed_out, result.seconds)


def retry_settings(
    attempts: int, delays: Sequence[float] | None, config: Path | None,
) -> tuple[RetrySettings, Patterns | None]:
    """Bounded-retry settings (never retrying a real failure) and the config's extra patterns."""
    patterns = None
    backoff: tuple[float, ...] = (10.0, 30.0)
    if config is not None:
        try:
            cfg = load_config(config)
        except ConfigError as e:
            raise UsageError(str(e)) from None
        backoff = tuple(cfg.retry.backoff_s)
        patterns = Patterns.with_extra(cfg.retry.infra_patterns, cfg.retry.real_patterns)
    if delays:
        backoff = tuple(delays)
    try:
        # No reproducibility runs: the action retries infrastructure only, never a real failure.
        settings = RetrySettings(max_infra_retries=attempts - 1, backoff_s=backoff,
                                 reproduce_reasons=frozenset())
    except RetryConfigError as e:
        raise UsageError(str(e)) from None
    return settings, patterns


def run_retry(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("no command given (use: bsdkm-ci action retry --stage S -- CMD ARGS...)")
    if args.attempts < 1:
        raise UsageError(f"--attempts must be at least 1, got {args.attempts}")
    settings, patterns = retry_settings(args.attempts, args.delay, args.config)
    outcome = run_with_retries(cmd, args.stage, settings, timeout=args.timeout, patterns=patterns)
    actions.say(f"bsdkm-ci: {args.stage}: {outcome.summary}", err=True)
    if outcome.exit_code != 0:
        print(Annotation(Level.ERROR, outcome.summary, title=f"bsdkm-ci: {args.stage} failed").command())
    if args.record is not None:
        append_record(args.record, args.stage, cmd, outcome)
    return outcome.exit_code


def append_record(path: Path, stage: str, cmd: Sequence[str], outcome: RetryOutcome) -> None:
    """Keep every wrapped step's attempts in one JSON list, for the report's retry history."""
    records: list[Any] = []
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise UsageError(f"retry record {path} is not a JSON list: {e}") from None
        if not isinstance(loaded, list):
            raise UsageError(f"retry record {path} is not a JSON list")
        records = loaded
    records.append({"stage": stage, "command": list(cmd), "exit_code": outcome.exit_code,
                    "summary": outcome.summary, "attempts": outcome.attempts})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")


def vm_failure(out: Path) -> StageFailure | None:
    """Why the VM step failed, or None when bsdkm-ci ran in it (then its results say what failed).

    The in-VM script always exits 0 once ``bsdkm-ci run`` has run and its results were copied
    back, so a failed step without them means the VM (boot, packages, sync) was lost: the
    worker-lost case of the Buildbot retry policy.
    """
    if (out / SUMMARY_JSON).is_file() or (out / RUN_EXIT_CODE).is_file():
        return None
    return worker_lost_failure("vm-boot")


def run_vm_check(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    failure = vm_failure(args.out)
    retry_it = failure is not None and failure.category == FailureCategory.INFRASTRUCTURE
    why = failure.message if failure is not None else "bsdkm-ci ran in the VM; its results decide"
    level = Level.WARNING if retry_it else Level.NOTICE
    print(Annotation(level, why, title="bsdkm-ci: FreeBSD VM step failed").command())
    write_runner_files(env, {"retry": "true" if retry_it else "false", "reason": why}, "")
    return EXIT_OK
