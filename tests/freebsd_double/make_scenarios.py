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
# Recorded by freebsd-kmod-qemu: wolfSSL 5.9.2 aesni+intelasm, kldload/kldunload by
# kmod/freebsd/kldinit.c on the kit's WOLFKMX kernel (FreeBSD 15.0-CURRENT) under QEMU TCG.
REAL_KLDLOAD = HERE / "real" / "kldload-release-crypto_aesni.console.log"
# The crypto-register module kldloaded and kldunloaded the same way (no verbose boot, as on a worker).
REAL_CRYPTO_REGISTER = HERE / "real" / "kldload-release-crypto_crypto-register.console.log"
REAL_PROVENANCE = ("kldload/kldunload kernel lines recorded on FreeBSD 15.0-CURRENT (freebsd-kmod-qemu, "
                   "QEMU TCG, tests/freebsd_double/real/); boot log and sysctls constructed")
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
    """The module's benchmark block as FreeBSD printed it: the real recording, between the self-test
    verdict and the benchmark's own verdict (Math lines, header, items, "Benchmark complete").

    Reality differs from what kernel_benchmark() constructs: items after the first also run more
    than one whole second (RSA key gen "took 4.000 sec"), and a symmetric item's amount is not its
    rate times the seconds (``23.1 MiB took 1.000 seconds, 23.755 MiB/s``): the rate is the one to
    trust. The cycle counts keep two-digit fractions (``64916578.10 Cycles/op``).
    """
    lines = REAL_KLDLOAD.read_text(encoding="utf-8").splitlines()
    start = lines.index("info: wolfCrypt self-test passed.") + 1
    end = lines.index("info: wolfCrypt benchmark passed.")
    return lines[start:end]


