"""The generated reference text is current, and the pages read the same on GitHub as on the docs site.

``scripts/reference_docs.py`` writes the Action's inputs and outputs (from ``action/action.yml``) into
``action/README.md`` and ``docs/action.md``, the example workflows into ``docs/action.md`` and the CLI
reference (from the argparse parsers) into ``docs/cli.md``, as plain Markdown. Here: each part is what
its source says today, a change to the source shows up as a stale part, and the two pages use no MyST
syntax that GitHub would show as literal text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt
from script_module import load_script

ROOT = Path(__file__).resolve().parents[2]


reference_docs = load_script(ROOT / "scripts" / "reference_docs.py")
import action_reference  # noqa: E402  (docs/_ext, on the path the script puts it)


def test_every_generated_part_is_current() -> None:
    stale = [f"{p.page.relative_to(ROOT)} ({p.name})" for p, _, _ in reference_docs.stale()]
    assert stale == [], "run: python scripts/reference_docs.py --write"
    assert reference_docs.main([]) == 0


def test_a_new_input_in_action_yml_makes_the_tables_stale(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    action = yaml.safe_load((ROOT / "action" / "action.yml").read_text(encoding="utf-8"))
    action["inputs"]["brand-new-input"] = {"description": "An input the tables do not have yet.",
                                           "required": False, "default": "x"}
    changed = tmp_path / "action.yml"
    changed.write_text(yaml.safe_dump(action, sort_keys=False), encoding="utf-8")
    monkeypatch.setattr(action_reference, "ACTION_YML", changed)
    stale = {(p.page.name, p.name) for p, _, want in reference_docs.stale() if "brand-new-input" in want}
    assert stale == {("README.md", "action inputs"), ("action.md", "action inputs")}


def test_a_new_cli_option_makes_the_cli_reference_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    import buildbot_bsdkm.cli as cli

    plain = cli.build_parser

    def with_one_more():  # type: ignore[no-untyped-def]
        parser = plain()
        parser.add_argument("--brand-new-flag", help="a flag the page does not have yet")
        return parser

    monkeypatch.setattr(cli, "build_parser", with_one_more)
    stale = [(p.page.name, p.name) for p, _, want in reference_docs.stale() if "--brand-new-flag" in want]
    assert stale == [("cli.md", "cli reference")]


def test_the_tables_name_every_input_and_output_with_its_default() -> None:
    action = action_reference.load_action()
    for page in (ROOT / "action" / "README.md", ROOT / "docs" / "action.md"):
        text = page.read_text(encoding="utf-8")
        for name, spec in action["inputs"].items():
            default = str(spec.get("default") or "")
            row = next((line for line in text.splitlines() if line.startswith(f"| `{name}` |")), None)
            assert row, (page.name, name)
            assert default.replace("|", "\\|") in row, (page.name, name, default)
        for name in action["outputs"]:
            assert f"| `{name}` |" in text, (page.name, name)


def test_every_example_workflow_is_shown_in_full() -> None:
    page = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
    for path in action_reference.example_files():
        assert f"### {path.name}\n" in page
        assert path.read_text(encoding="utf-8").rstrip("\n") in page, path.name


_MYST_ONLY = re.compile(r"^(```|:::)\{[\w-]+\}|\{(ref|doc|term|literalinclude|bsdkm-[\w-]+)\}`", re.M)


@pytest.mark.parametrize("page", ["docs/action.md", "docs/cli.md", "action/README.md"])
def test_the_page_reads_on_github_as_on_the_site(page: str) -> None:
    """No MyST directive or role (GitHub shows them as code or as text), and every heading, table and
    code block is one that GitHub's CommonMark with tables renders."""
    text = (ROOT / page).read_text(encoding="utf-8")
    assert _MYST_ONLY.findall(text) == []
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    fences = [t for t in tokens if t.type == "fence"]
    assert all(t.info in ("yaml", "text", "sh", "") for t in fences), {t.info for t in fences}
    if page != "docs/cli.md":
        assert sum(t.type == "table_open" for t in tokens) == 2  # inputs and outputs
    # No text read as an HTML tag (GitHub drops unknown tags: `bsdkm/<target>` would lose a part).
    inline = [c for t in tokens if t.type == "inline" for c in (t.children or [])]
    html = [t.content for t in [*tokens, *inline] if t.type in ("html_inline", "html_block")]
    assert all(h.strip().startswith("<!--") for h in html), html


def test_the_cli_reference_has_a_heading_per_subcommand() -> None:
    from cli_reference import subcommands

    from buildbot_bsdkm.cli import build_parser

    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, _help, sub in subcommands(build_parser()):
        assert f"\n## bsdkm-ci {name}\n" in page, name
        for nested, _h, _s in subcommands(sub):
            assert f"\n### bsdkm-ci {name} {nested}\n" in page, (name, nested)
