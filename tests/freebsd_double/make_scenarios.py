"""Builds the FreeBSD replay scenarios from the message catalogue and a real benchmark.

Nothing here was recorded on FreeBSD (no FreeBSD machine is reachable). Every
kernel line is either
  * a message from the bsdkm source catalogue (shared docs, log-formats.md §6),
    in the order the source prints it, or
  * a line of the real x_nofloatfmt userspace benchmark (the number style the
    FreeBSD module's benchmark uses), rewritten for the module's whole-second
    clock: every item "took 1.000 seconds", rates recomputed from the amount,
    cycle counts kept (they come from the TSC, which the clock bug leaves alone),
    and the first item cut to 40 % of its amount because it starts mid-second.

Run ``python tests/freebsd_double/make_scenarios.py`` to rewrite scenarios/*.json;
a test checks the committed files match this output.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
BENCH_FIXTURE = "userspace/x_nofloatfmt/bench_subset.txt"
SELFTEST_FIXTURE = "userspace/accel/testwolfcrypt.txt"

# The first item runs from mid-second to the next tick but is credited with a whole second.
FIRST_ITEM_SHARE = 0.4

SYM_LINE = re.compile(
    r"^(?P<desc>.*?\S)(?P<pad> +)(?P<amount>\d+\.\d) (?P<unit>\S+) took [\d.]+ seconds, "
    r"[\d.]+ (?P=unit)/s Cycles per byte = (?P<cpb>[\d.]+)$"
)
ASYM_LINE = re.compile(
    r"^(?P<head>.*? )(?P<count>\d+) ops took [\d.]+ sec, avg [\d.]+ ms, [\d.]+ ops/sec, (?P<tail>.+)$"
)

FREEBSD_BOOT = [
    "---<<BOOT>>---",
    "Copyright (c) 1992-2024 The FreeBSD Project.",
    "FreeBSD 14.1-RELEASE releng/14.1-n267679-10e31f0946d8 GENERIC amd64",
    'CPU: AMD EPYC 7B13 64-Core Processor (2450.00-MHz K8-class CPU)',
    "  Features2=0xfef83203<SSE3,PCLMULQDQ,SSSE3,FMA,CX16,SSE4.1,SSE4.2,MOVBE,POPCNT,AESNI,XSAVE,"
    "OSXSAVE,AVX,F16C,RDRAND,HV>",
    "real memory  = 4294967296 (4096 MB)",
    "FreeBSD/SMP: Multiprocessor System Detected: 2 CPUs",
    # An earlier run of the module: slicing must never pick these up.
    "info: wolfCrypt self-test passed.",
    "info: wolfCrypt benchmark passed.",
    "info: libwolfssl loaded",
    "info: libwolfssl unloaded",
]
SYSCTL = {
    "kern.log_console_output": "1",
    "kern.msgbufsize": "98304",
    "hw.model": "AMD EPYC 7B13 64-Core Processor",
    "hw.ncpu": "2",
    "kern.osrelease": "14.1-RELEASE",
}
KLDLOAD_ERROR = (
    "kldload: an error occurred while loading module {ko}. Please check dmesg(8) for more details."
)


def fixture_lines(fixtures: Path, rel: str) -> list[str]:
    return (fixtures / rel).read_text(encoding="utf-8").splitlines()


def whole_second_sym(m: re.Match[str], share: float) -> str:
    amount = float(m["amount"]) * share
    return (
        f"{m['desc']}{m['pad']}{amount:.1f} {m['unit']} took 1.000 seconds, "
        f"{amount:.3f} {m['unit']}/s Cycles per byte = {m['cpb']}"
    )


def whole_second_asym(m: re.Match[str]) -> str:
    count = int(m["count"])
    return (
        f"{m['head']}{count} ops took 1.000 sec, avg {1000.0 / count:.3f} ms, "
        f"{count:.3f} ops/sec, {m['tail']}"
    )


def kernel_benchmark(bench: Iterable[str]) -> list[str]:
    """The module's benchmark block: no banner, every item one whole second."""
    out: list[str] = []
    first = True
    for line in bench:
        if line.startswith("---") or line.startswith(" wolfSSL version"):
            continue
        if sym := SYM_LINE.match(line):
            out.append(whole_second_sym(sym, FIRST_ITEM_SHARE if first else 1.0))
            first = False
        elif asym := ASYM_LINE.match(line):
            out.append(whole_second_asym(asym))
            first = False
        else:
            out.append(line)
    return out


