"""What reading Debian's ``Sources`` index costs (``pipeline/runtime/source.read_index``): wall time and
memory on a real sid index (~70 MB of text, ~43,000 source packages), against reading every
paragraph with python-debian's ``deb822`` (no pre-filter).

Each way runs in a child process of its own, so its peak resident size is its own: ``rss_mib`` is
the peak after the reading, ``rss_added_mib`` what the reading added to the peak after the imports;
``traced_peak_mib`` is tracemalloc's peak of the reading alone (a second, slower pass).

    PYTHONPATH=. python bench/debian_index.py [--index ~/.cache/bsdkm-ci/debian/sid/Sources.xz]
        [--label NAME] [--out bench/results/debian_index.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, lzma, resource, sys, time, tracemalloc
from pathlib import Path
from debian import deb822
from buildbot_bsdkm.pipeline.runtime.source import read_index

way, index, package = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def every_paragraph():
    with lzma.open(index, "rt", encoding="utf-8", errors="replace") as fh:
        return [p["Version"] for p in deb822.Sources.iter_paragraphs(fh, use_apt_pkg=False)
                if p.get("Package") == package]


def package_index():
    return [e.version for e in read_index(index, package)]


read = {"read_index": package_index, "deb822_every_paragraph": every_paragraph}[way]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
found = read()
wall = time.perf_counter() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
read()
traced = tracemalloc.get_traced_memory()[1]
print(json.dumps({"way": way, "found": found, "wall_s": round(wall, 2), "rss_mib": round(after / 1024, 1),
                  "rss_added_mib": round((after - before) / 1024, 1),
                  "traced_peak_mib": round(traced / 2**20, 1)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, default=Path.home() / ".cache/bsdkm-ci/debian/sid/Sources.xz")
    ap.add_argument("--package", default="wolfssl")
    ap.add_argument("--label", default="read_index", help="what the installed read_index is (before/after)")
    ap.add_argument("--ways", nargs="+", default=["read_index", "deb822_every_paragraph"])
    ap.add_argument("--out", type=Path, default=Path("bench/results/debian_index.json"))
    args = ap.parse_args()
    rows = []
    for way in args.ways:
        done = subprocess.run([sys.executable, "-c", CHILD, way, str(args.index), args.package],
                              capture_output=True, text=True, check=True)
        row = json.loads(done.stdout)
        row["label"] = args.label if way == "read_index" else way
        rows.append(row)
        print(row)
    old = json.loads(args.out.read_text()) if args.out.is_file() else {"runs": []}
    old["runs"] = [r for r in old["runs"] if r["label"] not in {r2["label"] for r2 in rows}] + rows
    old.update({"machine": platform.node(), "python": platform.python_version(),
                "index": str(args.index), "index_bytes_xz": args.index.stat().st_size})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(old, indent=2) + "\n")


if __name__ == "__main__":
    main()
