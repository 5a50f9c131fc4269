"""Instruction counts of a build: the fixed-work driver built against it, run under Callgrind.

``count_instructions(build, items, settings)`` is the one entry: ``build`` is a userspace build
directory (``pipeline/runtime/userspace_build.py``'s, or any configured-and-made wolfSSL tree) or a static
``libwolfssl.a`` inside one. The driver (``kmod/workload/instr_driver.c``) is compiled with the
build's ``wolfssl/options.h`` and linked statically against an archive of the build's own
objects, so it runs exactly the code the variant's benchmark runs (a shared-only build still
has every object, position-independent, under ``.libs/``). Nothing is rebuilt: the archive and
the driver are cached under ``<cache>/instructions/<key>/`` by the objects' identity and the
driver's source.

Valgrind runs the driver once for all items; an item it cannot run (an instruction Valgrind does
not know: SIGILL, "unhandled instruction") ends that process, is recorded as unmeasurable with
Valgrind's words, and the items after it are run again in a new process.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ... import targets
from ...config.bsdkm_yml import Config
from ...perf.instruction_counts import (
    MEASURED,
    MISSING,
    UNMEASURABLE,
    DriverLine,
    InstructionCounts,
    InstructionsError,
    ItemCount,
    kept_functions,
    parse_callgrind,
    parse_driver_output,
)
from ...policy import load_policy
from ...support.resources import data_path
from .locks import exclusive
from .proc import run_logged
from .source import cache_root
from .stage_error import StageError, real_error
from .userspace_build import UserspaceBuild, build_key, compiler_env

PROGRAM = "bsdkm-instr"
MEASURED_FUNCTION = "bsdkm_measure"
OBJECT_GLOB = "src_libwolfssl_la-*.o"  # automake's per-target object names (libtool: under .libs/)
DEFAULT_BLOCK = 16384


def driver_source() -> Path:
    return data_path("kmod", "workload", "instr_driver.c")


def valgrind_version() -> str | None:
    exe = shutil.which("valgrind")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


@dataclass(frozen=True)
class BuiltTree:
    """A made wolfSSL build directory: its objects and the source it was configured from."""

    build_dir: Path
    source: Path
    objects: tuple[Path, ...]

    @classmethod
    def find(cls, build: Path, source: Path | None = None) -> BuiltTree:
        build = Path(build)
        if build.is_file() and build.suffix == ".a":  # <build>/src/.libs/libwolfssl.a
            build = build.parent.parent.parent
        if not (build / "wolfssl" / "options.h").is_file():
            raise real_error("build", "instructions", f"{build}: no wolfssl/options.h (not a configured "
                             "wolfSSL build directory)", [str(build)])
        objects = _objects(build)
        if not objects:
            raise real_error("build", "instructions", f"{build}: no library objects ({OBJECT_GLOB}): "
                             "run make there first", [str(build)])
        return cls(build, source or _srcdir(build), tuple(objects))

    def identity(self) -> str:
        """Changes whenever an object is rebuilt (or the driver's source changes)."""
        h = hashlib.sha256(driver_source().read_bytes())
        for obj in self.objects:
            st = obj.stat()
            h.update(f"{obj}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        h.update((self.build_dir / "wolfssl" / "options.h").read_bytes())
        return h.hexdigest()[:20]


def _objects(build: Path) -> list[Path]:
    """The library's objects, PIC (``.libs/``) ones preferred: one per source file."""
    pic = sorted(p for p in build.rglob(OBJECT_GLOB) if p.parent.name == ".libs")
    if pic:
        return pic
    return sorted(p for p in build.rglob(OBJECT_GLOB) if p.parent.name != ".libs")


def _srcdir(build: Path) -> Path:
    """The source tree of an out-of-tree build (automake's ``abs_top_srcdir``), else the build itself."""
    makefile = build / "Makefile"
    if makefile.is_file():
        m = re.search(r"^abs_top_srcdir = (.+)$", makefile.read_text(errors="replace"), re.M)
        if m:
            return Path(m[1].strip())
    return build


def build_driver(tree: BuiltTree, cache: Path, log: Path | None = None) -> Path:
    """The static driver for ``tree``, built at most once per object set (cached)."""
    key = tree.identity()
    # The steps run inside ``home``: every path they name is absolute (a relative out directory too).
    home = (cache / "instructions" / key).resolve()
    program = home / PROGRAM
    with exclusive(cache / "locks" / f"instructions-{key}.lock"):
        if program.is_file():
            return program
        home.mkdir(parents=True, exist_ok=True)
        blog = home / "build.log"
        blog.write_bytes(b"")
        archive = home / "libwolfssl-objects.a"
        archive.unlink(missing_ok=True)
        steps = [
            ["ar", "rcs", str(archive), *(str(Path(o).resolve()) for o in tree.objects)],
            ["gcc", "-static", "-O2", "-Wall", f"-I{Path(tree.build_dir).resolve()}",
             f"-I{Path(tree.source).resolve()}", "-o",
             str(program) + ".tmp", str(driver_source()), str(archive), "-lm", "-lpthread"],
        ]
        for argv in steps:
            res = run_logged(argv, cwd=home, log=blog, timeout_s=600)
            if res.exit_code != 0:
                text = blog.read_text(errors="replace")[-2000:]
                if log is not None:
                    with open(log, "a", encoding="utf-8") as out:
                        out.write(text)
                raise real_error("build", "instructions", f"{PROGRAM} did not build against {tree.build_dir} "
                                 f"(see {blog})", [str(blog)])
        Path(str(program) + ".tmp").replace(program)
        archive.unlink(missing_ok=True)  # the program is static: the archive is not needed again
        (home / "build.json").write_text(json.dumps({"build_dir": str(tree.build_dir),
                                                     "source": str(tree.source)}))
    return program


def item_args(items: Mapping[str, int], block: int = DEFAULT_BLOCK) -> list[str]:
    return [f"{name}={int(amount)}@{int(block)}" for name, amount in items.items()]


_VALGRIND_TROUBLE = (
    (re.compile(r"unhandled instruction bytes: ([0-9A-Fa-fx ]+)"), "Valgrind cannot run an instruction of "
     "this code (unhandled instruction bytes {0})"),
    (re.compile(r"signal 4 \(SIGILL\)"), "Valgrind cannot run this code (SIGILL)"),
    (re.compile(r"Process terminating with default action of signal (\d+) \((\w+)\)"),
     "the driver died under Valgrind (signal {0} {1})"),
)


def valgrind_trouble(text: str) -> str | None:
    """Why Valgrind stopped the driver, in words, or None."""
    for pattern, words in _VALGRIND_TROUBLE:
        m = pattern.search(text)
        if m:
            return words.format(*(g.strip() for g in m.groups()))
    return None


def count_instructions(build: Path, items: Mapping[str, int], *, block: int = DEFAULT_BLOCK,
                       keep_functions: int = 40, source: Path | None = None, cache: Path | None = None,
                       work: Path | None = None, timeout_s: float = 600.0,
                       log: Path | None = None) -> InstructionCounts:
    """Count the instructions of each item's fixed work in ``build`` (a build dir or its libwolfssl.a).

    ``items``: benchmark item name -> bytes (symmetric) or operations (asymmetric). Every item
    named comes back, measured or with the reason it was not (Valgrind missing: every item).
    StageError when the driver cannot be built.
    """

    started = time.monotonic()
    version = valgrind_version()
    if version is None:  # the worker's lack, not the code's: every item says so, none passes
        why = "valgrind is not installed on this worker (scripts/bootstrap.sh installs it)"
        return InstructionCounts([ItemCount(n, status=UNMEASURABLE, reason=why) for n in items],
                                 seconds=time.monotonic() - started)
    tree = BuiltTree.find(build, source)
    cache = cache or cache_root()
    program = build_driver(tree, cache, log)
    with contextlib.ExitStack() as stack:
        if work is None:  # the profiles are not kept unless asked for (the pipeline keeps them)
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bsdkm-instr-")))
        out = count_program(program, items, work, block=block, keep_functions=keep_functions,
                            timeout_s=timeout_s)
    counts = InstructionCounts(out, valgrind=version, seconds=time.monotonic() - started,
                               program=str(program))
    if log is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"# {PROGRAM}: {program} against {tree.build_dir}: {len(counts.measured)} of {len(out)} "
                    f"item(s) counted in {counts.seconds:.1f} s ({version})\n")
    return counts


def count_program(program: Path, items: Mapping[str, int], work: Path, *, block: int = DEFAULT_BLOCK,
                  keep_functions: int = 40, timeout_s: float = 600.0) -> list[ItemCount]:
    """``program`` (the driver, or one speaking its protocol) under Callgrind, into ``work``.

    One process for every item; where it dies (an instruction Valgrind cannot run), that item is
    unmeasurable with Valgrind's words and a new process runs the items after it.
    """
    # Valgrind runs inside the work directory: relative paths (the main job's bsdkm-out/...) would
    # name its log and profile files below that directory again.
    program, work = Path(program).resolve(), Path(work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    names = list(items)
    results: dict[str, ItemCount] = {}
    todo = list(range(len(names)))
    attempt = 0
    while todo:
        attempt += 1
        args = item_args({names[i]: items[names[i]] for i in todo}, block)
        measured, dead = _one_process(program, args, work / f"run{attempt}", timeout_s, keep_functions)
        for pos, count in measured.items():
            results[names[todo[pos]]] = count
        if dead is None:
            break
        pos, why = dead
        crashed = names[todo[pos]]
        results[crashed] = ItemCount(crashed, status=UNMEASURABLE, reason=why)
        todo = todo[pos + 1:]
    return [results.get(n) or ItemCount(n, status=MISSING, reason="the driver printed nothing for it")
            for n in names]


def _own_lines(lines: list[DriverLine], args: list[str]) -> list[DriverLine]:
    """The driver's lines for the items asked for, once each, in order, with the amount asked for.

    The measured code is the PR's and shares the driver's stdout: it can print ``bsdkm-instr``
    lines of its own. A line for another position or name, or a second line for one, is not the
    driver's; the amount of work is the one this side asked for, never what was printed, so a
    printed amount cannot shrink the per-byte count.
    """
    asked = []
    for arg in args:
        rest, _, block = arg.rpartition("@")
        name, _, amount = rest.rpartition("=")
        asked.append((name, int(amount), int(block)))
    out: list[DriverLine] = []
    for line in lines:
        pos = line.index - 1
        if pos != (out[-1].index if out else 0) or pos >= len(asked) or line.name != asked[pos][0]:
            continue
        _, amount, block = asked[pos]
        if line.ran:  # the driver rounds a per-byte amount up to whole blocks
            line.amount = amount if line.kind == "asym" else -(-amount // block) * block
        out.append(line)
    return out


def _one_process(program: Path, args: list[str], work: Path, timeout_s: float, keep: int
                 ) -> tuple[dict[int, ItemCount], tuple[int, str] | None]:
    """One Valgrind process over ``args``: counts by argument position, and where it died (if it did)."""
    work.mkdir(parents=True, exist_ok=True)
    out_file = work / "callgrind.out"
    vlog = work / "valgrind.log"
    stdout = work / "driver.log"
    argv = ["valgrind", "--tool=callgrind", f"--toggle-collect={MEASURED_FUNCTION}",
            f"--dump-after={MEASURED_FUNCTION}", "--compress-strings=no", "--compress-pos=no",
            f"--callgrind-out-file={out_file}", f"--log-file={vlog}", str(program), *args]
    res = run_logged(argv, cwd=work, log=stdout, timeout_s=timeout_s, header=False)
    lines = _own_lines(parse_driver_output(stdout.read_text(errors="replace")).lines, args)
    counts: dict[int, ItemCount] = {}
    part = 0
    for line in lines:
        pos = line.index - 1
        if not line.ran:
            counts[pos] = ItemCount(line.name, status=MISSING, reason=line.reason)
            continue
        part += 1
        path = Path(f"{out_file}.{part}")
        if line.rc != 0:
            counts[pos] = ItemCount(line.name, line.kind, line.amount, status=MISSING,
                                    reason=f"the operation failed (wolfCrypt error {line.rc})")
            continue
        try:
            profile = parse_callgrind(path.read_text(errors="replace"), str(path))
        except (OSError, InstructionsError) as e:
            counts[pos] = ItemCount(line.name, line.kind, line.amount, status=MISSING,
                                    reason=f"no profile: {e}")
            continue
        functions = _named(program, profile.functions)
        counts[pos] = ItemCount(line.name, line.kind, line.amount, profile.total, MEASURED,
                                functions=kept_functions(functions, keep))
    if res.timed_out:
        why = f"timed out after {timeout_s:g} s under Valgrind"
    elif res.exit_code != 0 or len(counts) < len(args):
        why = valgrind_trouble(vlog.read_text(errors="replace") if vlog.is_file() else "") or (
            f"the driver exited {res.exit_code} under Valgrind (see {vlog})")
    else:
        return counts, None
    died_at = next((i for i in range(len(args)) if i not in counts), None)
    if died_at is None:  # every item printed, the exit afterwards failed: the counts stand
        return counts, None
    return counts, (died_at, why)


def counts_for(config: Config, build_dir: Path, log: Path | None = None,
               say: Callable[[str], None] | None = None,
               starting: Callable[[], None] | None = None) -> InstructionCounts | None:
    """The policy's workload (``instructions.items``) counted in a made build; None when it names none.

    A driver that does not build is no stage failure (the wall-clock benchmark still ran): every
    item is then recorded as not counted, with the reason. ``starting`` is called before the counting
    begins (the stage's progress).
    """

    settings = load_policy(config.policy).instructions
    if not settings.enabled:
        return None
    if starting is not None:
        starting()
    try:
        # the profiles stay beside the log (the run's directory): the per-function evidence
        counts = count_instructions(build_dir, settings.items, block=settings.block_bytes,
                                    cache=cache_root(config), timeout_s=config.timeout("benchmark"), log=log,
                                    work=log.parent / "callgrind" if log is not None else None)
    except StageError as e:
        counts = InstructionCounts([ItemCount(n, status=UNMEASURABLE, reason=e.failure.message)
                                    for n in settings.items])
    except InstructionsError as e:  # what the driver (the PR's code) wrote: not counted, never a CI error
        counts = InstructionCounts([ItemCount(n, status=MISSING, reason=f"not counted: {e}")
                                    for n in settings.items])
    except Exception as e:  # noqa: BLE001 - the driver runs the PR's code: no count may turn the
        # stage's real results (a failed self-test) into an infrastructure failure that is retried
        why = f"not counted: reading the counts failed ({type(e).__name__}: {str(e)[:200]})"
        counts = InstructionCounts([ItemCount(n, status=MISSING, reason=why) for n in settings.items])
    if say is not None:
        missing = [f"{i.name}: {i.reason}" for i in counts.not_measured]
        say(f"instructions: {len(counts.measured)} of {len(counts.items)} item(s) counted in "
            f"{counts.seconds:.1f} s" + (f" (not counted: {'; '.join(missing)})" if missing else ""))
    return counts


def rebuilt_with(build: Path, changes: Mapping[str, str], dest: Path, *, jobs: int = 2,
                 timeout_s: float = 1800.0, log: Path | None = None) -> Path:
    """A copy of the made build ``build`` whose source has ``changes`` (path in the tree -> new text),
    made again incrementally: only what the changed files feed is recompiled, by the build's own
    Makefiles and flags. Returns the new build directory (``dest/build``).

    For measuring a source change without a full build (a planted change, two adjacent commits):
    the source is ``dest/src``, hard links to the original's files except the changed ones, so the
    original tree is never written; the build directory is copied and its paths moved to the copy.
    """
    tree = BuiltTree.find(build)
    src, new_build = dest / "src", dest / "build"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    shutil.copytree(tree.source, src, symlinks=True, copy_function=_link_or_copy)
    for rel, text in changes.items():
        target = src / rel
        if not target.resolve().is_relative_to(src.resolve()):
            raise ValueError(f"{rel}: not a path inside the source tree")
        target.unlink(missing_ok=True)  # a hard link: the original file must stay as it was
        target.write_text(text)
    shutil.copytree(tree.build_dir, new_build, symlinks=True)
    moves = [(str(tree.source), str(src)), (str(tree.build_dir), str(new_build))]
    for path in new_build.rglob("*"):
        if not path.is_file() or path.suffix in (".o", ".a", ".so") or path.is_symlink():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        moved = text
        for old, new in moves:
            moved = moved.replace(old, new)
        if moved != text:
            st = path.stat()
            path.write_text(moved)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # make must not see a changed Makefile
    blog = log or dest / "build.log"
    res = run_logged(["make", f"-j{jobs}", "src/libwolfssl.la"], cwd=new_build, log=blog, timeout_s=timeout_s)
    if res.exit_code != 0:
        raise real_error("build", "compile", f"the changed source did not build (see {blog})",
                         [str(blog)])
    return new_build


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


_ADDRESS = re.compile(r"^0x([0-9a-fA-F]+)$")


def _named(program: Path, functions: dict[str, int]) -> dict[str, int]:
    """Functions Callgrind could only show by address, named by the program's symbol table.

    Hand-written assembly (wolfSSL's ``*_asm.S``) often has symbols without a size, which Valgrind
    ignores; ``nm`` still knows the global symbol each address falls after.
    """
    if not any(_ADDRESS.match(name) for name in functions):
        return functions
    symbols = _global_symbols(program)
    out: dict[str, int] = {}
    for name, count in functions.items():
        m = _ADDRESS.match(name)
        if m and symbols:
            addr = int(m[1], 16)
            at = bisect.bisect_right(symbols, (addr, "\uffff")) - 1
            if at >= 0:
                start, symbol = symbols[at]
                name = symbol if start == addr else f"{symbol}+{addr - start:#x}"
        out[name] = out.get(name, 0) + count
    return out


def _global_symbols(program: Path) -> list[tuple[int, str]]:
    try:
        res = subprocess.run(["nm", "-n", "--defined-only", str(program)], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    out = []
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TW":
            out.append((int(parts[0], 16), parts[2]))
    return sorted(out)


# --------------------------------------------------------------------------- kernel targets' proxy

# What a kernel module's flags become in user space: the library alone, static (the driver links it).
PROXY_BASE_FLAGS = ("--enable-cryptonly", "--disable-shared", "--enable-static", "--disable-crypttests",
                    "--disable-examples", "--enable-jobserver=no")
_KERNEL_ONLY = ("linuxkm", "freebsdkm", "kernel")  # configure switches that only a module build has


def proxy_flags(flags: list[str] | tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A kernel variant's configure flags split into those a user-space build carries and those it cannot."""
    carried = [f for f in flags if not any(w in f for w in _KERNEL_ONLY)]
    return carried, [f for f in flags if f not in carried]


def proxy_build(config: Config, target: str, variant: str, source: Path, cache: Path, jobs: int,
                log: Path) -> tuple[Path, list[str], list[str]]:
    """A user-space static library built with a kernel variant's crypto flags: (build dir, carried,
    dropped). Cached by source and flags like the userspace builds (``userspace_build.py``)."""

    carried, dropped = proxy_flags(config.configure_flags(target, variant))
    args = [*PROXY_BASE_FLAGS, *carried]
    cflags = " ".join(config.cflags(target, variant))
    if cflags:
        args.append(f"CFLAGS={cflags}")
    build = UserspaceBuild(source=source, build_dir=cache / "build" / f"proxy-{build_key(source, args)}",
                           configure_args=args, jobs=jobs, env=compiler_env())
    build.configure(log, config.timeout("configure"))  # skipped when configured with the same arguments
    with build.locked():  # make is a no-op when nothing changed
        res = run_logged(["make", f"-j{jobs}", "src/libwolfssl.la"], cwd=build.build_dir, log=log,
                         timeout_s=config.timeout("build"), env=build.env)
    if res.exit_code != 0:
        raise real_error("build", "instructions", f"the user-space proxy of {target}/{variant} did not build "
                         f"(see {log})", [str(log)])
    return build.build_dir, carried, dropped


def proxy_counts(config: Config, target: str, variant: str, source: Path, cache: Path, jobs: int,
                 log: Path, say: Callable[[str], None] | None = None) -> InstructionCounts | None:
    """A kernel target's workload counted in its user-space proxy (``instructions.kernel_proxy``).

    The notes say what the proxy is: the flags it carried and those it could not (kernel-only
    switches), and that the module's kernel-only code is not in it.
    """

    settings = load_policy(config.policy).instructions
    if not (settings.enabled and settings.kernel_proxy):
        return None
    try:
        build_dir, carried, dropped = proxy_build(config, target, variant, source, cache, jobs, log)
    except StageError as e:
        return InstructionCounts([ItemCount(n, status=UNMEASURABLE, reason=e.failure.message)
                                  for n in settings.items])
    counts = counts_for(config, build_dir, log, say)
    if counts is None:
        return None
    facts = targets.get(target)
    own = {"linuxkm": "--enable-linuxkm and the kernel's headers",
           "bsdkm": "--enable-freebsdkm, the FreeBSD kernel's headers and its compiler (clang)"}.get(
        facts.source_dir if facts is not None and facts.source_dir else "", "the module build's own switches")
    counts.scope = "proxy"  # perf.kernel_counts.SCOPE_PROXY: the reports say it is not the module
    counts.notes += [
        f"{target}/{variant}: counted in a user-space proxy built with the variant's crypto flags "
        f"({' '.join(carried) or 'none'}); not carried: {' '.join([*dropped, own])}; the module's "
        "kernel-only code (its kernel glue, FPU handling, the kernel's own benchmark) is not counted",
    ]
    return counts
