"""The package's import graph: no cycles, none hidden inside functions, and the core never imports a
shell. Read from the source with ``ast``, so an import inside a function counts as much as one at the
top, and ``from pkg import x`` counts as importing the package ``x`` lives in (unless the importer
lives in that package too and ``x`` is a module of it). Importing ``pkg.sub`` runs ``pkg/__init__``
first, so it is an import of every package above ``sub`` that the importer does not live in."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "buildbot_bsdkm"
SHELLS = {"commands", "buildbot", "github", "cli"}


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.with_suffix("").relative_to(PACKAGE.parent).parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


@functools.cache
def _graph(typing_too: bool = False) -> dict[str, set[str]]:
    """Who imports whom; ``typing_too`` adds the imports under ``if TYPE_CHECKING:``, which never run
    but are what a type checker follows (a cycle there is one the code hides, not one it lacks)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        typing_only = set() if typing_too else _typing_only(tree)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{target}.{a.name}" for a in node.names]
                # ``from . import sub`` names a package the importer lives in, so that package is loaded
                # before the importer anyway: the import is of ``sub`` alone. A name that is no module
                # (``from . import Check``) still comes from the package's ``__init__``.
                ancestor = m == target or m.startswith(target + ".")
                names = subs if ancestor and all(n in mods for n in subs) else [target] + subs
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found = {n for n in names if n in mods and n != m}
            graph[m] |= found | {p for n in found for p in _packages_above(n, m) if p in mods}
    return graph


def _typing_only(tree: ast.Module) -> set[int]:
    """The imports inside ``if TYPE_CHECKING:`` blocks (for type checkers only)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and (
                (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
                or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _packages_above(module: str, importer: str) -> list[str]:
    """The packages whose ``__init__`` importing ``module`` runs, the importer's own ones aside."""
    parts = module.split(".")
    above = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in above if not (importer == p or importer.startswith(p + "."))]


def _local_imports() -> list[tuple[str, int, str]]:
    """Every import of the package's own modules inside a function: (module, line, imported module)."""
    found = []
    for m, f in _modules().items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for fn in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)] if node.level else []
                    target = ".".join(base + ([node.module] if node.module else []))
                elif isinstance(node, ast.Import):
                    target = node.names[0].name
                else:
                    continue
                if target.split(".")[0] == "buildbot_bsdkm":
                    found.append((m, node.lineno, target))
    return sorted(set(found))


