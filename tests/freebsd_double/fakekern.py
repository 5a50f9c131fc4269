"""Replay double for FreeBSD's kldload, kldstat, kldunload, dmesg and sysctl.

Each fake command is a tiny sh wrapper in ``bin/`` that runs this file with its
own name. The kernel is a state directory (``$BSDKM_DOUBLE_STATE``):
  msgbuf      the message buffer, raw: console records carry a ``<pri>`` prefix
              as in FreeBSD, kernel printf lines carry none
  console     what was written to the "console" ($BSDKM_CONSOLE points here);
              moved into msgbuf at the start of every command, as the kernel
              copies console output while kern.log_console_output is 1
  loaded.json files and modules currently loaded
  calls.log   one line per command run, for tests to check what was called
The scenario (``$BSDKM_DOUBLE_SCENARIO``, made by make_scenarios.py) says what
each command appends to msgbuf, prints, exits with, and whether it hangs.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

CONSOLE_PRI = "<118>"  # LOG_CONSOLE | LOG_INFO: what console records look like in the raw buffer
PRI_PREFIX = re.compile(r"^<(\d+)>")
LOG_FACMASK = 0x03F8


class DoubleError(Exception):
    """The double itself is misconfigured (not a scenario outcome)."""


class FakeKernel:
    def __init__(self, state: Path, scenario: dict[str, Any]) -> None:
        self.state = state
        self.scenario = scenario
        self.msgbuf = state / "msgbuf"
        # The faithful double (chroot.py) points this at its /dev/console, a plain file there.
        self.console = Path(os.environ.get("BSDKM_DOUBLE_CONSOLE") or state / "console")
        self.loaded_path = state / "loaded.json"

    # -- state -------------------------------------------------------------
    def sysctl(self, oid: str) -> str | None:
        value = self.sysctl_set().get(oid, self.scenario.get("sysctl", {}).get(oid))
        return None if value is None else str(value)

    def sysctl_set(self) -> dict[str, str]:
        """The values written with ``sysctl oid=value`` since boot (over the scenario's)."""
        path = self.state / "sysctl.json"
        data: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        return data

    def write_sysctl(self, oid: str, value: str) -> None:
        (self.state / "sysctl.json").write_text(json.dumps({**self.sysctl_set(), oid: value}))

    def loaded(self) -> dict[str, list[str]]:
        if not self.loaded_path.exists():
            return {}
        data: dict[str, list[str]] = json.loads(self.loaded_path.read_text())
        return data

    def save_loaded(self, loaded: dict[str, list[str]]) -> None:
        self.loaded_path.write_text(json.dumps(loaded))

    def append_kernel(self, lines: list[str]) -> None:
        with self.msgbuf.open("a", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                fh.flush()

    def drain_console(self) -> None:
        if not self.console.exists() or not os.access(self.console, os.W_OK):
            return  # a user who cannot write the console cannot have written to it
        text = self.console.read_text(encoding="utf-8")
        self.console.write_text("")
        if self.sysctl("kern.log_console_output") != "1":
            return
        self.append_kernel([CONSOLE_PRI + line for line in text.splitlines()])

    def visible_buffer(self) -> str:
        """The ring buffer's content: only its last kern.msgbufsize bytes survive."""
        raw = self.msgbuf.read_bytes() if self.msgbuf.exists() else b""
        size = int(self.sysctl("kern.msgbufsize") or 0)
        if size and len(raw) > size:
            raw = raw[-size:]
        return raw.decode("utf-8", errors="replace")

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.log"
        return [ln.split() for ln in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []

    def log_call(self, argv: list[str]) -> None:
        try:
            with (self.state / "calls.log").open("a", encoding="utf-8") as fh:
                fh.write(" ".join(argv) + "\n")
        except PermissionError:
            pass  # a worker user's kldstat or sysctl: not a call the tests count


def file_key(name: str) -> str:
    """kldstat/kldunload accept a file as 'libwolfssl' or 'libwolfssl.ko' or a path."""
    base = name.rsplit("/", 1)[-1]
    return base[:-3] if base.endswith(".ko") else base


def emit(lines: list[str], stream: Any, **subst: str) -> None:
    for line in lines:
        print(line.format(**subst), file=stream)


def hang_forever(ignore_term: bool) -> None:
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


# Benchmark result lines of the FreeBSD module (the real recording's two shapes, log-formats.md §5).
SYM_LINE = re.compile(r"^(?P<head>.*?\s)(?P<amount>\d+\.\d+)(?P<u1> [KMG]?i?B took )(?P<sec>\d+\.\d+)"
                      r"(?P<u2> seconds, )(?P<rate>\d+\.\d+)(?P<u3> [KMG]?i?B/s Cycles per byte = )"
                      r"(?P<cpb>\d+\.\d+)$")
OPS_LINE = re.compile(r"^(?P<head>.*?\s)(?P<ops>\d+)(?P<u1> ops took )(?P<sec>\d+\.\d+)(?P<u2> sec, avg )"
                      r"(?P<avg>\d+\.\d+)(?P<u3> ms, )(?P<rate>\d+\.\d+)(?P<u4> ops/sec, )(?P<cycles>\d+)"
                      r"(?P<u5> cycles )(?P<cpo>\d+\.\d+)(?P<u6> Cycles/op)$")


def _like(text: str, value: float) -> str:
    """``value`` with as many decimals as ``text`` has (the recording's own precision)."""
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return f"{value:.{decimals}f}"


def vary_line(line: str, factor: float, jitter: float) -> str:
    """A benchmark line as a run ``factor`` times slower would print it (SIMULATED, see README).

    The module's clock counts whole seconds and its cycle counter is the TSC: a slower 1-second item
    does fewer blocks/ops in that second (amount, rate, ops down; cycles per byte/op up), a
    multi-second item (RSA key generation, 1 op) takes more whole seconds and cycles. Throughput
    times cycles per unit stays the TSC rate, so the clock self-consistency check still holds;
    ``jitter`` (>= 1) is the small spread of the TSC count over a timed second.
    """
    m = SYM_LINE.match(line)
    if m:
        amount = float(m["amount"]) / factor
        rate = float(m["rate"]) / factor
        cpb = float(m["cpb"]) * factor * jitter
        return (f"{m['head']}{_like(m['amount'], amount)}{m['u1']}{m['sec']}{m['u2']}{_like(m['rate'], rate)}"
                f"{m['u3']}{_like(m['cpb'], cpb)}")
    m = OPS_LINE.match(line)
    if not m:
        return line
    ops, sec, cycles = int(m["ops"]), float(m["sec"]), int(m["cycles"])
    if sec >= 2.0:  # time-bound: the same ops take longer, in whole seconds
        sec = max(1.0, float(math.ceil(sec * factor - 0.5)))
        cycles = round(cycles * factor * jitter)
    else:  # count-bound: fewer ops fit in the timed second
        ops = max(1, round(ops / factor))
        cycles = round(cycles * jitter)
    return (f"{m['head']}{ops}{m['u1']}{m['sec'] if sec == float(m['sec']) else _like(m['sec'], sec)}"
            f"{m['u2']}{_like(m['avg'], sec * 1000.0 / ops)}{m['u3']}{_like(m['rate'], ops / sec)}{m['u4']}"
            f"{cycles}{m['u5']}{_like(m['cpo'], cycles / ops)}{m['u6']}")


def cycle_lines(k: FakeKernel, lines: list[str], ko: str) -> list[str]:
    """The kldload kernel lines of this load cycle: as recorded, or varied per cycle when the scenario
    asks (``cycle_variation``: ``seed``, ``spread_pct``, ``slower_pct`` by path fragment)."""
    spec = k.scenario.get("cycle_variation")
    if not spec:
        return lines
    cycle = sum(1 for call in k.calls() if call and call[0] == "kldload")
    rng = random.Random(f"{spec.get('seed', 0)}:{cycle}")
    spread = float(spec.get("spread_pct", 2.0)) / 100.0
    # One-sided, as measured on real repeats: a disturbed run is slower, never faster.
    drift = 1.0 + abs(rng.gauss(0.0, spread))
    for fragment, pct in spec.get("slower_pct", {}).items():
        if fragment in ko:
            drift *= 1.0 + float(pct) / 100.0
    return [vary_line(line, drift * (1.0 + abs(rng.gauss(0.0, spread / 2))), 1.0 + abs(rng.gauss(0.0, 0.001)))
            for line in lines]


# Modules of the base system's /boot/kernel the scripts may load by name (GENERIC has no
# `device cryptodev`: /dev/crypto appears when cryptodev.ko is loaded).
BASE_MODULES = {"cryptodev": ["cryptodev"]}


def cmd_kldload(k: FakeKernel, args: list[str]) -> int:
    files = [a for a in args if not a.startswith("-")]
    if len(files) != 1:
        print("usage: kldload [-nqv] file ...", file=sys.stderr)
        return 1
    ko = files[0]
    loaded = k.loaded()
    if file_key(ko) in loaded:
        print(f"kldload: can't load {ko}: module already loaded or in kernel", file=sys.stderr)
        return 1
    if "/" not in ko and file_key(ko) in BASE_MODULES:
        loaded[file_key(ko)] = BASE_MODULES[file_key(ko)]
        k.save_loaded(loaded)
        return 0
    if "/" in ko and not Path(ko).exists():
        print(f"kldload: can't load {ko}: No such file or directory", file=sys.stderr)
        return 1
    step = k.scenario["kldload"]
    k.append_kernel(cycle_lines(k, step.get("kernel_log", []), ko))
    if step.get("hang"):
        hang_forever(bool(step.get("ignore_term")))
    emit(step.get("stdout", []), sys.stdout, ko=ko)
    emit(step.get("stderr", []), sys.stderr, ko=ko)
    rc = int(step.get("exit", 0))
    if rc == 0:
        loaded[file_key(ko)] = list(k.scenario.get("modules", []))
        k.save_loaded(loaded)
    return rc


def cmd_kldunload(k: FakeKernel, args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    if len(names) != 1:
        print("usage: kldunload [-fv] -i id | name ...", file=sys.stderr)
        return 1
    name = names[0]
    loaded = k.loaded()
    if file_key(name) not in loaded:
        print(f"kldunload: can't find file {name}: No such file or directory", file=sys.stderr)
        return 1
    step = k.scenario["kldunload"]
    k.append_kernel(step.get("kernel_log", []))
    if step.get("hang"):
        hang_forever(bool(step.get("ignore_term")))
    emit(step.get("stdout", []), sys.stdout, name=name)
    emit(step.get("stderr", []), sys.stderr, name=name)
    if step.get("unregisters", True) and int(step.get("exit", 0)) == 0:
        del loaded[file_key(name)]
        k.save_loaded(loaded)
    return int(step.get("exit", 0))


def cmd_kldstat(k: FakeKernel, args: list[str]) -> int:
    quiet = "-q" in args
    loaded = k.loaded()
    for flag, lookup in (("-m", "module"), ("-n", "file")):
        if flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                print(f"kldstat: option requires an argument -- {flag[1]}", file=sys.stderr)
                return 64
            wanted = args[i + 1]
            if lookup == "module":
                found = any(wanted in mods for mods in loaded.values())
            else:
                found = file_key(wanted) in loaded
            if not found:
                if not quiet:
                    print(f"kldstat: can't find {lookup} {wanted}: No such file or directory",
                          file=sys.stderr)
                return 1
            if not quiet:
                print("Id  Refs Name")
                print(f"{509:3d} {1:5d} {wanted}")
            return 0
    if not quiet:
        print("Id Refs Address                Size Name")
        print(" 1   12 0xffffffff80200000  1f3e2d0 kernel")
        for i, name in enumerate(loaded, start=2):
            print(f"{i:2d}    1 0xffffffff82a00000   5b4c38 {name}.ko")
    return 0


def cmd_dmesg(k: FakeKernel, args: list[str]) -> int:
    show_all = "-a" in args
    for line in k.visible_buffer().splitlines():
        m = PRI_PREFIX.match(line)
        if m:
            # Like dmesg(8): records from outside the kernel facility only with -a.
            if not show_all and int(m.group(1)) & LOG_FACMASK:
                continue
            line = line[m.end():]
        print(line)
    return 0


def cmd_sysctl(k: FakeKernel, args: list[str]) -> int:
    bare = "-n" in args
    oids = [a for a in args if not a.startswith("-")]
    rc = 0
    for oid in oids:
        if "=" in oid:  # sysctl oid=value: as FreeBSD's sysctl(8) prints a change
            oid, value = oid.split("=", 1)
            old = k.sysctl(oid)
            if old is None:
                print(f"sysctl: unknown oid '{oid}'", file=sys.stderr)
                rc = 1
                continue
            k.write_sysctl(oid, value)
            print(f"{oid}: {old} -> {value}")
            continue
        value = k.visible_buffer() if oid == "kern.msgbuf" else k.sysctl(oid)
        if value is None:
            print(f"sysctl: unknown oid '{oid}'", file=sys.stderr)
            rc = 1
            continue
        print(value if bare else f"{oid}: {value}")
    return rc


COMMANDS = {
    "kldload": cmd_kldload,
    "kldunload": cmd_kldunload,
    "kldstat": cmd_kldstat,
    "dmesg": cmd_dmesg,
    "sysctl": cmd_sysctl,
}


def load_kernel() -> FakeKernel:
    state = os.environ.get("BSDKM_DOUBLE_STATE")
    scen = os.environ.get("BSDKM_DOUBLE_SCENARIO")
    if not state or not scen:
        raise DoubleError("BSDKM_DOUBLE_STATE and BSDKM_DOUBLE_SCENARIO must be set")
    try:
        scenario = json.loads(Path(scen).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DoubleError(f"scenario {scen}: {e}") from None
    return FakeKernel(Path(state), scenario)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(f"fakekern: unknown command {argv[1:2]}", file=sys.stderr)
        return 127
    try:
        kernel = load_kernel()
    except DoubleError as e:
        print(f"fakekern: {e}", file=sys.stderr)
        return 127
    kernel.log_call(argv[1:])
    kernel.drain_console()
    return COMMANDS[argv[1]](kernel, argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
