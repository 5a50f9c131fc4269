"""How long the master takes to collect a worker file in 32 KiB pieces (what an ``uploadFile`` hands
its writer), with Buildbot's string writer and with ``buildbot/worker_files.py``'s bounded one, and
how long a failure signature takes for a long console line (``triage/signature.py``).

    PYTHONPATH=. python bench/worker_file_read.py [--mib 8 16 32] [--out bench/results/worker_file_read.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

from buildbot.process import remotetransfer

from buildbot_bsdkm.buildbot.worker_files import BLOCK, BoundedStringWriter
from buildbot_bsdkm.model import KernelEvent
from buildbot_bsdkm.triage.signature import event_signature


def collect(writer: object, mib: int) -> float:
    piece = b"test passed!\n" * (BLOCK // 13) + b"x" * (BLOCK % 13)
    started = time.perf_counter()
    for _ in range(mib * 1024 * 1024 // BLOCK):
        writer.remote_write(piece)  # type: ignore[attr-defined]
    _ = writer.buffer  # type: ignore[attr-defined]
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--out", type=Path, default=Path("bench/results/worker_file_read.json"))
    args = ap.parse_args()
    rows = []
    for mib in args.mib:
        plain = collect(remotetransfer.StringFileWriter(), mib)
        bounded = collect(BoundedStringWriter((mib + 1) * 1024 * 1024), mib)
        rows.append({"mib": mib, "buildbot_string_writer_s": round(plain, 3),
                     "bounded_writer_s": round(bounded, 3)})
        print(rows[-1])
    sig = []
    for n in (2000, 8192, 65536):
        reason = "-" * n
        started = time.perf_counter()
        event_signature(KernelEvent("panic", "panic: " + reason, detail={"reason": reason}))
        sig.append({"dashes": n, "signature_s": round(time.perf_counter() - started, 4)})
        print(sig[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": platform.node(), "python": platform.python_version(),
                                    "worker_file": rows, "signature": sig}, indent=2) + "\n")


if __name__ == "__main__":
    main()
