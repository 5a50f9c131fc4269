"""Stable failure signatures: a failure's kind plus a normalised title.

Two boots of one bug (other addresses, CPUs, pids, timestamps, temporary directories, source line
numbers) give one signature; two different functions or two different self-test algorithms never
do, so names are kept verbatim and only the numbers that vary from boot to boot are taken out.

    panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI
    selftest: AES-GCM (-216)
    kernel BUG: kernel NULL pointer dereference | wc_AesGcmEncrypt
    regression: AES-128-GCM-enc
    build: src/aes.c: error: use of undeclared identifier 'x'
    load: module load failed (exit status <n>)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..model import KernelEvent, RunResult
from ..parsers.kernel_shapes import SIGNATURE_HEADS
from .selftest_source import unnamed_check_signature

# Records after which a boot goes no further: a log they cut off is theirs.
_STOPS = frozenset({"panic", "fatal_trap", "bug", "oops", "gpf", "fpu", "sleep_with_lock"})
# Frames of the panic/trace machinery itself: never "the" function of a splat.
_MACHINERY = frozenset({
    "db_trace_self_wrapper", "db_trace_self", "kdb_backtrace", "vpanic", "panic", "kassert_panic",
    "malloc_dbg", "malloc", "uma_zalloc_arg", "uma_zalloc_debug", "witness_warn", "witness_checkorder",
    "__mtx_lock_flags", "_sleep", "trap_fatal", "trap_pfault", "trap", "calltrap", "kdb_enter",
    "dump_stack", "dump_stack_lvl", "__warn", "warn_slowpath_fmt", "report_bug", "handle_bug",
    "exc_invalid_op", "asm_exc_invalid_op", "die", "do_trap", "show_stack", "__schedule_bug",
})
MAX_TITLE = 200
# Text a title is normalised from: cut before the substitutions, so that the time they take is
# bounded whatever a module prints; wide enough that a long build path still shrinks to its end.
MAX_INPUT = 1024

_RX_SUBS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, f), r) for p, r, f in (
    (r"^\s*\[\s*\d+\.\d+\]\s*", "", 0),  # printk stamp
    (r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?", "<time>", 0),
    (r"\b\d\d:\d\d:\d\d(\.\d+)?\b", "<time>", 0),
))
# After the stamps: a source file where it was built (build directories differ per machine) keeps
# its last two parts (``_source_paths``); then the rest.
_RX_AFTER_PATHS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, f), r) for p, r, f in (
    (r"(?:/private)?(?:/var)?/tmp/\S*", "<tmp>", 0),
    (r"\b0x[0-9a-f]+\b", "<addr>", re.I),
    (r"\b[0-9a-f]{8,}\b", "<addr>", re.I),
    (r"\bCPU#?\s*(?::\s*)?\d+", "CPU", re.I),
    (r"\bcpuid\s*=\s*\d+", "cpuid", 0),
    (r"\b(pid|tid|PID|TID)(\s*(?:[:=]\s*)?)\d+", r"\1", 0),
    (r"\[([^\[\]:\s]+):\d+\]", r"[\1]", 0),  # [comm:pid]
    (r"\b(time|uptime)\s*=\s*\d+", r"\1", re.I),
    (r"\bL=\d+\s*", "", 0),  # wolfCrypt's source line in "error L=34448 code=-125"
    (r"\bline\s+\d+", "line", re.I),
    (r"\b\d+(?:\.\d+)?\s*(s|ms|us|secs?|seconds?)\b", r"<n> \1", 0),
    (r"\s+", " ", 0),
))


def normalise(text: str) -> str:
    """``text`` without what differs between two boots of one bug (addresses, CPUs, pids, times, ...)."""
    out = text.strip()[:MAX_INPUT]
    for rx, repl in _RX_SUBS:
        out = rx.sub(repl, out)
    out = _source_paths(out)
    for rx, repl in _RX_AFTER_PATHS:
        out = rx.sub(repl, out)
    return out.strip()[:MAX_TITLE]


# A source file's name: a run of these characters that ends in one of these suffixes; its line and
# column after it are dropped. Found run by run rather than by one pattern: a pattern that lets any
# prefix precede an optional directory and the name backtracks cubically on a long run of dashes.
_NAME_RUN = re.compile(r"[\w.+-]+")
_SOURCE_SUFFIX = re.compile(r"\.(?:cpp|asm|cc|mk|[chSsi])(?!\w)")
_LINE_COLUMN = re.compile(r":\d+(?::\d+)?(?!\w)")
_NO_PATH_AFTER = re.compile(r"[\w<]")  # a path never starts right after these (``<tmp>``, a name)


def _source_paths(text: str) -> str:
    """Each word's first source file name with the directory it is in, without the rest of its path
    and its line number: ``/usr/src/sys/kern/foo.c:12:`` -> ``kern/foo.c:``."""
    return re.sub(r"\S+", lambda m: _word_paths(m.group()), text)


def _word_paths(word: str) -> str:
    out: list[str] = []
    kept = start = 0
    while start < len(word) and (found := _source_at(word, start)) is not None:
        first, name_end, end = found
        out += [word[kept:start], word[first:name_end]]
        kept = start = end
        while start < len(word) and _NO_PATH_AFTER.match(word[start - 1]):
            start += 1
    out.append(word[kept:])
    return "".join(out)


def _source_at(word: str, start: int) -> tuple[int, int, int] | None:
    """From ``start``: where the kept part begins (the directory), where the name ends, where its
    line number ends; None when no source file name follows."""
    runs = _NAME_RUN.finditer(word, start)
    following = next(runs, None)
    while following is not None:
        run, following = following, next(runs, None)
        if following is not None and following.start() == run.end() + 1 and word[run.end()] == "/":
            end = _name_end(following.group())
            if end is not None:
                return run.start(), following.start() + end, _line_end(word, following.start() + end)
        end = _name_end(run.group())
        if end is not None:
            return run.start(), run.start() + end, _line_end(word, run.start() + end)
    return None


def _name_end(run: str) -> int | None:
    end = None
    for m in _SOURCE_SUFFIX.finditer(run):
        if m.start() > 0:  # a name before the suffix
            end = m.end()
    return end


def _line_end(word: str, at: int) -> int:
    m = _LINE_COLUMN.match(word, at)
    return m.end() if m else at


def function_name(text: str | None) -> str | None:
    """``AES_set_decrypt_key_AESNI+0x47/0x90 [libwolfssl]`` -> ``AES_set_decrypt_key_AESNI``."""
    if not text or not text.strip():
        return None
    name = text.strip().split()[0]
    name = re.sub(r"\+0x[0-9a-f]+(/0x[0-9a-f]+)?$", "", name, flags=re.I).removesuffix("()")
    # compiler clones of one function (.isra.0, .constprop.3, .part.1, .cold) are that function
    parts = name.split(".")
    while len(parts) > 1:
        if len(parts) > 2 and parts[-1].isdecimal() and parts[-2] in _CLONES:
            del parts[-2:]
        elif parts[-1] in _CLONES:
            del parts[-1]
        else:
            break
    name = ".".join(parts)
    return name or None


_CLONES = frozenset({"isra", "constprop", "part", "cold", "lto_priv", "llvm"})


def event_signature(ev: KernelEvent) -> str:
    """The signature of one kernel-trouble record."""
    label = SIGNATURE_HEADS.get(ev.kind, ev.kind)
    title = normalise(_event_title(ev))
    fn = function_name(ev.function) or _first_meaningful(ev.frames)
    text = f"{label}: {title}" if title else label
    return f"{text} | {fn}" if fn else text


def _event_title(ev: KernelEvent) -> str:
    d = ev.detail or {}
    for key in ("reason", "bug", "oops", "lockdep", "trap_message", "check", "lock", "wmesg"):
        value = d.get(key)
        if isinstance(value, str) and value.strip():
            if key == "bug" and ev.kind == "kasan":
                return value
            # "NULL pointer dereference, address: 0000000000000008": the address is per boot
            # (tried only where a run of spaces starts: linear in a long value)
            return re.sub(r"(?<!\s),?\s*address:\s*\S+$", "", value.strip()[:MAX_INPUT])
    if ev.kind == "bug" and d.get("file"):
        return f"at {d['file']}"
    if ev.kind == "gpf":
        return str(d.get("why") or "")
    return ""  # the header holds only numbers (CPU, seconds, pid): the function says which bug


def _first_meaningful(frames: list[str]) -> str | None:
    for f in frames:
        name = function_name(f)
        if name and name not in _MACHINERY:
            return name
    return None


def _field(check: Any, name: str, default: Any = None) -> Any:
    if isinstance(check, Mapping):
        return check.get(name, default)
    return getattr(check, name, default)


def signature(check: Any, run: RunResult | None = None) -> str:
    """The stable signature of a failed ``check`` (a ``Check`` or its ``to_dict``); ``run`` (the
    check's run) gives kernel records and stage failures their full evidence."""
    known = _field(check, "signature")
    if isinstance(known, str) and known:
        return known
    kind = str(_field(check, "kind", ""))
    name = str(_field(check, "name", ""))
    message = str(_field(check, "message", "") or "")
    detail = _field(check, "detail") or {}
    if kind == "kernel":
        return _kernel_signature(name, message, detail, run)
    if kind == "selftest":
        if name.startswith("summary:"):
            return "selftest: failed without naming an algorithm"
        unnamed = unnamed_check_signature(name, message)
        if unnamed is not None:  # only wolfcrypt_test's return code: its line, never the number itself
            return unnamed
        value = _field(check, "value")
        code = int(value) if isinstance(value, int | float) else _code(message)
        return f"selftest: {name} ({code})" if code is not None else f"selftest: {name}"
    if kind == "complete":
        return _complete_signature(name, message, run)
    if kind == "benchmark":
        code = _code(message)
        return f"benchmark: {name} ({code})" if code is not None else f"benchmark: {name}"
    block = detail.get("block") if isinstance(detail, Mapping) else None
    at = f" @{block}" if block not in (None, "") and f"@{block}" not in name else ""
    return f"{kind}: {name}{at}"


def _code(text: str) -> int | None:
    m = re.search(r"(?:code[=: ]\s*|failed:\s*|error\s+)(-\d+)\b", text) or re.search(r"\((-\d+)\)", text)
    return int(m.group(1)) if m else None


def _kernel_signature(name: str, message: str, detail: Mapping[str, Any], run: RunResult | None) -> str:
    if name == "kernel:more":
        return "kernel: more records"
    ev = _find_event(run, detail) if run is not None else None
    if ev is not None:
        return event_signature(ev)
    # No run at hand: what the check itself recorded.
    record_kind = str(detail.get("record_kind") or name.removeprefix("kernel:").split("@")[0])
    title = detail.get("title")
    if not isinstance(title, Mapping):  # older documents: the message ends "(reason) — classification"
        m = re.search(r"\(([^()]*)\) — ", message)
        title = {"reason": m.group(1)} if m else {}
    frames = detail.get("frames")
    ev = KernelEvent(record_kind, "", function=detail.get("function"), detail=dict(title),
                     frames=[str(f) for f in frames] if isinstance(frames, list) else [])
    return event_signature(ev)


def _find_event(run: RunResult, detail: Mapping[str, Any]) -> KernelEvent | None:
    lines = detail.get("lines") or [None]
    source, first = detail.get("source"), lines[0] if isinstance(lines, list) and lines else None
    for log in run.logs:
        if source is not None and log.source != source:
            continue
        for ev in log.kernel:
            if ev.line == first and (detail.get("record_kind") in (None, ev.kind)):
                return ev
    return None


def _complete_signature(name: str, message: str, run: RunResult | None) -> str:
    if name.startswith("stage:"):
        stage = name.removeprefix("stage:")
        failure = run.failure if run is not None and run.failure and run.failure.stage == stage else None
        text = failure.message if failure else message.split("): ", 1)[-1]
        reason = failure.reason if failure else None
        if reason == "panic" or _STAGE_PANIC.match(text):
            first = _first_kernel_event(run)
            if first is not None:
                return event_signature(first)
            return _stage_panic(text)
        if reason == "selftest" or _STAGE_SELFTEST.match(text):
            return _stage_selftest(text, run)
        for prefix in ("compile failed: ", "configure failed: "):
            if text.startswith(prefix):
                return f"build: {normalise(text.removeprefix(prefix))}"
        return f"{stage}: {normalise(text)}"
    if name == "logs":
        return "complete: no logs were collected"
    source = name.removeprefix("complete:")
    for log in run.logs if run is not None else []:
        if log.source == source and not log.complete:
            # a log cut off by a panic is that panic, wherever the boot stopped
            stops = [ev for ev in log.kernel if ev.kind in _STOPS]
            if stops:
                return event_signature(stops[0])
    reason = message.split(" is incomplete: ", 1)[-1] if " is incomplete: " in message else message
    return f"incomplete: {normalise(reason)}"


_STAGE_SELFTEST = re.compile(r"^(?:[\w-]+ kernel: )?self-test failed: (?P<rest>.*)$")
_STAGE_SELFTEST_NAMED = re.compile(r"^(?P<name>.+?) \((?:error (?P<code>-?\d+)|[^()]*)\)"
                                   r"(?: \(\+\d+ more\))?$")


def _stage_selftest(text: str, run: RunResult | None) -> str:
    """A stage that failed because a self-test did (retry/classify.py) is that self-test's failure:
    one signature for the stage check and the self-test's own check, as a panic's stage is the panic's."""
    for log in run.logs if run is not None else []:
        for t in log.tests:
            if not t.passed:
                detail = (t.error or "").strip()
                message = f"{t.name} self-test failed{': ' + detail if detail else ''}"
                return signature({"kind": "selftest", "name": t.name, "message": message, "value": t.code})
    m = _STAGE_SELFTEST.match(text)
    named = _STAGE_SELFTEST_NAMED.match(m["rest"]) if m else None
    if named is None:  # "the program reported failure": no algorithm named
        return "selftest: failed without naming an algorithm"
    code = named["code"]
    return f"selftest: {named['name']} ({int(code)})" if code is not None else f"selftest: {named['name']}"


def _first_kernel_event(run: RunResult | None) -> KernelEvent | None:
    if run is None:
        return None
    for log in run.logs:
        for ev in log.kernel:
            if ev.kind not in ("backtrace", "warning"):
                return ev
    return None


_STAGE_PANIC = re.compile(r"^(?:[\w-]+ kernel: )?kernel (?P<kind>panic|oops|bug|gpf|fatal_trap)"
                          r"(?: in (?P<fn1>[^:]+?))?: (?P<rest>.*?)(?: \(in (?P<fn2>[\w.]+)\))?$")


def _stage_panic(text: str) -> str:
    """A stage failure's "debug kernel: kernel panic: panic: why (in fn)" (classify.py,
    the freebsd-kmod-qemu target) as its record's signature, when the record itself is not at hand."""
    m = _STAGE_PANIC.match(text)
    if not m:
        return f"panic: {normalise(text)}"
    rest = m["rest"]
    kind = m["kind"]
    if kind == "panic":
        rest = re.sub(r"^(?:panic: |Kernel panic - not syncing: )", "", rest)
    elif kind == "bug":
        rest = re.sub(r"^BUG: ", "", rest)
    ev = KernelEvent(kind, rest, function=m["fn1"] or m["fn2"], detail={"reason": rest} if rest else {})
    return event_signature(ev)
