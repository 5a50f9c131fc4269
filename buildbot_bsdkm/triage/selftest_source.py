"""Naming a self-test failure that printed only wolfcrypt_test()'s return code, from the build's source.

The FreeBSD module prints ``error: wolfcrypt test failed: -1610718631`` and no algorithm. The number
encodes where the test failed (``WC_TEST_RET_ENC*`` in ``wolfcrypt/test/test.h``): a tag, a number
(an index, a wolfCrypt error code or an errno) and the ``test.c`` line. Everything needed to turn it
into ``SHA-256`` is read from that build's own files, never from a table of lines:

- ``test.h``: the encoding (line, multiplier, mask, tag shift) and what each tag carries;
- ``test.c``: the functions and their lines, who calls whom, and the name ``wolfcrypt_test`` prints
  when a test function fails (``TEST_FAIL("SHA-256  test failed!\\n", ret)``);
- ``wolfssl/wolfcrypt/error-crypt.h``: the error codes' names; an errno is named only from the
  target's own ``errno.h`` (FreeBSD and Linux number them differently).

A failure named this way gets the name the Linux module and userspace print for it, so its signature
is theirs (``selftest: SHA-256``) and moving lines of ``test.c`` changes nothing. Without the source
the line is all there is: the signature says the name is unknown and keeps the decoded line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contract import FailureReason, StageFailure
from ..model import LifecycleEvent, LogResult, SelfTest
from ..retry.classify_failure import selftest_failure

TEST_C = Path("wolfcrypt") / "test" / "test.c"
TEST_H = Path("wolfcrypt") / "test" / "test.h"
ERROR_H = Path("wolfssl") / "wolfcrypt" / "error-crypt.h"
UNNAMED = "wolfcrypt_test"  # the parser's name for a failure only the return code tells of
MAX_SOURCE_BYTES = 16 << 20  # test.c is ~2 MB; anything far larger is not a test.c

# What a tag's number is, by the argument its WC_TEST_RET_ENC_<X> macro passes.
INDEX, CODE, ERRNO, NOTHING = "index", "code", "errno", "nothing"
_WORDS = {INDEX: "vector", CODE: "code", ERRNO: "errno"}

class TestSourceError(ValueError):
    """The build's test sources are missing or are not what the decoder can read; says which and why."""

    __test__ = False  # a wolfCrypt test's source, not a pytest test class


@dataclass(frozen=True)
class Encoding:
    """``WC_TEST_RET_ENC(line, i, tag)`` = -(line + (i & mask) * multiplier + (tag << shift))."""

    multiplier: int
    mask: int
    shift: int
    tags: Mapping[int, str]  # tag value -> INDEX | CODE | ERRNO | NOTHING

    def split(self, value: int) -> tuple[int, int, int]:
        """(tag, number, line) of a return value, as ``WC_TEST_RET_DEC_*`` take it apart."""
        v = -value
        tag = v >> self.shift
        rest = v & ((1 << self.shift) - 1)
        return tag, rest // self.multiplier, rest % self.multiplier


_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>WC_TEST_RET_\w+)(?P<params>\([^)]*\))?"
                    r"(?P<body>(?:[^\n]*\\\n)*[^\n]*)", re.M)
_ENC_USE = re.compile(r"WC_TEST_RET_ENC\(\s*WC_TEST_RET_LN\s*,\s*(?P<arg>[^,]+?)\s*,"
                      r"\s*(?P<tag>WC_TEST_RET_TAG_\w+)\s*\)")
_NUM = r"(0x[0-9a-fA-F]+|\d+)[uUlL]*"


