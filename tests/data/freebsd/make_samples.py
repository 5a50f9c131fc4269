"""Build the constructed FreeBSD kernel-log samples in this directory.

Run from anywhere: ``python tests/data/freebsd/make_samples.py``. Input: the real
x_nofloatfmt benchmark fixture (the number style bsdkm's benchmark uses) and the
message catalogue of log-formats.md §6. The whole-second clock of the module is
applied: every duration becomes an integral number of seconds (the first item is
credited a full extra second, as §9 predicts), rates are recomputed from the
printed amounts, cycles per byte/op are kept (the TSC is right).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("BSDKM_SHARED", HERE.parents[2].parent / "shared"))
SOURCE = SHARED / "fixtures/userspace/x_nofloatfmt/bench_subset.txt"

_SYM = re.compile(
    r"^(?P<head>.*? )(?P<amount>[\d.]+) (?P<unit>\S+) took (?P<secs>[\d.]+) seconds, "
    r"(?P<rate>[\d.]+) (?P=unit)/s(?P<tail>.*)$"
)
_ASYM = re.compile(
    r"^(?P<head>.*? )(?P<count>\d+) ops took (?P<secs>[\d.]+) sec, avg (?P<avg>[\d.]+) ms, "
    r"(?P<rate>[\d.]+) ops/sec(?P<tail>.*)$"
)


def whole_second(line: str, first: bool) -> str:
    m = _SYM.match(line)
    if m:
        secs = max(1.0, float(round(float(m["secs"])))) + (1.0 if first else 0.0)
        rate = float(m["amount"]) / secs
        unit = m["unit"]
        return f"{m['head']}{m['amount']} {unit} took {secs:.3f} seconds, {rate:.3f} {unit}/s{m['tail']}"
    m = _ASYM.match(line)
    if m:
        secs = max(1.0, float(round(float(m["secs"]))))
        count = int(m["count"])
        return (
            f"{m['head']}{count} ops took {secs:.3f} sec, avg {secs * 1000 / count:.3f} ms, "
            f"{count / secs:.3f} ops/sec{m['tail']}"
        )
    return line


def benchmark_block() -> list[str]:
    lines = SOURCE.read_text().splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Math:"))
    out, first = [], True
    for line in lines[start:]:
        converted = whole_second(line, first)
        first = first and converted == line
        out.append(converted)
    return out


BOOT = [
    "---<<BOOT>>---",
    "FreeBSD 14.1-RELEASE releng/14.1-n267679-10e31f0946d8 GENERIC amd64",
    "FreeBSD/SMP: Multiprocessor System Detected: 2 CPUs",
    "uhub0: 2 ports with 2 removable, self powered",
]
UNLOAD_FPU = [
    "info: wolfkmod_event: MOD_UNLOAD",
    "info: libwolfssl 5.9.2 cleanup complete.",
    "info: wolfkmod_vecreg_exit: fpu_states[0] = 0, 0",
    "info: wolfkmod_vecreg_exit: fpu_states[1] = 0, 0",
    "info: libwolfssl unloaded",
]


def samples() -> dict[str, list[str]]:
    bench = benchmark_block()
    cut = bench[: len(bench) // 2]
    return {
        "load-bench-unload.log": BOOT
        + ["info: wolfkmod_event: MOD_LOAD", "info: wolfCrypt self-test passed."]
        + bench
        + ["info: wolfCrypt benchmark passed.", "info: libwolfssl loaded", "em0: link state changed to UP"]
        + UNLOAD_FPU,
        "selftest-failure.log": BOOT
        + [
            "ECC      test failed!",
            " error L=39294 code=-216 (ECC private key is not valid error)",
            "error: wolfcrypt test failed: -558510206",
            "error: wolfCrypt_Cleanup failed: Operation was redundant or preempted",
            "module_register_init: MOD_LOAD (libwolfssl, 0xffffffff82e1c0d0, 0) error 85",
            "kldload: an error occurred while loading module libwolfssl.ko. "
            "Please check dmesg(8) for more details.",
        ],
        "fips-hash-mismatch.log": BOOT
        + [
            "error: libwolfssl FIPS error: In Core Integrity check FIPS error",
            "In-core integrity hash check failure.",
            'Rebuild with "WOLFCRYPT_FIPS_CORE_HASH_VALUE='
            '3B144A08F291DBA536324646BBD127447B8F222D29A135780E330351E0DF9F0F".',
            "error: wolfCrypt_GetStatus_fips failed: -203: In Core Integrity check FIPS error",
            "module_register_init: MOD_LOAD (libwolfssl_fips, 0xffffffff82e1c0d0, 0) error 85",
        ],
        "crypto-register.log": BOOT
        + [
            "libwolf0: <wolfSSL crypto> on nexus0",
            "libwolf0: info: driver loaded: 3",
            "libwolf0: info: crid unregistered: 3",
            "libwolf0: detached",
        ],
        "panic-mid-benchmark.log": BOOT
        + ["info: wolfCrypt self-test passed."]
        + cut
        + [
            "ERROR: SAVE_VECTOR_REGISTERS failed for benchmark run."
            "error: wolfkmod_vecreg_exit: fpu_states[1] = 2, 100123",
            "panic: vm_fault_lookup: fault on nofault entry, addr: 0xfffffe00deadb000",
            "cpuid = 1",
        ],
    }


def main() -> None:
    for name, lines in samples().items():
        (HERE / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
