"""Every regular expression that reads PR-controlled text runs in linear time.

A module prints what it likes on the console, and a PR chooses its benchmark names, build output and
result files; the master and the workers run these patterns over all of it. A pattern that
backtracks (nested or adjacent quantifiers over the same characters) turns one long line into
minutes of CPU on the master's reactor thread. So each pattern found in the folders that read such
text is run over long pathological inputs, under a bound generous for linear time and far below
what quadratic or worse needs at this length.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import buildbot_bsdkm

PACKAGE = Path(buildbot_bsdkm.__file__).parent
FOLDERS = ("triage", "parsers", "report", "retry", "policy")
RE_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
N = 20_000  # characters of each input: quadratic backtracking needs ~10^8 steps here, seconds
BOUND_S = 1.0  # per pattern and input; linear time takes milliseconds, quadratic here ~10 s or more

# Characters and pieces that drive the usual backtracking shapes: runs of one class (\s*\s*,
# \S*?x, [\w.]+/), repeats of an opener ([[[, (((), separators, digits after a word, hex.
ATOMS = (" ", "\t", "-", "a", "0", "x", ".", "/", ":", "(", "[", "<", "=", ",", "_", "@", "#", "|",
         "a/", "a.", "0x", "a ", "0 ", "a:", "0.", "a-", "- ", "a(", ": ", "=0", "/a")


def _patterns() -> Iterator[tuple[str, str, int]]:
    """(where, pattern, flags) of every literal pattern given to ``re`` in FOLDERS."""
    for folder in FOLDERS:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                        and node.func.attr in RE_CALLS and node.args):
                    continue
                pattern = _literal(node.args[0])
                if pattern is None:
                    continue
                flags = 0
                for kw in node.keywords:
                    if kw.arg == "flags":
                        flags = _flags(kw.value)
                if node.func.attr == "compile" and len(node.args) > 1:
                    flags = _flags(node.args[1])
                yield f"{path.relative_to(PACKAGE)}:{node.lineno}", pattern, flags
            yield from _table_patterns(path, tree)


def _table_patterns(path: Path, tree: ast.AST) -> Iterator[tuple[str, str, int]]:
    """Patterns kept in tables of (pattern, ...) tuples and compiled in a loop (signature's _RX_SUBS)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and node.elts and isinstance(node.elts[0], ast.Constant) \
                and isinstance(node.elts[0].value, str) and len(node.elts) == 3 \
                and isinstance(node.elts[1], ast.Constant) and _is_pattern(node.elts[0].value):
            yield f"{path.relative_to(PACKAGE)}:{node.lineno}", node.elts[0].value, _flags(node.elts[2])


def _is_pattern(text: str) -> bool:
    return any(c in text for c in "\\[(*+?") and _compiles(text)


def _compiles(text: str) -> bool:
    try:
        re.compile(text)
    except re.error:
        return False
    return True


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # f-strings: their literal parts, with placeholders as "x"
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                return None
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _flags(node: ast.AST) -> int:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re":
        return int(getattr(re, node.attr, 0))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _flags(node.left) | _flags(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    return 0


def _words(pattern: str) -> list[str]:
    """The literal words a pattern needs (``CPU``, ``address``, ``error``): inputs repeat them too."""
    return sorted({w for w in re.findall(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]", " ", pattern))})[:6]


def _inputs(pattern: str) -> Iterator[str]:
    for atom in ATOMS:
        yield atom * (N // len(atom))
    for word in _words(pattern):
        for tail in (" ", "", ":", "(", "0", " a"):
            piece = word + tail
            yield piece * (N // len(piece))
        yield word + " " * N
        yield word + "a" * N
    yield "(" + "a" * N
    yield "[" + "a" * N


PATTERNS = sorted(set(_patterns()))


def test_the_patterns_are_found() -> None:
    where = {w.split(":")[0] for w, _, _ in PATTERNS}
    assert "triage/signature.py" in where and len(PATTERNS) > 50, where


@pytest.mark.parametrize(("where", "pattern", "flags"), PATTERNS, ids=[w for w, _, _ in PATTERNS])
def test_pattern_is_linear_on_pathological_input(where: str, pattern: str, flags: int) -> None:
    rx = re.compile(pattern, flags)
    slow = []
    for text in _inputs(pattern):
        started = time.perf_counter()
        rx.findall(text)  # every start, as search and sub try them; the loop stays in C
        took = time.perf_counter() - started
        if took > BOUND_S:
            slow.append(f"{took:.2f} s on {text[:12]!r}... ({len(text)} chars)")
    assert not slow, f"{where}: {pattern!r} backtracks: " + "; ".join(slow[:3])


# -- the failure signature of a long console line (the master computes it for every PR report)


def test_signature_of_a_long_panic_line_is_quick() -> None:
    from buildbot_bsdkm.model import KernelEvent
    from buildbot_bsdkm.triage.signature import MAX_TITLE, event_signature, normalise

    for filler in ("-", "a/", ".", "a.", " ", "[", "CPU "):
        reason = filler * (64 * 1024 // len(filler))
        started = time.perf_counter()
        sig = event_signature(KernelEvent("panic", "panic: " + reason, detail={"reason": reason}))
        normalise("panic: " + reason)
        took = time.perf_counter() - started
        assert took < 0.5, f"{took:.2f} s for a line of {filler!r}"
        assert len(sig) <= MAX_TITLE + len("panic: ")


def test_signature_keeps_its_words() -> None:
    from buildbot_bsdkm.triage.signature import function_name, normalise

    assert normalise("/usr/src/sys/kern/subr_foo.c:123: error: x") == "kern/subr_foo.c: error: x"
    assert normalise("[ 12.5] CPU: 3 PID: 77 at /tmp/bsdkm-x/y.c:4 0xffff8000 12 ms") == \
        "CPU PID at bsdkm-x/y.c <addr> <n> ms"
    assert normalise("[modprobe:1234] ") == "[modprobe]"
    assert function_name("aes_gcm.isra.0.cold+0x1f/0x40 [libwolfssl]") == "aes_gcm"
    assert function_name("   ") is None