def read_encoding(test_h: str, where: str = "test.h") -> Encoding:
    """The encoding as ``test.h`` defines it; ``TestSourceError`` when its macros have another shape."""
    defined = [(m["name"], m["params"] or "", m["body"].replace("\\\n", " "))
               for m in _MACRO.finditer(test_h)]
    macros = {name: (params, body) for name, params, body in defined}
    enc = macros.get("WC_TEST_RET_ENC")
    if enc is None:
        raise TestSourceError(f"{where}: no WC_TEST_RET_ENC macro: this wolfSSL does not encode its "
                              "test return codes the way the decoder reads")
    body = enc[1]
    mul = re.search(r"\(\s*i\s*\)\s*&\s*" + _NUM + r"\s*\)\s*\)?\s*\*\s*" + _NUM, body)
    shift = re.search(r"\(\s*tag\s*\)\s*<<\s*" + _NUM, body)
    if mul is None or shift is None or not re.search(r"\(\s*line\s*\)\s*\+", body):
        raise TestSourceError(f"{where}: WC_TEST_RET_ENC has a shape the decoder does not know: "
                              f"{body.strip()}")
    values: dict[str, int] = {}
    for name, (params, text) in macros.items():
        if name.startswith("WC_TEST_RET_TAG_") and not params:
            m = re.fullmatch(r"\s*\(?\s*" + _NUM + r"\s*\)?\s*", text)
            if m:
                values[name] = int(m.group(1), 0)
    tags: dict[int, str] = {}
    for _, params, text in defined:  # each definition: ENC_ERRNO has one for errno.h and a fallback
        m = _ENC_USE.search(text)
        if m is None or m["tag"] not in values:
            continue
        arg = m["arg"].replace(" ", "")
        param = params.strip("()").strip()
        kind = (NOTHING if arg == "0" else ERRNO if arg == "errno" else
                CODE if param and arg in (f"-({param})", f"-{param}") else INDEX if arg == param else None)
        if kind is not None:
            tags.setdefault(values[m["tag"]], kind)
    if not tags:
        raise TestSourceError(f"{where}: no WC_TEST_RET_ENC_* macro says what its tags carry")
    return Encoding(int(mul.group(2), 0), int(mul.group(1), 0), int(shift.group(1), 0), tags)


@dataclass(frozen=True)
class Function:
    name: str
    first: int  # the line of its opening brace
    last: int  # the line of its closing brace
    calls: frozenset[str]


_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
# wolfcrypt_test reports a failed test through TEST_FAIL, or err_sys (what TEST_FAIL falls back to).
_TEST_FAIL = re.compile(r'\b(?:TEST_FAIL|err_sys)\s*\(\s*"(?P<msg>(?:[^"\\]|\\.)*)"')
_FUNCTION_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>\w+)\((?P<body>[^\n]*(?:\\\n[^\n]*)*)",
                             re.M)
_ASSIGNED_CALL = re.compile(r"\bret\s*=\s*(?P<fn>[A-Za-z_]\w*)\s*\(")
_NAME_OF_MESSAGE = re.compile(r"^(?P<name>\S(?:.*?[^ ])??) ++test failed!")  # linear, as wolfcrypt's
_KEYWORDS = frozenset({"if", "for", "while", "switch", "return", "sizeof", "defined", "do", "else"})
_TOKENS = re.compile(r"""/\*|\*/|//|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""")
# An unindented "type name(" line that is not a statement: how wolfSSL starts a function definition.
_DECLARATOR_LINE = re.compile(r"^(?:static|WOLFSSL_TEST_SUBROUTINE|int|void|wc_test_ret_t|THREAD_RETURN)\b"
                              r"[^;=]*\b[A-Za-z_]\w*\s*\([^;]*$")
_DECLARED = re.compile(r"\b(?P<name>[A-Za-z_]\w*)\s*$")


def _code_lines(text: str) -> list[str]:
    """Each line with its comments and string and character literals blanked."""
    out, in_comment = [], False
    for line in text.splitlines():
        kept, pos = [], 0
        for m in _TOKENS.finditer(line):
            tok = m.group(0)
            if in_comment:
                if tok == "*/":
                    in_comment, pos = False, m.end()
                continue
            if tok == "/*":
                kept.append(line[pos:m.start()])
                in_comment, pos = True, m.end()
            elif tok == "//":
                kept.append(line[pos:m.start()])
                pos = len(line)
                break
            elif tok[0] in "\"'":
                kept.append(line[pos:m.start()] + tok[0] * 2)
                pos = m.end()
        if not in_comment:
            kept.append(line[pos:])
        out.append("".join(kept))
    return out