def _says_why(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or on the line above the group of imports it stands in."""
    if "#" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0 and (not lines[i].strip() or lines[i].lstrip().startswith(("import ", "from "))):
        i -= 1
    return i >= 0 and lines[i].lstrip().startswith("#")


def test_the_core_imports_its_own_modules_at_the_top() -> None:
    """The shells import some of the package inside functions (Buildbot and Twisted are extras); the
    core, which never needs an extra, has no reason to."""
    assert [(m, d) for m, _, d in _local_imports() if _group(m) not in SHELLS] == []


def test_every_function_local_import_of_the_package_says_why() -> None:
    """An import inside a function hides what a module depends on (and, as with a cycle, may hide a
    cycle): one stays local only for a reason its comment gives (an optional extra such as Buildbot or
    Twisted, a cycle that cannot be broken otherwise, a registry loaded on first use)."""
    modules = _modules()
    silent = [f"{modules[m].relative_to(PACKAGE.parent)}:{line}: {d}" for m, line, d in _local_imports()
              if not _says_why(modules[m].read_text(encoding="utf-8").splitlines(), line)]
    assert silent == []


def test_a_submodule_import_is_an_import_of_its_package() -> None:
    """``triage.outcomes`` importing a policy module inside a function once hid the cycle
    policy/__init__ -> evaluation -> triage.classify_checks -> triage.outcomes: importing ``policy.x``
    is an edge to ``policy`` too (``policy.checks`` below is any submodule, there or not)."""
    assert "buildbot_bsdkm.policy" in _graph()["buildbot_bsdkm.pipeline.gating"]  # it imports policy.pairing
    assert _packages_above("buildbot_bsdkm.policy.checks", "buildbot_bsdkm.triage.outcomes") == [
        "buildbot_bsdkm.policy"]
    assert _packages_above("buildbot_bsdkm.policy.checks", "buildbot_bsdkm.policy.rules") == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_core_has_no_import_cycle() -> None:
    graph = _graph()
    core = {m: {d for d in deps if _group(d) not in SHELLS} for m, deps in graph.items()
            if _group(m) not in SHELLS}
    assert _cycles(core) == []


def test_the_package_has_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_no_import_cycle_hides_behind_type_checking() -> None:
    """``if TYPE_CHECKING:`` keeps a cycle from running, not from being one: the two modules still
    depend on each other, and what they share belongs in a third."""
    assert _cycles(_graph(typing_too=True)) == []


def test_the_core_imports_no_shell() -> None:
    upward = sorted((m, d) for m, deps in _graph().items() if _group(m) not in SHELLS
                    for d in deps if _group(d) in SHELLS)
    assert upward == []


# The layers, bottom first: a package (or top-level module) may import its own layer and those below,
# never one above. policy/ and triage/ share a layer: the triage decides, inside the policy's
# evaluation, which failures block, and reads the policy's checks. config/ sits above them because
# bsdkm.yml names the known issues the triage reads.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"", "model", "checks", "targets", "contract", "support"}),
    frozenset({"parsers", "perf", "retry", "bisection"}),
    frozenset({"policy", "triage"}),
    frozenset({"config"}),
    frozenset({"report"}),
    frozenset({"pipeline"}),
    frozenset(SHELLS),
)
MAX_LOOSE_MODULES = 8


def _layer(group: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if group in layer)


def test_every_package_has_a_layer() -> None:
    unplaced = sorted({_group(m) for m in _graph()} - set().union(*LAYERS))
    assert unplaced == []


def test_no_import_runs_up_a_layer() -> None:
    upward = sorted((m, d) for m, deps in _graph().items() for d in deps
                    if _layer(_group(d)) > _layer(_group(m)))
    assert upward == []


def _subcommand(module: str) -> str | None:
    """The subcommand a module of ``commands/`` belongs to: ``x_cmd`` or the ``action`` package."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "commands":
        return None
    if parts[2].endswith("_cmd") or parts[2] == "action":
        return parts[2]
    return None


def test_no_subcommand_imports_another() -> None:
    """Subcommands share what they read and write through ``commands/io.py`` and ``matrix_run.py``."""
    crossing = sorted((m, d) for m, deps in _graph().items() for d in deps
                      if _subcommand(m) and _subcommand(d) and _subcommand(m) != _subcommand(d))
    assert crossing == []


def test_few_modules_lie_loose_at_the_package_top() -> None:
    loose = sorted(f.name for f in PACKAGE.glob("*.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


# What a shell may import of the pipeline: the drivers, the stage entry point (and the packages
# above them, whose ``__init__`` they run). The Action's attempt runner streams a child's output
# through the pipeline's process helper, the one tool a shell shares.
SHELL_PIPELINE_ENTRY = ("buildbot_bsdkm.pipeline.jobs.", "buildbot_bsdkm.pipeline.stages")
SHELL_PIPELINE_ALLOWED = {("buildbot_bsdkm.commands.action.attempts", "buildbot_bsdkm.pipeline.runtime.proc")}


def test_the_shells_import_only_the_drivers_and_the_stage_entry_point() -> None:
    above = {"buildbot_bsdkm.pipeline", "buildbot_bsdkm.pipeline.jobs", "buildbot_bsdkm.pipeline.runtime"}
    stray = sorted((m, d) for m, deps in _graph().items() if _group(m) in SHELLS for d in deps
                   if _group(d) == "pipeline" and not d.startswith(SHELL_PIPELINE_ENTRY) and d not in above
                   and (m, d) not in SHELL_PIPELINE_ALLOWED)
    assert stray == []


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A module past this holds more than one concern: split it by concern, not by line count."""
    long = sorted((len(f.read_text(encoding="utf-8").splitlines()), str(f.relative_to(PACKAGE.parent)))
                  for f in _modules().values())
    assert [(path, n) for n, path in long if n > MAX_MODULE_LINES] == []


# The modules each target package has by layout: its target object, its options, its worker's needs.
TARGET_LAYOUT = frozenset({"target.py", "options.py", "worker.py"})


def test_no_two_modules_share_a_name() -> None:
    """``perf/store.py`` and ``github/store.py`` read alike in a traceback, an editor's tab or a grep:
    a module's name says what it holds, apart from the files every target package has by layout."""
    seen: dict[str, list[str]] = {}
    for f in PACKAGE.rglob("*.py"):
        in_target = f.parent.parent.name == "targets" and f.parent.parent.parent.name == "pipeline"
        if f.name != "__init__.py" and not (in_target and f.name in TARGET_LAYOUT):
            seen.setdefault(f.name, []).append(str(f.relative_to(PACKAGE)))
    assert {name: sorted(paths) for name, paths in seen.items() if len(paths) > 1} == {}