def verbose_selftest(selftest: Iterable[str]) -> list[str]:
    """Per-algorithm pass lines, which a verbose-debug module build prints."""
    return [line for line in selftest if line.endswith("test passed!")]


def bench_block(fixtures: Path) -> list[str]:
    return kernel_benchmark(fixture_lines(fixtures, BENCH_FIXTURE))


def scenario(name: str, about: str, **parts: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "about": about,
        "provenance": "constructed from the bsdkm message catalogue and the x_nofloatfmt benchmark; "
        "not recorded on FreeBSD",
        "ko": "libwolfssl.ko",
        "modules": ["libwolfssl"],
        "sysctl": dict(SYSCTL),
        "boot_log": list(FREEBSD_BOOT),
        "kldload": {"kernel_log": [], "stdout": [], "stderr": [], "exit": 0, "hang": False},
        "kldunload": {"kernel_log": [], "stdout": [], "stderr": [], "exit": 0, "unregisters": True},
    }
    for key, value in parts.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key].update(value)
        else:
            doc[key] = value
    return doc


def plain_load(bench: list[str]) -> list[str]:
    return [
        "info: wolfCrypt self-test passed.",
        *bench,
        "info: wolfCrypt benchmark passed.",
        "info: libwolfssl loaded",
    ]


def success(bench: list[str]) -> dict[str, Any]:
    return scenario(
        "success",
        "Default build (crypttests + kernel benchmarks): self-test passes, the benchmark runs, "
        "the module loads and unloads cleanly.",
        kldload={"kernel_log": plain_load(bench)},
        kldunload={"kernel_log": ["info: libwolfssl unloaded"]},
    )


def success_verbose(bench: list[str], selftest: list[str]) -> dict[str, Any]:
    return scenario(
        "success-verbose",
        "--enable-debug build (WOLFSSL_BSDKM_VERBOSE_DEBUG): module events, per-algorithm test lines "
        "(the userspace accel set, standing in for the module's) and the cleanup line at unload.",
        kldload={
            "kernel_log": [
                "info: wolfkmod_event: MOD_LOAD",
                *selftest,
                *plain_load(bench),
            ]
        },
        kldunload={
            "kernel_log": [
                "info: wolfkmod_event: MOD_UNLOAD",
                "info: libwolfssl 5.9.2 cleanup complete.",
                "info: libwolfssl unloaded",
            ]
        },
    )


def unload_fpu_orphan(bench: list[str]) -> dict[str, Any]:
    return scenario(
        "unload-fpu-orphan",
        "Loads and unloads, but vecreg teardown finds an orphaned FPU state on CPU 1 "
        "(always printed, not only with WOLFSSL_BSDKM_FPU_DEBUG).",
        kldload={"kernel_log": plain_load(bench)},
        kldunload={
            "kernel_log": [
                "error: wolfkmod_vecreg_exit: fpu_states[1] = 1, 100112",
                "info: libwolfssl unloaded",
            ]
        },
    )


def selftest_failure() -> dict[str, Any]:
    # ECC failure text as the Linux module printed it for real (L=39795, no code,
    # so the encoded value is -39795); the rest follows wolfkmod.c and kern_module.c.
    return scenario(
        "selftest-failure",
        "ECC self-test fails: MOD_LOAD returns ECANCELED, module_register_init sends MOD_UNLOAD "
        "(second cleanup reports ALREADY_E), logs error 85, kldload fails.",
        kldload={
            "kernel_log": [
                "ECC      test failed!",
                " error L=39795",
                "error: wolfcrypt test failed: -39795",
                "error: wolfCrypt_Cleanup failed: Operation was redundant or preempted",
                "module_register_init: MOD_LOAD (libwolfssl, 0xffffffff82e1c0d0, 0) error 85",
            ],
            "stderr": [KLDLOAD_ERROR],
            "exit": 1,
        },
        modules=[],
    )