def read_functions(test_c: str) -> list[Function]:
    """The function definitions of ``test.c``, with the lines of their braces and what they call.

    Braces are counted on the code alone (no comments, literals or preprocessor lines). Each branch
    of an ``#if`` starts from the depth the ``#if`` had and the deepest branch carries on, so
    alternatives that each open a brace count once. A ``{`` at depth 0 opens a function when the
    code since the last ``;`` or ``}`` ends in ``name(...)``. An unindented declarator line (wolfSSL
    starts every function so) always begins a new definition, so one miscounted ``#if`` cannot run
    a function into the next.
    """
    out: list[Function] = []
    depth, header, start, name = 0, "", 0, ""
    body: list[str] = []
    conds: list[list[int]] = []  # per open #if: [its depth, the deepest any branch ended at]
    continued = False

    def close(last: int) -> None:
        nonlocal name, header
        calls = frozenset(c for c in _CALL.findall(" ".join(body)) if c not in _KEYWORDS)
        out.append(Function(name, start, last, calls))
        name, header = "", ""

    for n, line in enumerate(_code_lines(test_c), 1):
        stripped = line.strip()
        if continued or stripped.startswith("#"):
            was_continued, continued = continued, stripped.endswith("\\")
            words = stripped.lstrip("#").split()
            word = words[0] if words and not was_continued else ""
            if word in ("if", "ifdef", "ifndef"):
                conds.append([depth, depth])
            elif word in ("elif", "else", "elifdef", "elifndef") and conds:
                conds[-1][1] = max(conds[-1][1], depth)
                depth = conds[-1][0]
            elif word == "endif" and conds:
                depth = max(conds.pop()[1], depth)
            continue
        if depth > 0 and _DECLARATOR_LINE.match(line):
            if name:
                close(n - 1)
            depth, header, conds = 0, "", [[0, 0] for _ in conds]
        pos = 0
        for m in re.finditer(r"[{};]", line):
            ch = m.group(0)
            piece = line[pos:m.start()]
            pos = m.end()
            if depth == 0:
                header += " " + piece
                if ch == "{" and not name:
                    name = _function_name(header)
                    start, body = n, []
                header = ""
            elif name:
                body.append(piece)
            if ch == "{":
                depth += 1
            elif ch == "}" and depth > 0:
                depth -= 1
                if depth == 0 and name:
                    close(n)
        if depth == 0:
            header += " " + line[pos:]
        elif name:
            body.append(line[pos:])
    return out


def _function_name(header: str) -> str:
    """``static int foo(int a, int b)`` -> ``foo``; ``""`` for an initializer, a struct or a block."""
    text = header.strip()
    if not text.endswith(")") or "=" in text.split("(", 1)[0]:
        return ""
    level = 0
    for i in range(len(text) - 1, -1, -1):
        level += {")": 1, "(": -1}.get(text[i], 0)
        if level == 0:
            m = _DECLARED.search(text[:i])
            ok = m is not None and m["name"] not in _KEYWORDS and bool(text[:m.start()].strip())
            return m["name"] if ok and m is not None else ""
    return ""


def read_test_names(test_c: str, functions: Sequence[Function]) -> dict[str, str]:
    """Test function -> the name ``wolfcrypt_test`` prints when it fails (``sha256_test`` -> ``SHA-256``)."""
    runner = next((f for f in functions if f.name == "wolfcrypt_test"), None)
    if runner is None:
        raise TestSourceError("test.c: no wolfcrypt_test function: not wolfCrypt's test.c")
    lines = test_c.splitlines()[runner.first:runner.last - 1]
    names: dict[str, str] = {}
    last_call: str | None = None
    for line in lines:
        m = _ASSIGNED_CALL.search(line)
        if m:
            last_call = m["fn"]
        f = _TEST_FAIL.search(line)
        if f and last_call is not None:
            msg = f["msg"].replace("\\n", "").strip()
            n = _NAME_OF_MESSAGE.match(msg)
            names.setdefault(last_call, n["name"].strip() if n else msg.rstrip(".!"))
            last_call = None
    if not names:
        raise TestSourceError("test.c: wolfcrypt_test calls no test through TEST_FAIL: not the shape "
                              "the decoder reads")
    return names


_ENUM_VALUE = re.compile(r"^\s*(?P<name>[A-Z_][A-Z0-9_]*)\s*=\s*(?P<value>-\d+)\s*,?\s*"
                         r"(?:/\*\s*(?P<text>.*?)\s*(?:\*/|$))?",
                         re.M)
_MARKER = re.compile(r"(?:^|_)(?:FIRST|LAST|MIN_CODE|MAX_CODE)_E$|^WC_SPAN\d")


def read_error_names(error_h: str) -> dict[int, tuple[str, str]]:
    """wolfCrypt error code -> (name, comment), from ``error-crypt.h``; range markers yield to real names."""
    out: dict[int, tuple[str, str]] = {}
    for m in _ENUM_VALUE.finditer(error_h):
        value, name = int(m["value"]), m["name"]
        if value not in out or (_MARKER.search(out[value][0]) and not _MARKER.search(name)):
            out[value] = (name, (m["text"] or "").strip())
    return out


