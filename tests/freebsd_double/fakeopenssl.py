"""Fake ``openssl`` for the FreeBSD replay double: ``version`` and ``speed`` from the scenario.

A scenario's optional ``openssl`` section (``scenarios/crypto-register-offload*.json``)::

    "openssl": {"version": "OpenSSL 1.0.2u-freebsd  20 Dec 2019",
                "engines": ["cryptodev"],            # what -engine accepts
                "engine": {"stdout": [...], "exit": 0},   # speed through the engine
                "software": {"stdout": [...], "exit": 0}}

An engine run needs the module loaded (``loaded.json`` of the fake kernel): without a
registered driver /dev/crypto has nothing to offer, and the run fails as OpenSSL does.
Every call is appended to ``calls.log`` like the kernel tools' calls.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    state = Path(os.environ["BSDKM_DOUBLE_STATE"])
    scenario = json.loads(Path(os.environ["BSDKM_DOUBLE_SCENARIO"]).read_text(encoding="utf-8"))
    with (state / "calls.log").open("a", encoding="utf-8") as fh:
        fh.write(" ".join(["openssl", *argv]) + "\n")
    conf = scenario.get("openssl")
    if conf is None:
        print("openssl: not installed in this scenario", file=sys.stderr)
        return 127
    if argv[:1] == ["version"]:
        print(conf.get("version", "OpenSSL"))
        return 0
    loaded = json.loads((state / "loaded.json").read_text()) if (state / "loaded.json").exists() else {}
    if argv[:1] == ["engine"]:
        return dump_info(conf, loaded, argv)
    if argv[:1] != ["speed"]:
        print(f"openssl: {argv[:1]} is not replayed by the double", file=sys.stderr)
        return 1
    if "-engine" in argv:
        engine = argv[argv.index("-engine") + 1] if argv.index("-engine") + 1 < len(argv) else ""
        if engine not in conf.get("engines", []) or "cryptodev" not in loaded:
            print(f'invalid engine "{engine}"', file=sys.stderr)
            return 1
        if not any(name != "cryptodev" for name in loaded):
            print(f'engine "{engine}" set.', file=sys.stderr)
            print("EVP_EncryptInit_ex: no driver for the cipher (no crypto device registered)",
                  file=sys.stderr)
            return 1
        run = conf["engine"]
    else:
        run = conf["software"]
    for line in run.get("stderr", []):
        print(line, file=sys.stderr)
    for line in run.get("stdout", []):
        print(line)
    return int(run.get("exit", 0))


def dump_info(conf: dict, loaded: dict, argv: list[str]) -> int:
    """``openssl engine -pre DUMP_INFO devcrypto``: the driver /dev/crypto gives each cipher.

    Without cryptodev loaded there is no /dev/crypto and the engine does not load. Otherwise a
    cipher goes to the scenario's ``dump_driver`` (default: wolfSSL's driver while a module is
    loaded, as the only driver registered with CRYPTOCAP_F_HARDWARE).
    """
    if argv[-1:] != ["devcrypto"] or "DUMP_INFO" not in argv:
        print(f"openssl: {argv} is not replayed by the double", file=sys.stderr)
        return 1
    if "cryptodev" not in loaded or "devcrypto" not in conf.get("engines", []):
        print('invalid engine "devcrypto"', file=sys.stderr)
        return 1
    module = any(name != "cryptodev" for name in loaded)
    driver = conf.get("dump_driver", "libwolf0" if module else None)
    print("Information about ciphers supported by the /dev/crypto engine:", file=sys.stderr)
    for name, nid in (("aes-128-cbc", 419), ("aes-192-cbc", 423), ("aes-256-cbc", 427)):
        if driver is None:
            print(f"Cipher {name}, NID={nid}, /dev/crypto info: id=11, "
                  "CIOCGSESSION (session open call) failed", file=sys.stderr)
        else:
            print(f"Cipher {name}, NID={nid}, /dev/crypto info: id=11, driver={driver} (hw accelerated)",
                  file=sys.stderr)
    print("(devcrypto) /dev/crypto engine")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
