"""The architecture page's folder map is drawn from the code: every package folder under
``buildbot_bsdkm/`` has its row, the map names no folder that is not there, and no path, module,
function or class the page names in backticks is gone (a module moved without its page following)."""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "buildbot_bsdkm"
PAGE = ROOT / "docs" / "architecture.md"
MAP_HEADING = "## Folder map"


def _folders() -> set[str]:
    """Every package folder (one with an ``__init__.py``) and every folder at the package's top (``_data/``),
    as ``a/`` or ``a/b/``, relative to the package."""
    packages = {f"{p.parent.relative_to(PACKAGE).as_posix()}/" for p in PACKAGE.rglob("__init__.py")
                if p.parent != PACKAGE and "__pycache__" not in p.parts}
    top = {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return packages | top


def _map_section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert MAP_HEADING in text, f"{PAGE.name} has no '{MAP_HEADING}' section"
    section = text.split(MAP_HEADING, 1)[1]
    return re.split(r"\n## ", section, maxsplit=1)[0]


def _map_rows() -> set[str]:
    """The folders the map's table names in its first column (`` `a/` `` or `` `a/b/` ``)."""
    return set(re.findall(r"^\|\s*`([\w/]+/)`", _map_section(), flags=re.M))


def test_every_package_folder_is_in_the_folder_map() -> None:
    assert sorted(_folders() - _map_rows()) == []


def test_the_folder_map_names_no_folder_that_is_not_there() -> None:
    assert sorted(_map_rows() - _folders()) == []


def test_the_loose_modules_row_names_exactly_the_loose_modules() -> None:
    row = next((ln for ln in _map_section().splitlines() if ln.startswith("| (top)")), "")
    named = set(re.findall(r"`(\w+\.py)`", row))
    assert named == {p.name for p in PACKAGE.glob("*.py")}


def test_every_path_the_page_names_exists() -> None:
    """A backticked ``x/y.py`` or ``x/`` is a path in the package or in the repository."""
    text = PAGE.read_text(encoding="utf-8")
    gone = []
    for token in sorted(set(re.findall(r"`([\w./-]+(?:/|\.py))`", text))):
        if token.startswith(("/", ".")) or "/" not in token and not token.endswith(".py"):
            continue
        path = token.removeprefix("buildbot_bsdkm/")
        if not path.endswith(".py") and f"{path.split('/')[0]}/" not in _folders():
            continue  # an output or repository folder (``vm/``, ``docs/``), not the package's
        if "/" not in path and path.endswith(".py"):
            # a bare module name: somewhere in the package
            if not any(PACKAGE.rglob(path)):
                gone.append(token)
            continue
        if not ((PACKAGE / path).exists() or (ROOT / path).exists()):
            gone.append(token)
    assert gone == []


def test_the_folder_map_is_the_generated_one() -> None:
    """The map between its markers is what ``scripts/architecture_map.py`` prints (``--write`` writes it)."""
    script = ROOT / "scripts" / "architecture_map.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert result.stdout.strip() in PAGE.read_text(encoding="utf-8")


def test_the_page_restates_no_api() -> None:
    """The page is the map and the reasoning: no per-module API sections to drift from the code."""
    text = PAGE.read_text(encoding="utf-8")
    assert "Public API" not in text and "## Modules and who calls what" not in text


# Names on the page that are not the package's although they look like a module's (``master`` is
# Buildbot's master object, ``pull_request`` a webhook payload's field, ``verdict`` a report's key).
FOREIGN = ("master.www.", "site.", "github.event.", "pull_request.base.", "perf[].", "runs[].", "detail.",
           "benchmark.", "bsdkm_ci.", "buildbot.steps", "verdict.")
# A file's name (``kernel.2.log``, ``kmod/freebsd/offload.sh``), not a dotted name of code.
FILE_NAME = re.compile(r"\.(py|log|cfg|sh|c|h|json|ya?ml|md|html|svg|xml|txt|tac|ko|txz|gz|xz|tgz)$")
# The toy plug-ins the page gives as its examples: one of each kind a newcomer adds.
TOY_EXAMPLES = ("tests/targets/toy_qemu/", "tests/unit/parsers/test_toy_log_format.py",
                "tests/unit/report/test_pull_request.py", "tests/unit/pipeline/test_targets_plugin.py")


def _module_files() -> dict[str, Path]:
    """Every module by its dotted name under the package (``perf.store``, ``pipeline.runtime``)."""
    out = {}
    for f in PACKAGE.rglob("*.py"):
        if "__pycache__" in f.parts:
            continue
        parts = f.with_suffix("").relative_to(PACKAGE).parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


@functools.cache
def _names() -> dict[str, dict[str, set[str] | None]]:
    """Per module, its top-level names, each with its members when it is a class (None otherwise)."""
    out: dict[str, dict[str, set[str] | None]] = {}
    for module, f in _module_files().items():
        names: dict[str, set[str] | None] = {}
        for node in ast.parse(f.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                members: set[str] = set()
                for n in ast.walk(node):
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        members.add(n.name)
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(
                        n, ast.AnnAssign) else []
                    members |= {t.id if isinstance(t, ast.Name) else t.attr for t in targets
                                if isinstance(t, (ast.Name, ast.Attribute))}
                names[node.name] = members
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names[node.name] = None
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update({n.id: None for n in ast.walk(t) if isinstance(n, ast.Name)})
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        out[module] = names
    return out


def _resolves(module: str, attrs: list[str]) -> bool:
    """``attrs`` is a name (and a member of it) in ``module``, or a submodule and a name in it."""
    if not attrs:
        return True
    names = _names()[module]
    if attrs[0] in names:
        members = names[attrs[0]]
        return len(attrs) == 1 or members is None or attrs[1] in members
    sub = f"{module}.{attrs[0]}"
    return sub in _names() and _resolves(sub, attrs[1:])


def _modules_named(dotted: str) -> list[str]:
    """The modules whose dotted name is ``dotted`` or ends with it (``rounds``: ``pipeline.rounds``)."""
    return [m for m in _names() if m == dotted or m.endswith("." + dotted)]


def _code_name_gone(token: str) -> bool:
    """A module path with a name after it (``perf/store.trend``), or a module's or class's dotted name
    (``targets.registered``, ``Job.reached``), that the code does not have. Anything else is not a
    name of the package's code and is not judged here."""
    token = re.sub(r"\(.*$", "", token).removeprefix("buildbot_bsdkm.").removeprefix("buildbot_bsdkm/")
    if token.startswith(FOREIGN) or not re.fullmatch(r"[\w/]+(\.\w+)+", token) or FILE_NAME.search(token):
        return False
    head, *attrs = token.split(".")
    if "/" in head:
        modules = _modules_named(head.replace("/", "."))
        return not any(_resolves(m, attrs) for m in modules)
    classes = [members for names in _names().values() for n, members in names.items()
               if n == head and members is not None]
    if classes:
        return not any(attrs[0] in members for members in classes)
    modules = [m for m in _names() if m.rpartition(".")[2] == head]
    if modules:
        return not any(_resolves(m, attrs) for m in modules)
    return False


def _backticked() -> set[str]:
    text = PAGE.read_text(encoding="utf-8")
    return {a or b for a, b in re.findall(r"``([^`\n]+)``|`([^`\n]+)`", text)}


def test_every_module_function_and_class_the_page_names_exists() -> None:
    """``pipeline/rounds.round_plan``, ``targets.registered()``, ``Verdict.from_dict``: each is there."""
    assert sorted(t for t in _backticked() if _code_name_gone(t)) == []


def _code_words() -> set[str]:
    """Every name the package's code spells: modules, definitions, names, attributes, arguments, and
    the words of its strings (JSON keys, failure reasons, property names)."""
    words = set()
    for module, f in _module_files().items():
        words.add(module.rpartition(".")[2])
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                words.add(n.name)
            elif isinstance(n, ast.Name):
                words.add(n.id)
            elif isinstance(n, ast.Attribute):
                words.add(n.attr)
            elif isinstance(n, ast.arg):
                words.add(n.arg)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                words.update(re.findall(r"\w+", n.value))
    return words


def test_every_bare_name_the_page_gives_is_spelled_in_the_code() -> None:
    """A backticked ``_remeasurer`` or ``release_report`` that no code spells is a name that went."""
    words = _code_words()
    assert sorted(t for t in _backticked() if re.fullmatch(r"[A-Za-z_]\w*", t) and t not in words) == []


def test_a_folder_row_names_modules_of_its_folder() -> None:
    """In the map, ``(`classify_failure`)`` after a folder's words is one of that folder's modules."""
    wrong = []
    for folder, what in re.findall(r"^\|\s*`([\w/]+/)`\s*\|(.*)\|\s*$", _map_section(), flags=re.M):
        for name in re.findall(r"\(`(\w+)`\)", what):
            if not (PACKAGE / folder / f"{name}.py").is_file() and not (PACKAGE / folder / name).is_dir():
                wrong.append(f"{folder}{name}")
    assert wrong == []


def test_the_toy_plugins_are_the_pages_examples() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert [t for t in TOY_EXAMPLES if f"`{t}`" not in text or not (ROOT / t).exists()] == []