_ERRNO_DEFINE = re.compile(r"^\s*#\s*define\s+(?P<name>E[A-Z0-9]+)\s+(?P<value>\d+)\b",
                           re.M)


def read_errno_names(errno_h: str) -> dict[int, str]:
    """errno -> name from a target's ``errno.h`` (FreeBSD's ``sys/sys/errno.h``, Linux's asm-generic)."""
    out: dict[int, str] = {}
    for m in _ERRNO_DEFINE.finditer(errno_h):
        out.setdefault(int(m["value"]), m["name"])
    return out


@dataclass(frozen=True)
class Decoded:
    """One return code, taken apart and placed in ``test.c``."""

    value: int
    tag: int
    carries: str  # INDEX | CODE | ERRNO | NOTHING | "unknown"
    number: int | None  # the index, the (negative) error code or the errno
    line: int
    number_name: str | None = None  # MEMORY_E (out of memory error), ENOMEM
    function: str | None = None  # sha256_kat_test: the function holding the line
    test_function: str | None = None  # sha256_test: the test wolfcrypt_test called
    name: str | None = None  # SHA-256: what wolfcrypt_test prints for that test
    source_text: str | None = None  # the line of test.c, stripped
    why_unnamed: str | None = None

    @property
    def what(self) -> str:
        """``vector 1``, ``code -125 (MEMORY_E)``, ``errno 12 (ENOMEM)``, or ``""``."""
        word = _WORDS.get(self.carries)
        if word is None or self.number is None:
            return ""
        return f"{word} {self.number}" + (f" ({self.number_name})" if self.number_name else "")

    @property
    def where(self) -> str:
        return f"test.c:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class TestSource:
    """The decoding rules of one wolfSSL tree (or its files' text)."""

    __test__ = False

    encoding: Encoding
    functions: list[Function]
    test_names: dict[str, str]
    lines: list[str]
    errors: dict[int, tuple[str, str]] = field(default_factory=dict)
    errnos: dict[int, str] = field(default_factory=dict)
    origin: str = "test.c"
    macro_calls: dict[str, frozenset[str]] = field(default_factory=dict)  # SaveDerAndPem -> _SaveDerAndPem

    @classmethod
    def from_texts(cls, test_c: str, test_h: str, error_h: str | None = None, errno_h: str | None = None,
                   origin: str = "test.c") -> TestSource:
        functions = read_functions(test_c)
        macros: dict[str, frozenset[str]] = {}
        for m in _FUNCTION_MACRO.finditer(test_c):
            called = frozenset(_CALL.findall(m["body"].split(")", 1)[-1])) - {m["name"]}
            macros[m["name"]] = macros.get(m["name"], frozenset()) | called
        return cls(read_encoding(test_h), functions, read_test_names(test_c, functions), test_c.splitlines(),
                   read_error_names(error_h) if error_h else {}, read_errno_names(errno_h) if errno_h else {},
                   origin, macros)

    @classmethod
    def from_tree(cls, tree: Path | str, errno_h: Path | str | None = None) -> TestSource:
        """The rules of a wolfSSL source tree; ``TestSourceError`` naming the file that is missing."""
        root = Path(tree)
        texts = {}
        for rel in (TEST_C, TEST_H, ERROR_H):
            path = root / rel
            if not path.is_file():
                if rel == ERROR_H:
                    continue
                raise TestSourceError(f"{path}: not found (the build's {rel.name} names the failing test)")
            if path.stat().st_size > MAX_SOURCE_BYTES:
                raise TestSourceError(f"{path}: larger than {MAX_SOURCE_BYTES} bytes: "
                                      f"not a wolfCrypt {rel.name}")
            texts[rel] = path.read_text(encoding="utf-8", errors="replace")
        errno_text = Path(errno_h).read_text(encoding="utf-8", errors="replace") if errno_h else None
        return cls.from_texts(texts[TEST_C], texts[TEST_H], texts.get(ERROR_H), errno_text,
                              str(root / TEST_C))

    def function_at(self, line: int) -> Function | None:
        for f in self.functions:
            if f.first <= line <= f.last:
                return f
        return None

    def tests_reaching(self, function: str) -> list[str]:
        """The tests of ``wolfcrypt_test`` that call ``function``, directly or through helpers and
        function-like macros, but not through another test (the crypto-callback test runs the
        SHA-256 test again; a failure in ``sha256_kat_test`` is the SHA-256 test's)."""
        if function in self.test_names:
            return [function]
        calls: dict[str, frozenset[str]] = {**self.macro_calls, **{f.name: f.calls for f in self.functions}}
        out = []
        for test in self.test_names:
            seen, todo = {test}, [test]
            while todo:
                for c in calls.get(todo.pop(), ()):
                    if c not in seen and (c == function or (c in calls and c not in self.test_names)):
                        seen.add(c)
                        todo.append(c)
            if function in seen:
                out.append(test)
        return out

    def decode(self, value: int) -> Decoded:
        tag, number, line = self.encoding.split(value)
        carries = self.encoding.tags.get(tag, "unknown")
        num: int | None = None if carries in (NOTHING, "unknown") else -number if carries == CODE else number
        num_name = None
        if carries == CODE and num is not None and num in self.errors:
            name, text = self.errors[num]
            num_name = f"{name}: {text}" if text else name
        elif carries == ERRNO and num is not None:
            num_name = self.errnos.get(num)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else None
        fn = self.function_at(line) if text is not None else None
        base = Decoded(value, tag, carries, num, line, num_name, source_text=text)
        if fn is None:
            why = (f"line {line} is past the end of {self.origin}" if text is None
                   else f"line {line} of {self.origin} is in no function")
            return _replace(base, why_unnamed=why)
        tests = self.tests_reaching(fn.name)
        if len(tests) != 1:
            why = (f"{fn.name} is called by no test of wolfcrypt_test" if not tests
                   else f"{fn.name} is called by {len(tests)} tests ({', '.join(tests)})")
            return _replace(base, function=fn.name, why_unnamed=why)
        return _replace(base, function=fn.name, test_function=tests[0], name=self.test_names[tests[0]])


