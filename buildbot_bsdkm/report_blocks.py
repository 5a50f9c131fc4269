"""The pieces a report is built of (headings, paragraphs, tables), shared by ``report.py`` and the
modules that add sections to it (``offload.py``), so neither imports the other for them."""

from __future__ import annotations

from dataclasses import dataclass, field

# Row priorities: rows with a higher number are dropped first when trimming.
KEEP = 0
SELFTEST_ROW = 1
COMPARISON_ROW = 2
BENCHMARK_ROW = 3


@dataclass
class Row:
    cells: list[str]
    priority: int = KEEP
    weight: float = 0.0  # within a priority, rows with less weight go first


@dataclass
class Table:
    header: list[str]
    rows: list[Row] = field(default_factory=list)
    omitted: int = 0


@dataclass
class Block:
    kind: str  # "h2", "h3", "p", "note", "table"
    text: str = ""
    table: Table | None = None
