"""Memory and time of judging a flooded console, and of watching one grow, in this tree or another.

    python bench/console_flood.py [--mib 400] [--old-tree DIR] [--out bench/results/console_flood.md]

A module that prints in a loop makes the console large (a 30 s loop wrote 45 MiB under TCG). This
measures, each in a fresh process (peak RSS from ``getrusage`` of the child), on consoles of the
real shapes (the Linux console's markers and timestamped kernel lines, the FreeBSD kldload console):

- ``linux-judge``: ``outcome_from_console`` + the kernel-log parser + ``judge_outcome``, as the load
  stage does after a boot;
- ``freebsd-judge``: ``outcome_from_boot`` + the parser + ``judge_boot``;
- ``freebsd-watch``: ``proc.run_watched`` with the FreeBSD stop rule while a fake guest writes the
  whole console at once and then waits (the watcher's own cost; 20 s limit), and how far past its
  limit it returned.

``--old-tree`` runs the same measurements against another checkout (e.g. a ``git worktree`` of the
commit before the console cap) for the before/after figures. The cap itself stops a real guest at
``console_cap_mib`` (64 MiB by default), so these sizes are what an uncapped run would have reached.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
LINUX_FIXTURE = HERE / "tests" / "data" / "kernel" / "noasm-tcg-settings.console.log"
FREEBSD_FIXTURE = HERE / "tests" / "freebsd_double" / "real" / "kldload-release-crypto_aesni.console.log"
FLOOD = "bsdkm_flood: " + "x" * 180


def make_linux_console(path: Path, mib: int) -> None:
    """The real console's boot and load markers, then a module's timestamped flood, cut like a kill."""
    head = []
    for line in LINUX_FIXTURE.read_text(errors="replace").splitlines(keepends=True):
        head.append(line)
        if "load begin" in line:
            break
    with open(path, "w") as out:
        out.writelines(head)
        size, n = sum(len(x) for x in head), 0
        block = "".join(f"[{6.3 + i * 1e-5:12.6f}] {FLOOD} {i}\n" for i in range(4096))
        while size < mib << 20:
            out.write(block)
            size += len(block)
            n += 1


def make_freebsd_console(path: Path, mib: int) -> None:
    head = []
    for line in FREEBSD_FIXTURE.read_text(errors="replace").splitlines(keepends=True):
        head.append(line)
        if "load begin" in line:
            break
    with open(path, "w") as out:
        out.writelines(head)
        size = sum(len(x) for x in head)
        block = "".join(f"wolfssl: {FLOOD} {i}\n" for i in range(4096))
        while size < mib << 20:
            out.write(block)
            size += len(block)


CHILD = {
    "linux-judge": """
from pathlib import Path
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import target as linux_target
from buildbot_bsdkm.pipeline.targets.base import judge_outcome, parse_kernel_log
from buildbot_bsdkm.pipeline.runtime.proc import Watched
console = Path(ARG)
out = linuxkm.outcome_from_console(console, Watched(None, 60.0, True, None))
log = parse_kernel_log(linux_target.TARGET.log_format, console)
f = judge_outcome(out, log, 60)
print(f.category, f.reason, "|", f.message[:80])
""",
    "freebsd-judge": """
from pathlib import Path
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import console as fconsole
from buildbot_bsdkm.pipeline.runtime.proc import Watched
from buildbot_bsdkm.pipeline.targets.base import parse_kernel_log
console = Path(ARG)
out = fconsole.outcome_from_boot(fboot.Boot("release", "release-crypto", "kldload"), console,
                                 Watched(None, 60.0, True, None), set(), {})
log = parse_kernel_log(fq.TARGET.log_format, console)
f = fq.judge_boot("release", out, log, 60.0, set(), None)
print(f.category, f.reason, "|", f.message[:80])
""",
    "freebsd-watch": """
import sys, time
from pathlib import Path
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.runtime.proc import run_watched
src, log = ARG.split("|")
copy = f"import shutil, sys, time\\nshutil.copyfileobj(open({src!r}, 'rb'), sys.stdout.buffer)\\n"
guest = [sys.executable, "-c", copy + "sys.stdout.flush()\\ntime.sleep(600)\\n"]
res = run_watched(guest, log=Path(log), timeout_s=20.0, stop=fboot.stop_rule("kldload", time.monotonic))
print("stopped", res.stopped, "timed_out", res.timed_out, "seconds", round(res.seconds, 2),
      "overrun", round(res.seconds - 20.0, 2))
""",
}


def measure(kind: str, arg: str, tree: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = f"ARG = {arg!r}\n" + CHILD[kind]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tree,
                          check=False)
    seconds = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # this process ran only that child
    said = proc.stdout.strip() or (proc.stderr.strip().splitlines() or [""])[-1]
    return {"kind": kind, "seconds": round(seconds, 2), "peak_rss_mib": round(peak_kib / 1024, 1),
            "said": said[:160], "rc": proc.returncode}


def run_one(kind: str, arg: str, tree: Path) -> dict[str, object]:
    """One measurement in a process of its own, so RUSAGE_CHILDREN's peak is that one's."""
    out = subprocess.run([sys.executable, __file__, "--one", kind, arg, str(tree)], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=400)
    p.add_argument("--old-tree", type=Path, default=None)
    p.add_argument("--out", type=Path, default=HERE / "bench" / "results" / "console_flood.md")
    p.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        kind, arg, tree = args.one
        print(json.dumps(measure(kind, arg, Path(tree))))
        return 0
    trees = [("this tree", HERE)] + ([("before", args.old_tree.resolve())] if args.old_tree else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="console-flood-") as tmp:
        lin, fbsd = Path(tmp) / "linux.log", Path(tmp) / "freebsd.log"
        make_linux_console(lin, args.mib)
        make_freebsd_console(fbsd, args.mib)
        for label, tree in trees:
            for kind, arg in (("linux-judge", str(lin)), ("freebsd-judge", str(fbsd)),
                              ("freebsd-watch", f"{fbsd}|{Path(tmp) / 'watched.log'}")):
                row = {"tree": label, "console_mib": args.mib, **run_one(kind, arg, tree)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    lines = [f"# Console flood: judging and watching a {args.mib} MiB console", "",
             "Measured by `bench/console_flood.py` (each row a fresh process; peak RSS of that process).",
             "", "| code | what | seconds | peak RSS MiB | result |", "|---|---|---|---|---|"]
    lines += [f"| {r['tree']} | {r['kind']} | {r['seconds']} | {r['peak_rss_mib']} | {r['said']} |"
              for r in rows]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