def _replace(d: Decoded, **kw: Any) -> Decoded:
    return Decoded(**{**d.__dict__, **kw})


def decode_without_source(value: int) -> Decoded:
    """The line and number alone, as every wolfSSL release with ``WC_TEST_RET_ENC`` encodes them."""
    v = -value
    tag = v >> 29
    rest = v & ((1 << 29) - 1)
    number, line = divmod(rest, 100000)
    carries = {0: NOTHING, 1: CODE, 2: ERRNO, 3: INDEX}.get(tag, "unknown")
    num = None if carries in (NOTHING, "unknown") else -number if carries == CODE else number
    return Decoded(value, tag, carries, num, line, why_unnamed="the build's test.c was not at hand")


# ------------------------------------------------------------------------------------------ naming


def unnamed_value(test: SelfTest) -> int | None:
    """The return code of a failure only wolfcrypt_test's return value tells of (None: a named one)."""
    if test.passed or test.name != UNNAMED:
        return None
    return test.return_code


def first_failed_test(logs: Sequence[LogResult]) -> SelfTest | None:
    """The failed self-test a self-test stage failure names (``retry.classify_failure.selftest_failure``)."""
    return next((t for log in logs for t in log.tests if not t.passed), None)


def evidence(decoded: Decoded, console: str) -> str:
    """``(sha256_kat_test, vector 1) at test.c:5895: `ERROR_OUT(...)`; console: error: ...``."""
    inside = ", ".join(x for x in (decoded.function, decoded.what) if x)
    head = f"({inside}) at {decoded.where}" if inside else f"at {decoded.where}"
    text = f": `{decoded.source_text}`" if decoded.source_text else ""
    why = f"; name unknown: {decoded.why_unnamed}" if decoded.name is None and decoded.why_unnamed else ""
    return f"{head}{text}{why}; console: {console.strip()}"


def source_dir(source: Mapping[str, Any] | Path | str | None) -> Path | None:
    """The tree from ``state.json``'s ``source`` record (``SourceTree.as_dict``), a path, or None."""
    if isinstance(source, Mapping):
        source = source.get("path")
    return Path(source) if isinstance(source, str | Path) and str(source) else None


def load_source(source: Mapping[str, Any] | Path | str | None,
                errno_h: Path | str | None = None) -> tuple[TestSource | None, str | None]:
    """(rules, None), or (None, why there are none) for a tree that is absent or unreadable."""
    tree = source_dir(source)
    if tree is None:
        return None, "no source tree was recorded for this run"
    try:
        return TestSource.from_tree(tree, errno_h), None
    except (TestSourceError, OSError) as e:
        return None, str(e)