def fips_hash_mismatch() -> dict[str, Any]:
    hash_value = "3B144A08F291DBA536324646BBD127447B8F222D29A135780E330351E0DF9F0F"
    rebuild = f'Rebuild with "WOLFCRYPT_FIPS_CORE_HASH_VALUE={hash_value}".'
    return scenario(
        "fips-hash-mismatch",
        "FIPS build with a placeholder core hash: the in-core integrity check fails at load; "
        "the last five lines are the ones bsdkm/README.md shows.",
        kldload={
            "kernel_log": [
                "error: libwolfssl FIPS error: In Core Integrity check FIPS error",
                "In-core integrity hash check failure.",
                rebuild,
                "error: wolfCrypt_GetStatus_fips failed: -203: In Core Integrity check FIPS error",
                "In-core integrity hash check failure.",
                rebuild,
                "error: wc_RunAllCast_fips failed at shutdown with return value 19",
                "info: libwolfssl unloaded",
                "module_register_init: MOD_LOAD (libwolfssl_fips, 0xffffffff842c28d0, 0) error 85",
            ],
            "stderr": [KLDLOAD_ERROR],
            "exit": 1,
        },
        modules=[],
    )


def load_hang(bench: list[str]) -> dict[str, Any]:
    return scenario(
        "load-hang",
        "The module stops part-way through the benchmark and kldload never returns; "
        "it also ignores SIGTERM, so only SIGKILL (or giving up) ends the wait.",
        kldload={
            "kernel_log": ["info: wolfCrypt self-test passed.", *bench[:8]],
            "hang": True,
            "ignore_term": True,
        },
    )


def crypto_register() -> dict[str, Any]:
    return scenario(
        "crypto-register",
        "--enable-freebsdkm-crypto-register: the libwolf driver attaches on nexus and registers "
        "crid 3; no self-test or benchmark runs in this mode. The newbus attach/detach lines "
        "are the usual newbus shape, not checked against FreeBSD.",
        modules=["nexus/libwolfssl"],
        kldload={
            "kernel_log": [
                "libwolf0: <wolfSSL crypto> on nexus0",
                "libwolf0: info: driver loaded: 3",
            ]
        },
        kldunload={"kernel_log": ["libwolf0: info: crid unregistered: 3", "libwolf0: detached"]},
    )


def unload_failure(bench: list[str]) -> dict[str, Any]:
    return scenario(
        "unload-failure",
        "Loads fine; at unload wolfCrypt_Cleanup fails, MOD_UNLOAD returns ECANCELED and the "
        "module stays loaded.",
        kldload={"kernel_log": plain_load(bench)},
        kldunload={
            "kernel_log": [
                "error: wolfCrypt_Cleanup failed: Bad mutex, operation failed",
                "error: wolfkmod_vecreg_exit: fpu_states[0] = 1, 100107",
            ],
            "stderr": ["kldunload: can't unload file: Operation canceled"],
            "exit": 1,
            "unregisters": False,
        },
    )


def console_not_logged(bench: list[str]) -> dict[str, Any]:
    doc = success(bench)
    doc["name"] = "console-not-logged"
    doc["about"] = (
        "As success, but kern.log_console_output=0: the markers never reach the message buffer, "
        "so slicing must fall back to aligning snapshots."
    )
    doc["sysctl"]["kern.log_console_output"] = "0"
    return doc


def msgbuf_wrapped(bench: list[str]) -> dict[str, Any]:
    doc = success(bench)
    doc["name"] = "msgbuf-wrapped"
    doc["about"] = (
        "As success, but the message buffer is only 2 KiB: the benchmark overwrites the marker "
        "and the earlier snapshot, so only the newest lines survive."
    )
    doc["sysctl"]["kern.msgbufsize"] = "2048"
    return doc


def build_all(fixtures: Path) -> dict[str, dict[str, Any]]:
    bench = bench_block(fixtures)
    selftest = verbose_selftest(fixture_lines(fixtures, SELFTEST_FIXTURE))
    docs = [
        success(bench),
        success_verbose(bench, selftest),
        unload_fpu_orphan(bench),
        selftest_failure(),
        fips_hash_mismatch(),
        load_hang(bench),
        crypto_register(),
        unload_failure(bench),
        console_not_logged(bench),
        msgbuf_wrapped(bench),
    ]
    return {d["name"]: d for d in docs}


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    fixtures = Path(argv[1]) if len(argv) > 1 else HERE.parents[2] / "shared" / "fixtures"
    if not (fixtures / BENCH_FIXTURE).is_file():
        missing = fixtures / BENCH_FIXTURE
        print(f"make_scenarios: {missing} not found (pass the fixtures dir)", file=sys.stderr)
        return 2
    SCENARIOS.mkdir(exist_ok=True)
    for name, doc in build_all(fixtures).items():
        (SCENARIOS / f"{name}.json").write_text(render(doc), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
