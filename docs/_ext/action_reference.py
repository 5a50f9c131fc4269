"""The ``bsdkm-action`` directive: the Action's inputs and outputs, read from ``action/action.yml``.

Like the CLI reference, the page shows what the action itself declares, so it cannot drift.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx

ACTION_YML = Path(__file__).resolve().parents[2] / "action" / "action.yml"


def _term(name: str, text: str) -> nodes.definition_list_item:
    item = nodes.definition_list_item()
    item += nodes.term("", "", nodes.literal(text=name))
    item += nodes.definition("", nodes.paragraph(text=text or "—"))
    return item


class ActionReference(Directive):
    has_content = False
    required_arguments = 1  # inputs | outputs

    def run(self) -> list[nodes.Node]:
        which = self.arguments[0]
        if which not in ("inputs", "outputs"):
            raise self.error(f"bsdkm-action takes inputs or outputs, not {which!r}")
        self.state.document.settings.record_dependencies.add(str(ACTION_YML))
        doc = yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))
        dl = nodes.definition_list()
        for name, spec in (doc.get(which) or {}).items():
            text = " ".join(str(spec.get("description", "")).split())
            default = spec.get("default")
            if which == "inputs" and default not in (None, ""):
                text += f" Default: {default}."
            if spec.get("required"):
                text += " Required."
            dl += _term(name, text)
        return [dl]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("bsdkm-action", ActionReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