def between_markers(path: Path, begin: str, end: str) -> list[str]:
    """The kernel's lines between two ``### bsdkm-ci:`` markers of a recorded console (kldinit's)."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = lines.index(f"### bsdkm-ci: {begin}") + 1
    stop = next(i for i, ln in enumerate(lines) if i >= start and ln.startswith(f"### bsdkm-ci: {end}"))
    return [ln for ln in lines[start:stop] if not ln.startswith("### bsdkm-ci:")]


def scenario(name: str, about: str, **parts: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "about": about,
        "provenance": "constructed from the bsdkm message catalogue around the benchmark block recorded "
        "on FreeBSD (tests/freebsd_double/real/); not recorded on FreeBSD as a whole",
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
        provenance=REAL_PROVENANCE,
        real=["kldload.kernel_log", "kldunload.kernel_log"],
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
    # Recorded: the device line has no " on nexus0", and with cryptosoft0 holding driver id 0 the
    # module's crid is 1 (opencrypto's "crypto: assign ..." line shows only in a verbose boot).
    return scenario(
        "crypto-register",
        "--enable-freebsdkm-crypto-register: the libwolf driver attaches and registers crid 1; no "
        "self-test or benchmark runs in this mode; at unload the crid is unregistered and the device "
        "detaches.",
        modules=["nexus/libwolfssl"],
        kldload={"kernel_log": between_markers(REAL_CRYPTO_REGISTER, "load begin", "load rc=")},
        kldunload={"kernel_log": between_markers(REAL_CRYPTO_REGISTER, "unload begin", "unload rc=")},
        provenance=REAL_PROVENANCE,
        real=["kldload.kernel_log", "kldunload.kernel_log"],
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


# --------------------------------------------------------------------------- kernel trouble
# Built from FreeBSD's kernel sources, not recorded: the message shapes (and the source files they
# come from) are in docs/kernel-messages.md; frames use ddb's "f() at f+0x../frame 0x.." form and
# witness's "#N 0x.. at f+0x.." form. The panics end the load: kldload never returns.
KERNEL_PROVENANCE = ("constructed from FreeBSD's kernel sources (see docs/kernel-messages.md) and the bsdkm "
                     "message catalogue; not recorded on FreeBSD")


def _ddb(frames: list[str], base: int = 0xFFFFFE00A1B2C000) -> list[str]:
    return [f"{f}() at {f}+0x{0x20 + 7 * i:x}/frame 0x{base + 0x40 * i:x}" for i, f in enumerate(frames)]


def _witness_stack(frames: list[str]) -> list[str]:
    return [f"#{i} 0xffffffff80{0xb00000 + 0x1234 * i:06x} at {f}+0x{0x31 + 5 * i:x}"
            for i, f in enumerate(frames)]


_LOADER_FRAMES = ["wolfkmod_event", "module_register_init", "linker_load_module", "kern_kldload",
                  "sys_kldload", "amd64_syscall", "fast_syscall_common"]


def _kernel_scenario(name: str, about: str, lines: list[str], *, hang: bool,
                     bench: list[str]) -> dict[str, Any]:
    load = ["info: wolfCrypt self-test passed.", *bench[:6], *lines]
    if not hang:
        load += [*bench[6:], "info: wolfCrypt benchmark passed.", "info: libwolfssl loaded"]
    doc = scenario(name, about, kldload={"kernel_log": load, "hang": hang},
                   kldunload={"kernel_log": ["info: libwolfssl unloaded"]})
    doc["provenance"] = KERNEL_PROVENANCE
    return doc


def kernel_trouble_scenarios(bench: list[str]) -> list[dict[str, Any]]:
    lor = [  # kern/subr_witness.c witness_checkorder(): reversal, the two locks, both orders' stacks
        "lock order reversal:",
        " 1st 0xfffff80003a1c0a8 wolfkmod_mtx (wolfkmod_mtx, sleep mutex) @ bsdkm/wolfkmod.c:412",
        " 2nd 0xffffffff81c3e5a0 kernel linker (kernel linker, sx) @ /usr/src/sys/kern/kern_linker.c:1142",
        "lock order kernel linker -> wolfkmod_mtx established at:",
        *_witness_stack(["witness_checkorder", "__mtx_lock_flags", "wolfkmod_event", "module_register_init"]),
        "lock order wolfkmod_mtx -> kernel linker attempted at:",
        *_witness_stack(["witness_checkorder", "_sx_xlock", "linker_file_lookup_symbol", "wc_InitRng",
                         "wolfkmod_event", "module_register_init"]),
    ]
    sleeping = [  # kern/subr_turnstile.c propagate_priority(), then kern_shutdown.c vpanic()
        "Sleeping thread (tid 100112, pid 812) owns a non-sleepable lock",
        "KDB: stack backtrace of thread 100112:",
        *_ddb(["sched_switch", "mi_switch", "sleepq_switch", "_sleep", "wc_GenerateSeed", "wc_InitRng",
               *_LOADER_FRAMES]),
        "panic: sleeping thread",
        "cpuid = 1",
        "time = 1733044800",
        "KDB: stack backtrace:",
        *_ddb(["db_trace_self_wrapper", "vpanic", "panic", "propagate_priority", "turnstile_wait",
               "__mtx_lock_sleep", "intr_event_execute_handlers", "ithread_loop", "fork_exit"]),
    ]
    spin = [  # kern/kern_mutex.c _mtx_lock_indefinite_check()
        "spin lock 0xffffffff81d5c640 (sched lock 1) held by 0xfffff80003f1e000 (tid 100112) too long",
        "panic: spin lock held too long",
        "cpuid = 0",
        "time = 1733044800",
        "KDB: stack backtrace:",
        *_ddb(["db_trace_self_wrapper", "vpanic", "panic", "_mtx_lock_indefinite_check",
               "_mtx_lock_spin_cookie", "wolfkmod_vecreg_save", "wc_AesGcmEncrypt", "bench_aesgcm",
               "benchmark_test", *_LOADER_FRAMES]),
    ]
    fpu = [  # amd64/amd64/fpu.c KASSERT in fpudna() (FreeBSD PR 250351's text)
        "panic: fpudna while in fpu_kern_enter(FPU_KERN_NOCTX)",
        "cpuid = 0",
        "time = 1733044800",
        "KDB: stack backtrace:",
        *_ddb(["db_trace_self_wrapper", "vpanic", "panic", "fpudna", "trap", "calltrap",
               "AES_GCM_encrypt_avx2", "wc_AesGcmEncrypt", "aesgcm_test", "wolfcrypt_test", *_LOADER_FRAMES]),
    ]
    trap = [  # amd64/amd64/trap.c trap_fatal(), then the panic it calls
        "Fatal trap 12: page fault while in kernel mode",
        "cpuid = 1; apic id = 01",
        "fault virtual address\t= 0x8",
        "fault code\t\t= supervisor read data, page not present",
        "instruction pointer\t= 0x20:0xffffffff82e1b2f3",
        "stack pointer\t        = 0x28:0xfffffe00a1b2c6e0",
        "frame pointer\t        = 0x28:0xfffffe00a1b2c730",
        "current process\t\t= 812 (kldload)",
        "trap number\t\t= 12",
        "panic: page fault",
        "cpuid = 1",
        "time = 1733044800",
        "KDB: stack backtrace:",
        *_ddb(["db_trace_self_wrapper", "vpanic", "panic", "trap_fatal", "trap_pfault", "trap", "calltrap"]),
        "--- trap 0xc, rip = 0xffffffff82e1b2f3, rsp = 0xfffffe00a1b2c6e0, rbp = 0xfffffe00a1b2c730 ---",
        *_ddb(["wc_ecc_mulmod_ex2", "ecc_make_pub_ex", "_ecc_make_key_ex", "ecc_test", "wolfcrypt_test",
               *_LOADER_FRAMES], base=0xFFFFFE00A1B2C740),
    ]
    sleep_lock = [  # kern/subr_witness.c witness_warn() for _sleep()'s WITNESS_WARN "Sleeping on \"%s\""
        'Sleeping on "wolfrng" with the following non-sleepable locks held:',
        "exclusive sleep mutex wolfkmod_mtx (wolfkmod_mtx) r = 0 (0xfffff80003a1c0a8) locked @ "
        "bsdkm/wolfkmod.c:412",
        "stack backtrace:",
        *_witness_stack(["witness_debugger", "witness_warn", "_sleep", "wc_GenerateSeed", "wc_InitRng",
                         "wolfkmod_event", "module_register_init"]),
    ]
    return [
        _kernel_scenario("kernel-lock-order-reversal", "WITNESS: lock order reversal between the module's "
                         "mutex and the kernel linker lock during MOD_LOAD; the load goes on.", lor,
                         hang=False, bench=bench),
        _kernel_scenario("kernel-sleeping-thread", "A thread sleeping in wc_GenerateSeed owns a "
                         "non-sleepable lock: turnstile panic (\"sleeping thread\"); kldload never returns.",
                         sleeping,
                         hang=True, bench=bench),
        _kernel_scenario("kernel-spin-lock-held", "A spin lock held too long while the module's AES-GCM "
                         "benchmark waits for it: panic; kldload never returns.", spin, hang=True,
                         bench=bench),
        _kernel_scenario("kernel-fpu-panic", "FPU used outside the module's fpu_kern_enter section: "
                         "fpudna panic in the AES-GCM self-test; kldload never returns.", fpu, hang=True,
                         bench=bench),
        _kernel_scenario("kernel-fatal-trap", "Page fault in the module's ECC self-test: Fatal trap 12, "
                         "panic; kldload never returns.", trap, hang=True, bench=bench),
        _kernel_scenario("kernel-sleep-with-lock", "WITNESS: the module sleeps (\"wolfrng\") holding its "
                         "non-sleepable mutex; the load goes on.", sleep_lock, hang=False, bench=bench),
    ]


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
        *kernel_trouble_scenarios(bench),
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
