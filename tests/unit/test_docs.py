"""The docs site builds with warnings as errors, and its references cannot drift from the code.

- ``sphinx-build -W`` over ``docs/``: a broken internal link, a missing page in a toctree or a bad
  reference fails the suite.
- The configuration and policy references document exactly the keys the loaders accept
  (``doc_keys`` draws them from the loaders; a key added to a loader without a line on its page
  fails here).
- The CLI and Action references are Markdown generated from the parsers and ``action.yml``
  (``scripts/reference_docs.py``; their freshness is checked in ``test_reference_docs.py``); the site
  renders them with an anchor per subcommand.
- The README stays a README: short, linking into the docs, stating the two commands.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import doc_keys
import pytest
import yaml

from buildbot_bsdkm.config import bsdkm_yml as config
from buildbot_bsdkm.policy import rules

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def sphinx_build(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-E", "-b", "html",
                           str(src), str(out)], capture_output=True, text=True, timeout=300)


# ----------------------------------------------------------------------------- the build


def test_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    done = sphinx_build(DOCS, tmp_path / "html")
    assert done.returncode == 0, done.stderr
    cli = (tmp_path / "html" / "cli.html").read_text(encoding="utf-8")
    # Every subcommand and a nested one have their anchor on the site.
    from buildbot_bsdkm.cli import build_parser
    sys.path.insert(0, str(DOCS / "_ext"))
    from cli_reference import subcommands

    for name, _help, sub in subcommands(build_parser()):
        assert f'id="bsdkm-ci-{name}"' in cli, name
        for nested, _h, _s in subcommands(sub):
            assert f'id="bsdkm-ci-{name}-{nested}"' in cli, (name, nested)
    assert "--base-dir" in cli
    assert not re.search(r"–[a-z]", cli)  # an option in prose keeps its two hyphens, as on GitHub
    # The Action's inputs and outputs, as action.yml declares them.
    action = (tmp_path / "html" / "action.html").read_text(encoding="utf-8")
    declared = yaml.safe_load((ROOT / "action" / "action.yml").read_text(encoding="utf-8"))
    for name in [*declared["inputs"], *declared["outputs"]]:
        assert f"<span class=\"pre\">{name}</span>" in action, name


def _mini_site(tmp_path: Path, index: str) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DOCS / "conf.py", src / "conf.py")
    shutil.copytree(DOCS / "_ext", src / "_ext")
    (src / "_static").mkdir()
    (src / "index.md").write_text(index, encoding="utf-8")
    return src


def test_broken_links_and_references_fail_the_build(tmp_path: Path) -> None:
    index = "# Home\n\n## Part\n\nSee [a page](missing.md), [a part](#no-such-part) and {ref}`nowhere`.\n"
    done = sphinx_build(_mini_site(tmp_path, index), tmp_path / "html")
    assert done.returncode != 0
    for name in ("missing.md", "no-such-part", "nowhere"):
        assert name in done.stderr, (name, done.stderr)


def test_every_page_is_in_the_toctree() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^([a-z][a-z0-9-]*)$", index, re.M))
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    assert pages <= listed, pages - listed


# ----------------------------------------------------------------------------- references vs loaders


def _page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_the_configuration_reference_names_exactly_the_accepted_keys() -> None:
    missing, refused = doc_keys.drift(doc_keys.config_tree(), _page("configuration.md"))
    assert not missing, f"keys bsdkm.yml accepts but docs/configuration.md does not describe: {missing}"
    assert not refused, f"keys docs/configuration.md describes but bsdkm.yml refuses: {refused}"


def test_the_policy_reference_names_exactly_the_accepted_keys() -> None:
    missing, refused = doc_keys.drift(doc_keys.policy_tree(), _page("policy.md"))
    assert not missing, f"keys a policy accepts but docs/policy.md does not describe: {missing}"
    assert not refused, f"keys docs/policy.md describes but a policy refuses: {refused}"


def test_the_probe_finds_nested_and_listed_sections() -> None:
    c = doc_keys.config_tree()
    assert {"benchmark.max_repeats", "source.debian.suite", "variants.<name>.flags",
            "workers.<name>.password", "github.repo", "www.anonymous"} <= c.required()
    assert c.accepts("targets.<name>.kernel_version")  # a target's own option
    assert not c.accepts("targets.<name>.nope")
    assert not c.accepts("benchmark.nope") and not c.accepts("nope")
    p = doc_keys.policy_tree()
    assert {"regressions[].max_pct", "kernel.targets.<name>.oops", "perf.resolve_pct"} <= p.required()


def test_a_key_added_to_the_config_loader_without_docs_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = config.top_keys
    monkeypatch.setattr(config, "top_keys", lambda: (*keys(), "undocumented_section"))
    missing, _ = doc_keys.drift(doc_keys.config_tree(), _page("configuration.md"))
    assert "undocumented_section" in missing


def test_a_nested_key_added_to_the_policy_loader_without_docs_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "_SCOPE_KEYS", (*rules._SCOPE_KEYS, "undocumented_scope"))
    missing, _ = doc_keys.drift(doc_keys.policy_tree(), _page("policy.md"))
    assert {"required[].undocumented_scope", "floors[].undocumented_scope",
            "regressions[].undocumented_scope"} <= set(missing)


def test_a_documented_key_the_loader_refuses_fails() -> None:
    page = _page("configuration.md") + "\n`benchmark.warp_speed`\n: Not a real key.\n"
    _, refused = doc_keys.drift(doc_keys.config_tree(), page)
    assert refused == ["benchmark.warp_speed"]


# ----------------------------------------------------------------------------- the README


def test_the_readme_is_short_and_points_into_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 150
    assert max(len(line) for line in lines) <= 120
    assert not re.search(r"\bissue #?\d+", text, re.I)
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / target).exists(), target


def test_ci_runs_exactly_the_readme_test_command() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^exec bash scripts/test\.sh$", run, re.M)


def _in_code_block(text: str, number: int) -> bool:
    """Whether line ``number`` (1-based) of ``text`` is inside a fenced code block."""
    inside = False
    for line in text.splitlines()[: number - 1]:
        if line.startswith("```"):
            inside = not inside
    return inside


def test_product_docs_carry_no_issue_numbers() -> None:
    own = ["index.md", "getting-started.md", "how-it-works.md", "buildbot.md", "action.md",
           "configuration.md", "policy.md", "cli.md", "measured.md", "kernel-health.md", "linux-qemu.md",
           "freebsd-qemu.md", "offload.md", "release.md", "limits.md"]
    for name in own:
        text = _page(name)
        assert not re.search(r"\bissue #?\d+", text, re.I), name
        assert not re.search(r"\bload average", text, re.I), name
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), name
        # tables, and code blocks that show a file as it is, aside
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if not _in_code_block(text, n)]
        long = [n for n, line in lines if len(line) > 120 and not line.startswith("|")]
        assert not long, (name, long)
