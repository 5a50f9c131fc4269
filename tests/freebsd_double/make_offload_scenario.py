"""Build ``offload/crypto-register-offload.json``: crypto-register plus openssl speed.

Kept out of ``scenarios/`` (that directory is exactly what ``make_scenarios.py`` builds);
boot it with ``FreeBSDDouble.boot_file(OFFLOAD_SCENARIO, state)``.

``python tests/freebsd_double/make_offload_scenario.py`` rewrites the file; a test checks the
committed one is what this builds. The kernel side is the ``crypto-register`` scenario (its
kldload lines recorded on FreeBSD 15.0-CURRENT, see that scenario's provenance). **The openssl
side is constructed, not recorded**: the two ``openssl speed -elapsed -evp aes-128-cbc`` outputs
(with and without ``-engine devcrypto``) are shaped like OpenSSL 3.0's, the base OpenSSL of
FreeBSD 14 (a Debian OpenSSL 3.0 run in the shared fixtures is the model): progress lines on
stderr, the 6-size table on stdout, in 1000s of bytes per second. The numbers are made up to
show a driver slower than software at every size (57x at 16 bytes), not measured.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OFFLOAD_SCENARIO = HERE / "offload" / "crypto-register-offload.json"
SIZES = (16, 64, 256, 1024, 8192, 16384)
# 1000s of bytes per second, as the table prints them.
SOFTWARE = (212345.67, 598765.43, 1234567.89, 1987654.32, 2345678.90, 2356789.01)
DEVCRYPTO = (3725.36, 14501.22, 52318.44, 168902.13, 881234.56, 1012345.67)
VERSION = "OpenSSL 3.0.16 11 Feb 2025"


def speed_output(alg: str, rates: tuple[float, ...], engine: str | None) -> tuple[list[str], list[str]]:
    """(stdout, stderr) of ``openssl speed -elapsed -evp ALG [-engine ENGINE]`` (OpenSSL 3.0)."""
    name = alg.upper()
    err = [f'Engine "{engine}" set.'] if engine else []
    err.append("You have chosen to measure elapsed time instead of user CPU time.")
    for size, rate in zip(SIZES, rates, strict=True):
        count = round(rate * 1000 * 3.0 / size)
        err.append(f"Doing {name} for 3s on {size} size blocks: {count} {name}'s in 3.00s")
    out = [f"version: {VERSION.split()[1]}", "built on: reproducible build, date unspecified",
           "options: bn(64,64)", "compiler: clang",
           "CPUINFO: OPENSSL_ia32cap=0x7ed8320b078bffff:0x209c01a9 env:~0x200000200000000",
           "The 'numbers' are in 1000s of bytes per second processed.",
           "type" + " " * 9 + "".join(f"{size:>8} bytes" for size in SIZES),
           f"{name:<12}" + "".join(f"{rate:>12.2f}k" for rate in rates)]
    return out, err


def build() -> dict:
    base = json.loads((HERE / "scenarios" / "crypto-register.json").read_text(encoding="utf-8"))
    doc = dict(base)
    doc["name"] = "crypto-register-offload"
    doc["about"] = ("crypto-register with openssl speed through /dev/crypto (engine devcrypto, OpenSSL "
                    "3.0) and in software: offload 57x slower at 16 bytes, still slower at 16 KiB")
    doc["provenance"] = ("constructed by make_offload_scenario.py: kernel side from crypto-register, "
                         "openssl output in OpenSSL 3.0's shape with made-up numbers; "
                         "not recorded on FreeBSD")
    doc["sysctl"] = {**base["sysctl"], "kern.crypto.allow_soft": "0", "kern.cryptodevallowsoft": "0"}
    eng_out, eng_err = speed_output("aes-128-cbc", DEVCRYPTO, "devcrypto")
    sw_out, sw_err = speed_output("aes-128-cbc", SOFTWARE, None)
    doc["openssl"] = {"version": VERSION, "engines": ["devcrypto"],
                      "engine": {"stdout": eng_out, "stderr": eng_err, "exit": 0},
                      "software": {"stdout": sw_out, "stderr": sw_err, "exit": 0}}
    return doc


def render() -> str:
    return json.dumps(build(), indent=2) + "\n"


if __name__ == "__main__":
    OFFLOAD_SCENARIO.write_text(render(), encoding="utf-8")
    print(f"wrote {OFFLOAD_SCENARIO}", file=sys.stderr)
