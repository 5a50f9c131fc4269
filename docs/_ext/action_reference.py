"""The Action's inputs and outputs as Markdown tables, read from ``action/action.yml``.

The tables are written into ``action/README.md`` and ``docs/action.md`` (``scripts/reference_docs.py``),
so GitHub and the docs site show the same text, and the suite checks that it is what ``action.yml``
declares today.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
ACTION_YML = ROOT / "action" / "action.yml"
EXAMPLES = ROOT / "action" / "examples"


def load_action(path: Path | None = None) -> dict[str, Any]:
    path = path or ACTION_YML
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not an action metadata file")
    return doc


def _cell(text: str) -> str:
    """One table cell: one line, a ``|`` that does not end the cell, and a ``<`` outside code that is
    text, not the start of an HTML tag (``bsdkm/<target>/<variant>``)."""
    parts = " ".join(text.split()).split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts)).replace("|", "\\|")


def _code(text: str) -> str:
    # A value with a backtick in it needs a longer fence around it.
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def inputs_table(action: dict[str, Any]) -> str:
    rows = ["| Input | Default | What it does |", "| --- | --- | --- |"]
    for name, spec in (action.get("inputs") or {}).items():
        spec = spec or {}
        default = spec.get("default")
        shown = "" if default in (None, "") else _code(str(default))
        if spec.get("required"):
            shown = "(required)"
        rows.append(f"| {_code(name)} | {_cell(shown)} | {_cell(str(spec.get('description', '')))} |")
    return "\n".join(rows)


def outputs_table(action: dict[str, Any]) -> str:
    rows = ["| Output | What it holds |", "| --- | --- |"]
    for name, spec in (action.get("outputs") or {}).items():
        rows.append(f"| {_code(name)} | {_cell(str((spec or {}).get('description', '')))} |")
    return "\n".join(rows)


def example_files() -> list[Path]:
    """The example workflows (files with jobs; a configuration file beside them is not one)."""
    return [p for p in sorted(EXAMPLES.glob("*.yml"))
            if isinstance(doc := yaml.safe_load(p.read_text(encoding="utf-8")), dict) and "jobs" in doc]


def examples_in_full(order: list[str]) -> str:
    """Every example workflow as it is in ``action/examples/``, in ``order`` first, then the rest."""
    files = {p.name: p for p in example_files()}
    names = [n for n in order if n in files] + sorted(set(files) - set(order))
    parts = []
    for name in names:
        text = files[name].read_text(encoding="utf-8").rstrip("\n")
        parts.append(f"### {name}\n\n[`action/examples/{name}`](../action/examples/{name})\n\n"
                     f"```yaml\n{text}\n```")
    return "\n\n".join(parts)
