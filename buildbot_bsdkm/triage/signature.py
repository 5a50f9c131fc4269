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

from ..contract import FailureReason, StageFailure
from ..model import KernelEvent, RunResult
from ..parsers.kernel_shapes import SIGNATURE_HEADS
from .selftest_source import UNNAMED, first_failed_test, unnamed_signature

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
    check's run) gives kernel records and stage failures their full evidence.

    Made of the fields of the check, its run and the records in it, never of the words of a
    message: a message says what the project saw in its own words, which change."""
    known = _field(check, "signature")
    if isinstance(known, str) and known:
        return known
    kind = str(_field(check, "kind", ""))
    name = str(_field(check, "name", ""))
    message = str(_field(check, "message", "") or "")
    detail = _field(check, "detail") or {}
    if kind == "kernel":
        return _kernel_signature(name, detail, run)
    if kind == "selftest":
        if name.startswith("summary:"):
            return "selftest: failed without naming an algorithm"
        return _selftest_signature(name, _field(check, "value"), detail)
    if kind == "complete":
        return _complete_signature(name, message, detail if isinstance(detail, Mapping) else {}, run)
    if kind == "benchmark":
        code = detail.get("code") if isinstance(detail, Mapping) else None
        item = _field(check, "item")
        if code is None and run is not None and isinstance(item, int) and 0 <= item < len(run.benchmarks):
            code = run.benchmarks[item].code
        return f"benchmark: {name} ({code})" if code is not None else f"benchmark: {name}"
    block = detail.get("block") if isinstance(detail, Mapping) else None
    at = f" @{block}" if block not in (None, "") and f"@{block}" not in name else ""
    return f"{kind}: {name}{at}"


def _selftest_signature(name: str, code: Any, detail: Mapping[str, Any]) -> str:
    """A failed self-test by its name and wolfCrypt error code; one only wolfcrypt_test's return code
    told of (and the build's test.c could not name) by that code's test.c line, never the number."""
    return_code = detail.get("return_code")
    if name == UNNAMED and isinstance(return_code, int):
        return unnamed_signature(return_code)
    return f"selftest: {name} ({int(code)})" if isinstance(code, int | float) else f"selftest: {name}"


def _kernel_signature(name: str, detail: Mapping[str, Any], run: RunResult | None) -> str:
    if name == "kernel:more":
        return "kernel: more records"
    ev = _find_event(run, detail) if run is not None else None
    if ev is not None:
        return event_signature(ev)
    # No run at hand: what the check itself recorded.
    record_kind = str(detail.get("record_kind") or name.removeprefix("kernel:").split("@")[0])
    title = detail.get("title")
    if not isinstance(title, Mapping):
        title = {}
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


def _complete_signature(name: str, message: str, detail: Mapping[str, Any], run: RunResult | None) -> str:
    if name.startswith("stage:"):
        stage = name.removeprefix("stage:")
        failure = run.failure if run is not None and run.failure and run.failure.stage == stage else None
        if failure is None and isinstance(detail.get("failure"), Mapping):
            try:  # only the check at hand: the failure record it carries
                failure = StageFailure.from_dict(detail["failure"])
            except ValueError:
                failure = None
        if failure is None:
            return f"{stage}: {normalise(message)}"
        return _stage_signature(stage, failure, run, detail)
    if name == "logs":
        return "complete: no logs were collected"
    source = name.removeprefix("complete:")
    reason = detail.get("incomplete")
    for log in run.logs if run is not None else []:
        if log.source == source and not log.complete:
            # a log cut off by a panic is that panic, wherever the boot stopped
            stops = [ev for ev in log.kernel if ev.kind in _STOPS]
            if stops:
                return event_signature(stops[0])
            reason = reason or log.incomplete_reason
    return f"incomplete: {normalise(str(reason or message))}"


def _stage_signature(stage: str, failure: StageFailure, run: RunResult | None,
                     detail: Mapping[str, Any]) -> str:
    """A failed stage's signature: a panic's is its record's, a self-test's the test's (one signature
    for the stage check and the record's own check), a build's the compiler's line."""
    if failure.reason is FailureReason.PANIC:
        first = _first_kernel_event(run)
        if first is not None:
            return event_signature(first)
        if failure.line:  # the record itself is not at hand: the line the kernel printed
            why = re.sub(r"^(?:panic: |Kernel panic - not syncing: )", "", failure.line)
            return event_signature(KernelEvent("panic", why, detail={"reason": why} if why else {}))
        return f"panic: {normalise(failure.message)}"
    if failure.reason is FailureReason.SELFTEST:
        test = first_failed_test(run.logs) if run is not None else None
        if test is not None:
            return _selftest_signature(test.name, test.code, {"return_code": test.return_code})
        named = detail.get("test")  # only the check at hand: the test it recorded
        if isinstance(named, Mapping) and isinstance(named.get("name"), str):
            return _selftest_signature(named["name"], named.get("code"), named)
        return "selftest: failed without naming an algorithm"
    if failure.reason in (FailureReason.COMPILE, FailureReason.CONFIGURE) and failure.line:
        return f"build: {normalise(failure.line)}"
    return f"{stage}: {normalise(failure.message)}"


def _first_kernel_event(run: RunResult | None) -> KernelEvent | None:
    if run is None:
        return None
    for log in run.logs:
        for ev in log.kernel:
            if ev.kind not in ("backtrace", "warning"):
                return ev
    return None
