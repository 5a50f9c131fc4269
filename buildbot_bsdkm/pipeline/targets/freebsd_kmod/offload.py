"""The FreeBSD side of the offload paths: ``kmod/freebsd/offload.sh``'s files turned into results.

``offload.sh LOGDIR`` (after ``load.sh`` of a ``--enable-freebsdkm-crypto-register``
module) leaves ``offload.status`` (``crid``, ``driver`` /dev/crypto gave the engine, ``engine``,
``result``, ...),
``sysctl.kern.crypto.txt`` and two ``openssl speed -elapsed -evp <alg>`` outputs:
``openssl.devcrypto.txt`` (through /dev/crypto, i.e. the registered driver) and
``openssl.software.txt``. Their items are renamed to paths of one run,
``openssl:devcrypto:<alg>@<bytes>`` and ``openssl:software:<alg>@<bytes>``, so a
``crossovers`` rule with ``paths: true`` (``report/offload_paths.py``) states where offload wins.
"""

from __future__ import annotations

import re
from pathlib import Path

from ....model import LogFormat, LogResult, Problem
from ....parsers import parse_file
from ...runtime.loading import read_status

OUTPUTS = {"devcrypto": "openssl.devcrypto.txt", "software": "openssl.software.txt"}
_CRID = re.compile(r"libwolf\d*: info: driver loaded: (\d+)")


def offload_logs(logdir: Path) -> list[LogResult]:
    """One parsed log per path that ran; a missing output is an incomplete log naming why."""
    status = read_status(logdir / "offload.status")
    sysctl = (logdir / "sysctl.kern.crypto.txt")
    facts = {"offload_crid": status.get("crid") or None, "offload_engine": status.get("engine"),
             "offload_driver": status.get("driver") or None, "offload_result": status.get("result"),
             "kern_crypto": sysctl.read_text(errors="replace").strip() if sysctl.is_file() else None}
    logs = []
    for path, name in OUTPUTS.items():
        file = logdir / name
        if not file.is_file():
            reason = (f"{name} missing: offload.sh did not run the {path} measurement "
                      f"(result={status.get('result', 'unknown')})")
            logs.append(LogResult(source=str(file), format=LogFormat.OPENSSL_SPEED, incomplete_reason=reason,
                                  problems=[Problem(reason)], metadata=dict(facts)))
            continue
        log = parse_file(file, LogFormat.OPENSSL_SPEED)
        for b in log.benchmarks:
            if b.name.startswith("openssl:") and b.name.count(":") == 1:
                b.name = f"openssl:{path}:{b.name.removeprefix('openssl:')}"
        log.metadata.update(facts)
        log.metadata["offload_path"] = path
        logs.append(log)
    return logs


def registered_crid(kernel_log: Path) -> int | None:
    """The crid of ``libwolf0: info: driver loaded: <crid>`` in a kernel log, if any."""
    if not kernel_log.is_file():
        return None
    found = _CRID.findall(kernel_log.read_text(errors="replace"))
    return int(found[-1]) if found else None
