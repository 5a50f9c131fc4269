"""Kernel-log facts about the module's life (Linux §8 and FreeBSD §6 of log-formats.md).

Each rule is a cheap substring hint, an anchored regex and the LifecycleEvent kind.
Self-test/benchmark summary lines are handled by the engine (they close sections).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import LifecycleEvent

Detail = Callable[[re.Match[str]], dict[str, Any]]


def _no_detail(_m: re.Match[str]) -> dict[str, Any]:
    return {}


def _ints(**groups: str) -> Detail:
    def build(m: re.Match[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, group in groups.items():
            value = m[group]
            if value is not None:
                out[key] = int(value, 0)
        return out

    return build


def _strs(**groups: str) -> Detail:
    def build(m: re.Match[str]) -> dict[str, Any]:
        return {k: m[g] for k, g in groups.items() if m[g] is not None}

    return build


@dataclass(frozen=True)
class Rule:
    hint: str
    pattern: re.Pattern[str]
    kind: str
    detail: Detail = _no_detail


def _rule(hint: str, pattern: str, kind: str, detail: Detail = _no_detail) -> Rule:
    return Rule(hint, re.compile(pattern), kind, detail)


_FPU = r"fpu_states\[(?P<cpu>\d+)\] = (?P<nest>-?\d+), (?P<tid>-?\d+)"
_FPU_DETAIL = _ints(cpu="cpu", nest="nest", tid="tid")

RULES: tuple[Rule, ...] = (
    # --- Linux (§8)
    _rule("taints kernel", r"^(?:\S+: )?loading out-of-tree module taints kernel", "taint"),
    _rule("module verification failed", r"^(?:\S+: )?module verification failed", "signature_warning"),
    _rule("loaded", r"^wolfCrypt (?P<version>\S+) loaded\b", "loaded", _strs(version="version")),
    _rule(
        "cleanup complete",
        r"^wolfCrypt (?P<version>\S+) cleanup complete",
        "cleanup_complete",
        _strs(version="version"),
    ),
    _rule(
        "finit_module",
        r"^finit_module (?P<path>\S+): errno=(?P<errno>\d+)",
        "load_failed",
        _ints(errno="errno"),
    ),
    _rule("insmod", r"^insmod: (?:can't insert|ERROR)", "load_failed"),
    _rule("Kernel panic", r"^Kernel panic - not syncing", "panic"),
    # BUG:/Oops:/general protection fault/lockups are kernel-trouble records (kernel_trouble.py).
    # --- FreeBSD plain module (§6 A)
    _rule("wolfkmod_event", r"^info: wolfkmod_event: (?P<event>MOD_\w+)", "mod_event", _strs(event="event")),
    _rule("vecreg_init", r"^error: wolfkmod_vecreg_init: (?P<what>.*)", "fpu_error", _strs(what="what")),
    _rule(
        "FIPS_CORE_HASH_VALUE",
        r".*WOLFCRYPT_FIPS_CORE_HASH_VALUE=(?P<hash>[0-9A-Fa-f]+)",
        "fips_hash_mismatch",
        _strs(hash="hash"),
    ),
    _rule("In-core integrity", r"^(?:error: )?In-core integrity hash check failure", "fips_error"),
    _rule("could not compute new hash", r"^error: could not compute new hash", "fips_error"),
    _rule(
        "error: ",
        r"^error: (?:wolfCrypt_SetCb_fips failed|libwolfssl(?:_fips)? FIPS error|"
        r"wolfCrypt_GetStatus_fips failed|wc_RunAllCast_fips failed)(?P<what>.*)",
        "fips_error",
        _strs(what="what"),
    ),
    _rule(
        "FIPS",
        r"^info: (?:FIPS 140-3 .*self-test succeeded|wolfCrypt FIPS re-self-test succeeded)",
        "fips_selftest_passed",
    ),
    _rule(
        "wc_SetSeed_Cb", r"^error: wc_SetSeed_Cb failed: (?P<error>-?\d+)", "rng_error", _ints(error="error")
    ),
    _rule(
        "_Init failed",
        r"^error: (?:wolfCrypt|wolfSSL)_Init failed: (?P<what>.*)",
        "init_error",
        _strs(what="what"),
    ),
    _rule("benchmark passed", r"^info: wolfCrypt benchmark passed", "benchmark_passed"),
    _rule(
        "benchmark failed",
        r"^error: wolfcrypt benchmark failed: (?P<error>-?\d+)",
        "benchmark_failed",
        _ints(error="error"),
    ),
    _rule("loaded", r"^info: (?P<module>libwolfssl\w*) loaded", "loaded", _strs(module="module")),
    _rule("unloaded", r"^info: (?P<module>libwolfssl\w*) unloaded", "unloaded", _strs(module="module")),
    _rule(
        "cleanup complete",
        r"^info: (?P<module>libwolfssl\w*) (?P<version>\S+) cleanup complete",
        "cleanup_complete",
        _strs(module="module", version="version"),
    ),
    _rule(
        "Cleanup failed",
        r"^error: wolfCrypt_Cleanup failed: (?P<what>.*)",
        "cleanup_failed",
        _strs(what="what"),
    ),
    _rule(
        "module_register_init",
        r"^module_register_init: MOD_LOAD \((?P<module>[^,]+), (?P<handler>0x[0-9a-fA-F]+), "
        r"\S+\) error (?P<error>\d+)",
        "module_register_error",
        _ints(error="error"),
    ),
    _rule("kldload", r"^kldload: ", "kldload_error"),
    # --- FreeBSD crypto-register mode (§6 B); "libwolf0: " is already stripped
    _rule("driver loaded", r"^info: driver loaded: (?P<crid>-?\d+)", "crid_registered", _ints(crid="crid")),
    _rule(
        "crid unregistered",
        r"^info: crid unregistered: (?P<crid>-?\d+)",
        "crid_unregistered",
        _ints(crid="crid"),
    ),
    _rule("attach_out", r"^error: attach_out: (?P<errno>-?\d+)", "load_failed", _ints(errno="errno")),
    _rule(
        "crypto_get_driverid",
        r"^error: crypto_get_driverid failed: (?P<error>-?\d+)",
        "init_error",
        _ints(error="error"),
    ),
    _rule(
        "got crid",
        r"^error: attach: got crid (?P<crid>-?\d+), expected (?P<expected>-?\d+)",
        "init_error",
        _ints(crid="crid", expected="expected"),
    ),
    _rule("exiting detach", r"^info: exiting detach: (?P<error>-?\d+)", "detached", _ints(error="error")),
    _rule("detached", r"^detached$", "detached"),
    # --- FPU (§6 D)
    _rule("fpu_states", r"^info: wolfkmod_vecreg_exit: " + _FPU, "fpu_state", _FPU_DETAIL),
    _rule("fpu_states", r"^error: wolfkmod_vecreg_exit: " + _FPU, "fpu_error", _FPU_DETAIL),
    _rule(
        "wolfkmod_",
        r"^error: (?:wolfkmod_vecreg_(?:save|restore)|wolfkmod_fpu_kern_enter)(?P<what>.*)",
        "fpu_error",
        _strs(what="what"),
    ),
    # --- kernel RNG messages (§5), FreeBSD panics
    _rule("RDSEED", r"^WARNING: disabling RDSEED", "rng_warning"),
    _rule("panic", r"^panic: ", "panic"),
    _rule("Fatal trap", r"^Fatal trap \d+", "panic"),
)

# Events that mean the module failed, whatever the tests said.
FAILURE_KINDS = frozenset(
    {
        "load_failed",
        "cleanup_failed",
        "selftest_failed",
        "benchmark_failed",
        "fpu_error",
        "fips_hash_mismatch",
        "fips_error",
        "module_register_error",
        "kldload_error",
        "init_error",
        "rng_error",
        "module_error",
        "panic",
        "oops",
    }
)
SAVE_VECTOR_FAILED = "ERROR: SAVE_VECTOR_REGISTERS failed for benchmark run."


def match_lifecycle(line: str, lineno: int) -> LifecycleEvent | None:
    for rule in RULES:
        if rule.hint in line:
            m = rule.pattern.match(line)
            if m is not None:
                return LifecycleEvent(rule.kind, line.strip(), rule.detail(m), lineno)
    return None


def unmatched_bsd_error(line: str, lineno: int) -> LifecycleEvent | None:
    """Any other 'error: ...' from the FreeBSD module is still worth showing."""
    if line.startswith("error: "):
        return LifecycleEvent("module_error", line.strip(), {}, lineno)
    return None