def name_failures(logs: Sequence[LogResult], failure: StageFailure | None,
                  source: TestSource | Mapping[str, Any] | Path | str | None,
                  errno_h: Path | str | None = None) -> StageFailure | None:
    """Name, in place, every failure of ``logs`` that printed only wolfcrypt_test's return code.

    ``source``: the rules (``TestSource``), or the build's tree (a path or ``state.json``'s ``source``
    record) to read them from. A named failure takes the name ``wolfcrypt_test`` prints for it (the
    Linux module's and userspace's), its ``error`` the function, vector or code, the ``test.c`` line
    and the console line. Without rules it keeps its name and says why, with the decoded line. A
    self-test stage failure is said again with the new name; returned (the same object when nothing
    changed). Naming a named log again changes nothing.
    """
    rules, why = (source, None) if isinstance(source, TestSource) else load_source(source, errno_h)
    first = first_failed_test(logs)
    stale = failure is not None and failure.reason is FailureReason.SELFTEST and first is not None \
        and first.name == UNNAMED  # the stage failure names the test by wolfcrypt_test's return code
    renamed = False
    for log in logs:
        for t in log.tests:
            value = unnamed_value(t)
            if value is None or t.decoded is not None:
                continue
            decoded = rules.decode(value) if rules is not None else _replace(
                decode_without_source(value), why_unnamed=why)
            t.error = evidence(decoded, t.console or "")
            t.decoded = decoded.to_dict()
            if decoded.carries == CODE:
                t.code = decoded.number
            if decoded.name is not None:
                t.name = decoded.name
                renamed = True
            _note_decoded(log, decoded)
    if renamed and failure is not None and stale:
        return _restated(failure, logs)
    return failure


def _note_decoded(log: LogResult, decoded: Decoded) -> None:
    for ev in log.lifecycle:
        if ev.kind == "selftest_failed" and ev.detail.get("return_code") == decoded.value:
            ev.detail.update({f"decoded_{k}": v for k, v in decoded.to_dict().items() if k != "value"})
            return
    log.lifecycle.append(LifecycleEvent("selftest_decoded", f"wolfcrypt_test returned {decoded.value}",
                                        decoded.to_dict(), None))


def _restated(failure: StageFailure, logs: Sequence[LogResult]) -> StageFailure:
    """The self-test stage failure said again, with the names the tests have now (and its part)."""
    again = selftest_failure(failure.stage, logs, list(failure.evidence))
    if again is None:
        return failure
    message = f"{failure.part}: {again.message}" if failure.part else again.message
    return StageFailure(failure.stage, message, failure.category, failure.reason, list(failure.evidence),
                        again.line, failure.part)


# ------------------------------------------------------------------------------------------ signatures


def unnamed_signature(value: int) -> str:
    """The signature of a failure whose test could not be named: the decoded line and number."""
    d = decode_without_source(value)
    what = f", {d.what}" if d.what else ""
    return f"selftest: name unknown ({d.where}{what})"


_OLD_FORM = re.compile(r"^selftest: wolfcrypt_test \((?P<value>-\d+)\)$")
_DECODED_AT = re.compile(r"\bat test\.c:(?P<line>\d+)\b")


def migrated_signature(sig: str) -> str | None:
    """A signature recorded before failures were named (``selftest: wolfcrypt_test (-1610718631)``)
    in today's form for an unnamed failure; None when ``sig`` is not of that old form."""
    m = _OLD_FORM.match(sig)
    if m is None:
        return None
    value = int(m["value"])
    return unnamed_signature(value) if decode_without_source(value).line else None


def unnamed_form(check: Any, run: Any = None) -> str | None:
    """The unnamed signature a named, decoded self-test failure (its check, or the stage check of
    ``run`` it failed) would have had without the source: what an old recorded outcome of it says."""
    get = check.get if isinstance(check, Mapping) else lambda k, d=None: getattr(check, k, d)
    detail = get("detail") or {}
    if get("kind") == "selftest":
        value = detail.get("return_code") if isinstance(detail, Mapping) else None
        named = get("name") != UNNAMED
    else:
        failure = getattr(run, "failure", None) if str(get("name") or "").startswith("stage:") else None
        test = first_failed_test(run.logs) if failure is not None and \
            failure.reason is FailureReason.SELFTEST else None
        value, named = (test.return_code, test.name != UNNAMED) if test is not None else (None, False)
    return unnamed_signature(value) if named and isinstance(value, int) else None
