"""What ``iter_records`` yields besides the model's own records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model import Benchmark, KernelEvent, LifecycleEvent, LogFormat, Problem, SelfTest


@dataclass
class ParseSummary:
    """The last record of every stream: verdicts that need the whole log."""

    format: LogFormat
    complete: bool
    incomplete_reason: str | None = None
    selftest_summary: bool | None = None
    benchmark_complete: bool = False
    clock_resolution: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lines: int = 0  # lines read
    recognised: int = 0  # lines that meant something to a parser
    binary_lines: int = 0  # lines that were not text (NUL bytes, invalid UTF-8)

    @property
    def looks_binary(self) -> bool:
        return self.recognised == 0 and self.binary_lines > 0


Record = Benchmark | SelfTest | LifecycleEvent | Problem | KernelEvent | ParseSummary
