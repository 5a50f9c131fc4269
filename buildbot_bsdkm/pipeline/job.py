"""One (target, variant) run: its directory, its ``state.json`` and the keys stages share in it.

A stage may run in a fresh process (one Buildbot step each), so whatever one stage leaves for
another is a key of ``state.json``. The keys are named here once, typed like pytest's ``StashKey``:
``job.get(KO)`` is a ``str`` wherever it is read.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

from ..config.bsdkm_yml import Config
from ..contract import Milestone, StageProgress
from ..model import StageFailure
from ..retry.classify_failure import Patterns

Progress = Callable[[str], None]

# Benchmarks measure the machine: never run one while another build or benchmark
# shares the cores. Builds may overlap each other; loads take this lock.
MEASURE_LOCK = threading.Lock()

T = TypeVar("T")


@dataclass(frozen=True)
class StateKey(Generic[T]):
    """A key of ``state.json`` and the type of what it holds."""

    name: str


# What the fetch stage found (``SourceTree.as_dict``).
SOURCE: StateKey[dict[str, Any]] = StateKey("source")
# Seconds each stage took, by stage name; a retry's earlier ones go to ATTEMPTS.
STAGE_TIMES: StateKey[dict[str, float]] = StateKey("stages")
ATTEMPTS: StateKey[list[dict[str, Any]]] = StateKey("attempts")
FAILURE: StateKey[dict[str, Any]] = StateKey("failure")
CONFIGURE_ARGS: StateKey[list[str]] = StateKey("configure_args")
# userspace: the configured build tree, its two programs, and each program's run.
BUILD_DIR: StateKey[str] = StateKey("build_dir")
PROGRAMS: StateKey[dict[str, str]] = StateKey("programs")
PROGRAMS_RUN: StateKey[list[dict[str, Any]]] = StateKey("programs_run")
# kernel targets: the built module, the first load cycle, and the rounds after it (``vm.<i>``).
KO: StateKey[str] = StateKey("ko")
OUTCOME: StateKey[dict[str, Any]] = StateKey("outcome")
REPEATS: StateKey[list[dict[str, Any]]] = StateKey("repeats")
# The rounds' order as drawn (``rounds.describe``), and [first count, last count] when they grew.
ROUND_ORDER: StateKey[str] = StateKey("round_order")
CONFIRM_ROUND_ORDER: StateKey[str] = StateKey("confirm_round_order")
EXTENDED: StateKey[list[int]] = StateKey("extended_rounds")
# The gate stage's verdict, and its summary when it did not accept the run.
VERDICT: StateKey[dict[str, Any]] = StateKey("verdict")
GATE_FAILED: StateKey[str] = StateKey("gate_failed")

# The names, for readers that hold the plain dict (the release driver, tests).
EXTENDED_KEY = EXTENDED.name


def stderr_progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class StageSkipped(Exception):
    """An earlier stage failed or has not run; the message says which."""


@dataclass
class Job:
    config: Config
    target: str
    variant: str
    out_root: Path
    jobs: int = 2
    progress: Progress = stderr_progress
    started: float = field(default_factory=time.monotonic)
    state: dict[str, Any] = field(default_factory=dict)
    # The base build's output root (``stage gate --base-out``): its run of this (target, variant)
    # is the gate's base instead of history.
    base_out: Path | None = None
    # contract.BASE_SIDE when this job is the PR's base built next to a head: its progress says so.
    side: str = ""
    # The benchmark round being measured (index, of how many) when base and head go in rounds.
    round: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.state_path.is_file():
            try:
                self.state = json.loads(self.state_path.read_text())
            except ValueError:
                self.state = {}
        self.state.setdefault("target", self.target)
        self.state.setdefault("variant", self.variant)
        self.state.setdefault(STAGE_TIMES.name, {})

    @property
    def dir(self) -> Path:
        return self.out_root / self.target / self.variant

    @property
    def state_path(self) -> Path:
        return self.dir / "state.json"

    @property
    def label(self) -> str:
        return f"{self.target}/{self.variant}"

    @property
    def patterns(self) -> Patterns:
        r = self.config.retry
        return Patterns.with_extra(r.infra_patterns, r.real_patterns)

    @property
    def build_log(self) -> Path:
        return self.dir / "build.log"

    @property
    def failure(self) -> StageFailure | None:
        f = self.state.get(FAILURE.name)
        if not f:
            return None
        return StageFailure.from_dict(f)

    @overload
    def get(self, key: StateKey[T]) -> T | None: ...
    @overload
    def get(self, key: StateKey[T], default: T) -> T: ...

    def get(self, key: StateKey[T], default: T | None = None) -> T | None:
        return self.state.get(key.name, default)  # type: ignore[no-any-return]

    def put(self, key: StateKey[T], value: T) -> None:
        self.state[key.name] = value

    def drop(self, key: StateKey[Any]) -> None:
        self.state.pop(key.name, None)

    def need(self, key: StateKey[T], stage: str) -> T:
        """What ``stage`` left under ``key``; StageSkipped when it has not run."""
        if key.name not in self.state:
            raise StageSkipped(
                f"{self.label}: run stage '{stage}' first (no {key.name} in {self.state_path})")
        return self.state[key.name]  # type: ignore[no-any-return]

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2, default=str))
        tmp.replace(self.state_path)

    def say(self, message: str) -> None:
        self.progress(f"[{time.monotonic() - self.started:7.1f}s] {self.label}: {message}")

    def reached(self, milestone: Milestone, round: tuple[int, int] | None = None) -> None:
        """Announce a milestone (a progress line, ``contract.read_progress``): the shells show it live."""
        index, of = round or (None, None)
        self.say(StageProgress(milestone, index, of, side=self.side).message)
