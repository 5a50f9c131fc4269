"""Kernel trouble in a kernel log, as structured records (``model.KernelEvent``).

Linux: ``BUG:``, ``Oops:``, ``WARNING: CPU: … at …``, general protection faults, soft and hard
lockups, RCU stalls, hung tasks, KASAN, UBSAN, kmemleak, lockdep splats, ``Kernel panic``,
closed by ``</TASK>`` or ``---[ end trace``. FreeBSD: ``panic:``, ``Fatal trap N``, witness
``lock order reversal``, ``Sleeping thread … owns a non-sleepable lock``, ``spin lock … held
too long``, FPU-context complaints, ``KDB: stack backtrace``, sleeping with a lock held.
Every shape (``kernel_shapes.py``), with the kernel source it was checked against: docs/kernel-messages.md.

A splat spans many lines, so the scanner is a small state machine fed every line (timestamps
still on: they join a splat's lines and tell the console's live copy from the dmesg dump that
repeats it). Idle, a line costs one regex search. Memory is bounded: evidence, frames and the
number of records per log are capped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import KernelEvent
from .kernel_shapes import Shape, header, strip_subsys

MODULE_NAMES = frozenset({"libwolfssl", "libwolfssl_fips"})
# Processes that only ever run the module's init/exit: a lockup in them is the module's.
LOADER_PROCESSES = frozenset({"bsdkm-modload", "kldload", "kldunload", "insmod", "modprobe", "rmmod"})
MAX_EVENTS = 64  # per log; more are counted on the last one kept
MAX_EVIDENCE = 80  # lines kept per record
MAX_FRAMES = 48
MAX_BODY = 400  # a splat longer than this is closed (a runaway, not a splat)
SPLAT_GAP_S = 2.0  # printk stamps within one splat are milliseconds apart
DEDUPE_KEYS = 512
# Debian's kernels: CONFIG_HZ=250. The RCU stall line gives jiffies; seconds need HZ.
LINUX_HZ = 250

# Whether an idle line may start a record: every header sits at the start of its line, after the
# printk stamp and a subsystem prefix, so str.startswith with a tuple (C speed, ~0.2 us a line)
# decides; only "sleeping with" may come mid-line.
_HEADER_STARTS = ("BUG", "kernel BUG", "Oops", "WARNING", "general protection", "INFO: ", "UBSAN",
                  "Kernel panic", "panic: ", "Fatal trap", "lock order", "Sleeping", "spin lock", "fpu",
                  "KDB: ", "Watchdog", "CPU", "kmemleak: ")
_SUBSYS_STARTS = ("watchdog: ", "rcu: ", "NMI watchdog: ", "witness: ")


def _TRIGGER(raw: str) -> bool:  # noqa: N802 - used like the compiled patterns around it
    if raw[:1] in "[<":
        end = raw.find("]", 0, 24)
        if end > 0:
            raw = raw[end + 1:].lstrip(" ")
    if raw.startswith(_SUBSYS_STARTS):
        raw = raw[raw.index(": ") + 2:]
    return raw.startswith(_HEADER_STARTS) or 'sleeping with "' in raw


_STAMP = re.compile(r"^(?:<\d>)?\[\s*(?P<ts>\d+(?:\.\d+)?)\] ?")

_FRAME_LINUX = re.compile(
    r"^\s*(?P<unreliable>\? )?(?P<func>[A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P<mod>\w+)\])?\s*$"
)
# The two shapes a FreeBSD kernel prints a stack in: DDB's (db_trace_self, a kernel with
# ``options DDB``) and stack(9)'s (stack_print_ddb, used by kdb_backtrace without DDB, as in
# release GENERIC). Both carry the function and its offset (``where``).
_FRAME_BSD = re.compile(r"^(?P<func>[\w.$]+)\(\) at (?P<where>(?P=func)\+0x[0-9a-f]+)/frame 0x[0-9a-f]+\s*$")
_FRAME_BSD_STACK = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ at (?P<where>(?P<func>[\w.$]+)\+0x[0-9a-f]+)")
_RIP = re.compile(r"^RIP: [0-9a-f]{4}:(?P<func>[A-Za-z_.$][\w.$]*)\+0x[0-9a-f]+/0x[0-9a-f]+(?: \[(?P"
                  r"<mod>\w+)\])?")
_CPU_LINE = re.compile(r"^CPU: (?P<cpu>\d+) (?:UID: \d+ )?PID: (?P<pid>\d+) Comm: (?P<comm>\S+)(?P<rest>.*)$")
_RCU_CPU = re.compile(r"^\s*(?P<cpu>\d+)-\S+: \((?P<ticks>\d+) ticks this GP\)")
_RCU_T = re.compile(r"\(t=(?P<jiffies>\d+) jiffies")
_TASK_BY = re.compile(r" by task (?P<comm>\S+?)/(?P<pid>\d+)")
_BSD_CPUID = re.compile(r"^cpuid = (?P<cpu>\d+)")
_BSD_PROCESS = re.compile(r"^current process\s*= (?P<pid>\d+) \((?P<comm>.*)\)")
_BSD_IP = re.compile(r"^instruction pointer\s*= 0x[0-9a-f]+:(?P<ip>0x[0-9a-f]+)")
_BSD_THREAD = re.compile(r"^\[ thread pid (?P<pid>\d+) tid (?P<tid>\d+) \]")
_BSD_LOCK = re.compile(r"^\s*(?P<which>1st|2nd|3rd) (?P<addr>0x[0-9a-f]+) (?P<name>.+?) \((?P<type>[^)]*)\)"
                       r"(?: @ (?P<where>\S+))?")
_BSD_END = ("Uptime: ", "Rebooting", "db> ", "---<<BOOT>>---", "Automatic reboot")

# FreeBSD frames that are the panic/trap/allocator machinery, or the kernel's loader around the
# module: the module's own frames are what lies between (when one of them looks like wolfSSL's).
_BSD_MACHINERY = re.compile(
    r"^(?:db_trace_\w+|kdb_\w+|vpanic|panic|kassert_panic|trap\w*|calltrap|malloc\w*|free\w*|realloc"
    r"|uma_\w+|zone_\w+|_?_?mtx_\w+|_?_?sx_\w+|_?rw_\w+|witness_\w+|_?sleep\w*|sleepq_\w+|turnstile_\w+"
    r"|propagate_priority|critical_\w+|fpu\w*|stack_\w+|lockmgr\w*|__lockmgr\w*|sched_\w+|mi_switch"
    r"|_?cv_\w+|_?sx_\w+|pause\w*|_?tsleep\w*|_?msleep\w*)$"
)
_BSD_LOADER = re.compile(
    r"^(?:module_register_init|module_register|linker_\w+|kern_kldload|sys_kldload|kern_kldunload\w*"
    r"|sys_kldunload\w*|mi_startup|amd64_syscall|fast_syscall_common|fork_exit|fork_trampoline"
    r"|taskqueue_\w+|sysinit_\w+|btext)$"
)
_WOLF_NAME = re.compile(
    r"^(?:wc_|_?wolf|Wolf|libwolf|sp_|_sp_|AES_|_?aes|Aes|GCM|gcm_|GHASH|ecc_|_ecc|rsa_|_rsa|Rsa|sha\d|Sha"
    r"|Transform_|hmac_|Hmac|_?InitRng|Hash_DRBG|mp_|fp_|ge_|fe_|curve|ed25519|ed448|chacha|poly1305"
    r"|add_entry|benchmark_|bench_|wolfcrypt_|\w+_test$)"
)


def _bsd_frame(line: str) -> re.Match[str] | None:
    return _FRAME_BSD.match(line) or _FRAME_BSD_STACK.match(line)


def freebsd_frame(line: str) -> str | None:
    """``func+0xoff`` when ``line`` is a frame of a FreeBSD backtrace, in DDB's shape or stack(9)'s;
    None for any other line."""
    m = _bsd_frame(line)
    return m["where"] if m else None


def freebsd_machinery(func: str) -> bool:
    """Whether ``func`` is the panic, trap, allocator or locking machinery above the frame at fault."""
    return _BSD_MACHINERY.match(func) is not None


class FreeBSDBacktrace:
    """The first ``KDB: stack backtrace:`` of a FreeBSD console, fed line by line (``feed``).

    ``frames`` are ``func+0xoff``, innermost first, in either shape the kernel prints. A trap or
    syscall marker inside the trace (``--- trap 0xc, rip = ...``) is crossed: the frames after it,
    the function that faulted among them, belong to the same trace.
    """

    def __init__(self) -> None:
        self.frames: list[str] = []
        self._reading = False

    def feed(self, line: str) -> bool:
        """Read one console line (without its line end); True when it is part of the trace."""
        if line.startswith("KDB: stack backtrace:"):
            self._reading = not self.frames
            return self._reading
        if not self._reading:
            return False
        where = freebsd_frame(line)
        if where is not None:
            if len(self.frames) < MAX_FRAMES:
                self.frames.append(where)
            return True
        if line.startswith(("--- trap", "--- syscall", "--- interrupt")):
            return True
        if line.strip():
            self._reading = False
        return False


@dataclass
class _Open:
    """The record being read: header fields plus what the body adds."""

    event: KernelEvent
    key: tuple[str, str] | None
    last_ts: float | None
    in_trace: bool = False
    task_depth: int = 0
    body: int = 0
    unreliable: int = 0
    regs_seen: bool = False  # the stalled/locked-up CPU's "CPU: ... Comm:" line was read


# The RIP of these is where the CPU was stuck or faulted (a WARNING names its caller itself).
_RIP_IS_THE_FUNCTION = frozenset({"soft_lockup", "rcu_stall", "hard_lockup", "bug", "oops", "gpf"})
_BSD_TRACE_STARTS = ("KDB: stack backtrace", "stack backtrace:", "--- trap", "--- syscall", "Tracing pid",
                     "Tracing command")
# Splats that print no '---[ end trace' line: their call trace's </TASK> is their end.
_ENDS_AT_TASK = frozenset({"soft_lockup", "hard_lockup", "rcu_stall", "hung_task", "lockdep", "kmemleak"})
# Lines that end a splat or only mark its end.
_END_TRACE = re.compile(r"^---\[ end (?:trace (?P<id>[0-9a-f]+)|Kernel panic - not syncing: .*?) \]---")


class KernelTroubleScanner:
    """Feed raw log lines (``feed``), then ``finish``; both append KernelEvent records to ``out``."""

    def __init__(self) -> None:
        self.open: _Open | None = None
        self.events: list[KernelEvent] = []
        self.dropped = 0
        # A console shows a splat's header live (quiet: only the error level), then the whole
        # splat again in the dmesg dump, stamps and all: one record, the fuller copy.
        self.by_key: dict[tuple[str, str], KernelEvent] = {}

    def feed(self, raw: str, n: int, out: list) -> None:
        cur = self.open
        if cur is None and not _TRIGGER(raw):
            return
        ts_text, text = _split_stamp(raw)
        ts = float(ts_text) if ts_text else None
        if cur is not None:
            if self._continues(cur, text, ts, n, out):
                return
            cur = self.open
        shape, m = header(text)
        if shape is None or m is None:
            return
        if cur is not None and cur.event.kind in shape.merges:
            self._merge(cur, shape, m, raw, n, ts)
            return
        if cur is not None:
            self._close(out)
        self._start(shape, m, raw, text, ts_text, ts, n)

    def finish(self, out: list) -> None:
        """Close the open record and append every record, in log order (held back until the end
        because a later dmesg dump may complete a splat the live console only began)."""
        if self.open is not None:
            self._close(out)
        if self.dropped and self.events:
            self.events[-1].detail["more_events_not_listed"] = self.dropped
        out.extend(sorted(self.events, key=lambda e: e.line or 0))

    # ----------------------------------------------------------------- records
    def _start(self, shape: Shape, m: re.Match[str], raw: str, text: str, ts_text: str | None,
               ts: float | None, n: int) -> None:
        fields = shape.fields(m)
        detail = dict(fields.pop("detail", {}))
        event = KernelEvent(kind=shape.kind, message=text.strip(), line=n, end_line=n, os=shape.os,
                            detail=detail, **fields)
        key = (ts_text, text.strip()) if ts_text else None
        self.open = _Open(event, key, ts)
        self._evidence(self.open, raw)

    def _merge(self, cur: _Open, shape: Shape, m: re.Match[str], raw: str, n: int, ts: float | None) -> None:
        """A header that continues the open record (a trap's panic, a BUG's Oops line)."""
        ev = cur.event
        fields = shape.fields(m)
        ev.detail.update(fields.pop("detail", {}))
        for key, value in fields.items():
            if getattr(ev, key) is None:
                setattr(ev, key, value)
        if shape.kind == "fpu" and ev.kind in ("panic", "backtrace"):
            ev.kind = "fpu"
        elif shape.kind == "panic" and ev.kind == "backtrace":
            ev.kind = "panic"
            ev.message = _split_stamp(raw)[1].strip()
        if shape.kind in ("panic", "fpu", "sleep_with_lock") and "panic" not in ev.detail:
            ev.detail["panic"] = _split_stamp(raw)[1].strip()
        if ev.os == "freebsd":  # a merged panic prints cpuid/time before its own backtrace
            cur.in_trace = shape.kind == "backtrace"
        ev.end_line = n
        cur.last_ts = ts if ts is not None else cur.last_ts
        cur.body += 1
        self._evidence(cur, raw)

    def _continues(self, cur: _Open, text: str, ts: float | None, n: int, out: list) -> bool:
        """Read one body line; False when it is not part of the record (which is then closed)."""
        if ts is not None and cur.last_ts is not None and ts - cur.last_ts > SPLAT_GAP_S:
            self._close(out)
            return False
        if cur.body >= MAX_BODY or text.startswith(("wolfssl: ", "### bsdkm-ci:", "### LKM-CI:")):
            self._close(out)
            return False
        ev = cur.event
        if ev.os == "freebsd" and (text.startswith("KDB: stack backtrace") or _bsd_frame(text)):
            return self._freebsd_body(cur, text, ts, n, out)
        end = _END_TRACE.match(text.strip())
        if end:
            if end["id"]:
                ev.detail.setdefault("trace_id", end["id"])
            self._take(cur, text, ts, n)
            self._close(out)
            return True
        shape, m = header(text) if _TRIGGER(text) else (None, None)
        if shape is not None and m is not None:
            if ev.kind in shape.merges:
                return False  # feed() merges it
            if not (ev.os == "linux" and shape.kind == "bug" and cur.body and _is_linux_body(text)):
                self._close(out)
                return False
        if ev.os == "freebsd":
            return self._freebsd_body(cur, text, ts, n, out)
        return self._linux_body(cur, text, ts, n, out)

    def _linux_body(self, cur: _Open, text: str, ts: float | None, n: int, out: list) -> bool:
        ev = cur.event
        line = text.strip()
        self._take(cur, text, ts, n)
        if line == "<TASK>" or line == "<IRQ>" or line == "<NMI>":
            cur.task_depth += 1
            return True
        if line in ("</TASK>", "</IRQ>", "</NMI>"):
            cur.task_depth -= 1
            # An RCU stall first dumps its grace-period kthread's stack: the stalled CPU comes after.
            waits = ev.kind == "rcu_stall" and not cur.regs_seen
            ends = ev.kind in _ENDS_AT_TASK and not waits
            if line == "</TASK>" and cur.task_depth <= 0 and cur.in_trace and ends:
                self._close(out)
            return True
        if line.startswith("Call Trace:"):
            cur.in_trace = True
            return True
        if cur.in_trace:
            f = _FRAME_LINUX.match(text)
            if f:
                self._frame(cur, f["func"], f["mod"], bool(f["unreliable"]))
                return True
        if m := _RIP.match(line):
            mod = m["mod"]
            if ev.function is None or ev.kind in _RIP_IS_THE_FUNCTION:
                ev.function = m["func"] + (f" [{mod}]" if mod else "")
            if mod in MODULE_NAMES:
                ev.names_module = True
            return True
        if m := _CPU_LINE.match(line):
            if ev.kind == "rcu_stall" and not cur.regs_seen:
                ev.frames.clear()  # those were the grace-period kthread's, not the stalled task's
                cur.in_trace = False
            cur.regs_seen = True
            ev.cpu = ev.cpu if ev.cpu is not None else int(m["cpu"])
            ev.pid = ev.pid if ev.pid is not None else int(m["pid"])
            ev.process = ev.process or m["comm"]
            if "Tainted:" in m["rest"]:
                ev.detail.setdefault("tainted", m["rest"].split("Tainted:", 1)[1].split()[0])
            self._loader_check(ev)
            return True
        if line.startswith("Modules linked in:"):
            ev.detail.setdefault("modules_linked", line.split(":", 1)[1].split())
            return True
        if ev.kind == "rcu_stall":
            if (m := _RCU_CPU.match(strip_subsys(line))) and ev.cpu is None:
                ev.cpu = int(m["cpu"])
                ev.detail["ticks_this_gp"] = int(m["ticks"])
            if m := _RCU_T.search(line):
                jiffies = int(m["jiffies"])
                ev.detail["jiffies"] = jiffies
                ev.detail["hz_assumed"] = LINUX_HZ
                ev.duration_s = round(jiffies / LINUX_HZ, 2)
        if ev.kind == "kasan" and (m := _TASK_BY.search(line)) and ev.process is None:
            ev.process, ev.pid = m["comm"], int(m["pid"])
            self._loader_check(ev)
        if line.startswith("Oops: ") and "oops" not in ev.detail:
            ev.detail["oops"] = line[6:]
        return True

    def _freebsd_body(self, cur: _Open, text: str, ts: float | None, n: int, out: list) -> bool:
        ev = cur.event
        line = text.rstrip()
        if line.startswith(_BSD_END):
            self._close(out)
            return False
        if f := _bsd_frame(line):
            cur.in_trace = True
            self._take(cur, text, ts, n)
            self._frame(cur, f["func"], None, False)
            return True
        if line.startswith(_BSD_TRACE_STARTS):
            cur.in_trace = True
            self._take(cur, text, ts, n)
            return True
        if cur.in_trace and not line.startswith(("KDB: ", "[ thread", "Stopped at", "lock order ")):
            self._close(out)
            return False
        self._take(cur, text, ts, n)
        if m := _BSD_CPUID.match(line):
            ev.cpu = int(m["cpu"]) if ev.cpu is None else ev.cpu
        elif m := _BSD_PROCESS.match(line):
            ev.pid, ev.process = int(m["pid"]), m["comm"]
            self._loader_check(ev)
        elif m := _BSD_IP.match(line):
            ev.detail["instruction_pointer"] = m["ip"]
        elif m := _BSD_THREAD.match(line):
            ev.pid = ev.pid if ev.pid is not None else int(m["pid"])
            ev.detail.setdefault("tid", int(m["tid"]))
        elif line.startswith("lock order ") and line.rstrip().endswith("attempted at:"):
            # witness prints the established order's stack, then the one attempted now: the culprit
            ev.detail["established_frames"] = ev.frames[:MAX_FRAMES]
            ev.frames = []
            cur.in_trace = False
        elif m := _BSD_LOCK.match(line):
            ev.detail.setdefault("locks", []).append(
                {"which": m["which"], "name": m["name"], "type": m["type"], "where": m["where"]}
            )
        return True

    def _take(self, cur: _Open, text: str, ts: float | None, n: int) -> None:
        cur.body += 1
        cur.event.end_line = n
        if ts is not None:
            cur.last_ts = ts
        self._evidence(cur, text)

    def _frame(self, cur: _Open, func: str, mod: str | None, unreliable: bool) -> None:
        ev = cur.event
        if unreliable:  # "? func+..." is a stale stack word, not a caller
            cur.unreliable += 1
            return
        shown = func + (f" [{mod}]" if mod else "")
        if len(ev.frames) < MAX_FRAMES:
            ev.frames.append(shown)
        if mod in MODULE_NAMES and len(ev.module_frames) < MAX_FRAMES:
            ev.module_frames.append(shown)
            ev.names_module = True

    def _evidence(self, cur: _Open, raw: str) -> None:
        if len(cur.event.evidence) < MAX_EVIDENCE:
            cur.event.evidence.append(raw.rstrip()[:300])

    def _loader_check(self, ev: KernelEvent) -> None:
        if ev.process in LOADER_PROCESSES:
            ev.names_module = True
            ev.detail["loader_process"] = ev.process

    def _close(self, out: list) -> None:
        cur, self.open = self.open, None
        if cur is None:
            return
        ev = cur.event
        if ev.os == "freebsd":
            _freebsd_module_frames(ev)
        if ev.function is None and ev.module_frames:
            ev.function = ev.module_frames[0]
        if ev.function and any(f"[{m}]" in ev.function for m in MODULE_NAMES):
            ev.names_module = True
        if cur.unreliable:
            ev.detail["unreliable_frames"] = cur.unreliable
        if cur.key is not None:
            prior = self.by_key.get(cur.key)
            if prior is not None:
                if len(ev.evidence) > len(prior.evidence):
                    prior.__dict__.update(ev.__dict__)
                return
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        if cur.key is not None and len(self.by_key) < DEDUPE_KEYS:
            self.by_key[cur.key] = ev
        self.events.append(ev)


def _split_stamp(raw: str) -> tuple[str | None, str]:
    m = _STAMP.match(raw)
    if m is None:
        return None, raw
    return m["ts"], raw[m.end():]


def _is_linux_body(text: str) -> bool:
    """A 'BUG: ...' inside a splat that is part of it (e.g. KASAN's banner repeats BUG)."""
    return text.lstrip().startswith("BUG: KASAN")


def _freebsd_module_frames(ev: KernelEvent) -> None:
    """DDB names no modules: the module's frames are those from the first frame past the panic
    machinery (or, when kernel code lies between, the first wolfSSL symbol: ``wolfkmod_event``,
    ``wc_*``, ...) up to the kernel's loader. The faulting function is the first frame past the
    machinery, whoever's it is (for a lock order reversal: the one that took the lock)."""
    frames = ev.frames
    i = 0
    while i < len(frames) and _BSD_MACHINERY.match(frames[i]):
        i += 1
    if ev.function is None and i < len(frames):
        ev.function = frames[i]
    wolf = next((k for k in range(i, len(frames))
                 if _WOLF_NAME.match(frames[k]) and not _BSD_LOADER.match(frames[k])), None)
    if wolf is None:
        return
    if any(_BSD_LOADER.match(f) for f in frames[i:wolf]):
        i = wolf
    j = wolf
    while j < len(frames) and not _BSD_LOADER.match(frames[j]):
        j += 1
    ev.module_frames = frames[i:j][:MAX_FRAMES]
    ev.names_module = True



def summarise(events: list[KernelEvent]) -> dict[str, int]:
    """Records per kind (report and summary lines)."""
    out: dict[str, int] = {}
    for ev in events:
        out[ev.kind] = out.get(ev.kind, 0) + 1
    return out
