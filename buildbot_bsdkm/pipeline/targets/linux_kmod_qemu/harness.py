"""wolfSSL's Linux kernel module (linuxkm) built against Debian's headers and run in QEMU.

Target ``linux-kmod-qemu``. The guest side lives in ``kmod/linux/`` (a static ``finit_module``
loader, the initramfs ``/init`` with ``### bsdkm-ci:`` markers, ``mkinitramfs.sh``); this module
builds the module and the initramfs, boots them through the guest layer (``runtime.guest``), keeps
built modules in the cache, and turns the console (``parsers.linux_console``, by ``MARKERS``) into
a ``ModuleLoadOutcome``. Benchmark and self-test lines are left to the parsers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ....config.bsdkm_yml import Config
from ....parsers.guest_markers import MarkerTable
from ....parsers.linux_console import ConsoleReport, read_console_lines
from ....retry.classify_failure import KERNEL_BEFORE_MODULE, Patterns, classify, first_compile_error
from ....support.resources import kmod_dir
from ...runtime.console_lines import console_lines
from ...runtime.guest import CountRequest, CountSpec, VmOptions, launch, new_nonce, request_count
from ...runtime.loading import ModuleLoadOutcome, outcome_record
from ...runtime.locks import exclusive
from ...runtime.proc import CONSOLE_FLOOD, Watched, run_logged
from ...runtime.qemu_plugin import COUNT_FILE, module_layout
from ...runtime.stage_error import StageError, infra_error, real_error
from ...runtime.userspace_build import source_fingerprint
from ..base import Prerequisite

BOOT_DIR = Path("/boot")
KERNEL_VERSION_KEY = "targets.linux-kmod-qemu.kernel_version"
HEADER_DIRS = (Path("/usr/src"),)
KMOD_DIR = kmod_dir("linux")  # package data: the harness scripts, loader and test modules


def linux_kmod_dir() -> Path:
    """The harness directory: ``$BSDKM_KMOD_LINUX`` read at each call, else the packaged ``KMOD_DIR``."""
    return Path(os.environ.get("BSDKM_KMOD_LINUX") or KMOD_DIR)

LINUXKM_FLAGS = (
    "--enable-linuxkm", "--enable-cryptonly", "--enable-crypttests", "--enable-linuxkm-benchmarks",
)
# What wolfSSL's own linuxkm workflow uses: every benchmark item runs once, briefly.
SHORT_BENCH_CFLAGS = "-DBENCH_EMBEDDED -DBENCH_MIN_RUNTIME_SEC=0.01 -DBENCH_NTIMES=1 -DBENCH_AGREETIMES=1"
# -pg: Debian's headers ask for ftrace hooks the module cannot use; no signing key on workers.
MAKE_VARS = ("KERNEL_EXTRA_CFLAGS_REMOVE=-pg", "FORCE_NO_MODULE_SIG=1")
MODULE_RELPATH = Path("linuxkm") / "libwolfssl.ko"
TEST_MODULES = ("bsdkm_ok", "bsdkm_initfail", "bsdkm_hang", "bsdkm_panic", "bsdkm_forge", "bsdkm_flood")
UNLOAD_TIMEOUT_S = 60  # the guest's watchdog for the unload


# --------------------------------------------------------------------------- kernels on this worker


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


def installed_kernel_versions(boot: Path = BOOT_DIR) -> list[str]:
    """Versions with a ``/boot/vmlinuz-<version>`` image, oldest first."""
    versions = [p.name.removeprefix("vmlinuz-") for p in boot.glob("vmlinuz-*")]
    return sorted(versions, key=_version_key)


def headers_for(version: str) -> Path | None:
    """The kbuild tree for ``version`` (Debian: ``/usr/src/linux-headers-<version>``)."""
    candidates = [d / f"linux-headers-{version}" for d in HEADER_DIRS]
    candidates.append(Path("/lib/modules") / version / "build")
    for cand in candidates:
        if (cand / "Makefile").is_file():
            return cand.resolve()
    return None


def kernel_image(kernel_version: str, boot: Path = BOOT_DIR) -> Path:
    image = boot / f"vmlinuz-{kernel_version}"
    if not image.is_file():
        have = ", ".join(installed_kernel_versions(boot)) or "none"
        raise infra_error("load", "worker-setup",
                          f"no kernel image {image} (installed: {have}); install linux-image-amd64")
    return image


def default_kernel_version(boot: Path = BOOT_DIR) -> str:
    """The newest installed kernel that also has its headers installed."""
    versions = installed_kernel_versions(boot)
    usable = [v for v in versions if headers_for(v) is not None]
    if not usable:
        have = ", ".join(versions) or "no /boot/vmlinuz-*"
        raise infra_error("build", "worker-setup",
                          f"no installed kernel has matching headers ({have}); "
                          "install linux-image-amd64 and linux-headers-amd64")
    return usable[-1]


def linux_source_dir(kernel_version: str | None = None) -> Path:
    """Headers matching an installed ``/boot/vmlinuz``: what ``--with-linux-source=`` wants."""
    version = kernel_version or default_kernel_version()
    kernel_image(version)
    headers = headers_for(version)
    if headers is None:
        raise infra_error("build", "worker-setup",
                          f"kernel {version} is installed but its headers are not "
                          f"(no /usr/src/linux-headers-{version}); install linux-headers-{version}")
    return headers


def kernel_prerequisites(kernel_version: str | None = None, boot: Path = BOOT_DIR) -> list[Prerequisite]:
    """The kernel image QEMU boots and the headers the module is built against, one line each.

    Without ``kernel_version`` the kernel is the one ``default_kernel_version`` would take: the newest
    with its headers, else the newest installed (whose headers are then what is missing).
    """
    versions = installed_kernel_versions(boot)
    if kernel_version:
        version: str | None = kernel_version
        image_fix = f"install linux-image-{kernel_version}, or set {KERNEL_VERSION_KEY} to an installed one"
        headers_fix = f"install linux-headers-{kernel_version}"
    else:
        usable = [v for v in versions if headers_for(v) is not None]
        version = (usable or versions or [None])[-1]
        image_fix = "install linux-image-amd64"
        headers_fix = f"install linux-headers-{version}" if version else "install linux-headers-amd64"
    if version is None:
        return [Prerequisite("Linux kernel image", False, f"no {boot}/vmlinuz-*", image_fix),
                Prerequisite("Linux kernel headers", False, "no kernel installed", headers_fix)]
    image, headers = boot / f"vmlinuz-{version}", headers_for(version)
    installed = ", ".join(versions) or "none"
    return [
        Prerequisite("Linux kernel image", True, str(image)) if image.is_file() else
        Prerequisite("Linux kernel image", False, f"no {image} (installed: {installed})", image_fix),
        Prerequisite("Linux kernel headers", True, str(headers)) if headers is not None else
        Prerequisite("Linux kernel headers", False, f"no /usr/src/linux-headers-{version}", headers_fix),
    ]


# --------------------------------------------------------------------------- building the module


@dataclass(frozen=True)
class LinuxModuleSpec:
    """How to build one libwolfssl.ko: variant flags, extra CFLAGS, target kernel."""

    variant_flags: tuple[str, ...] = ()
    cflags: str = ""
    kernel_version: str | None = None

    def configure_args(self, headers: Path, jobs: int) -> list[str]:
        args = ["./configure", *LINUXKM_FLAGS, f"--with-linux-source={headers}",
                f"--enable-jobserver={jobs}", *self.variant_flags]
        if self.cflags:
            args.append(f"CFLAGS={self.cflags}")
        return args


@dataclass
class BuiltModule:
    ko: Path
    build_log: Path
    seconds: float  # configure + make, as measured when it was built
    cached: bool  # True when this call reused an earlier build
    key: str
    configure_args: list[str] = field(default_factory=list)


def _checked(stage: str, cmd: list[str], cwd: Path, log: Path, timeout_s: float,
             patterns: Patterns | None) -> None:
    """Run one build command; a failure is classified like every other build's (a timeout on a
    shared worker is infrastructure, a compiler error real, the config's patterns first)."""
    res = run_logged(cmd, cwd=cwd, log=log, timeout_s=timeout_s)
    if res.exit_code != 0:
        raise StageError(classify(stage, exit_code=res.exit_code, output=log.read_text(errors="replace"),
                                  timed_out=res.timed_out, timeout_s=timeout_s, patterns=patterns,
                                  evidence=[str(log)]))


def build_linux_module(source: Path, build_dir: Path, spec: LinuxModuleSpec, *, jobs: int = 2,
                       timeout_s: float = 1800.0, patterns: Patterns | None = None) -> BuiltModule:
    """Copy ``source`` to ``build_dir``, configure for linuxkm and make; StageError on failure.

    A copy because configure writes into the tree and the cached source is shared.
    """
    if not (source / "configure").is_file():
        raise real_error("configure", "configure",
                         f"{source} is not an autogen'd wolfSSL tree (no configure)")
    headers = linux_source_dir(spec.kernel_version)
    if build_dir.exists():
        shutil.rmtree(build_dir)
    shutil.copytree(source, build_dir, symlinks=True)
    log = build_dir / "build.log"
    log.write_bytes(b"")
    started = time.monotonic()
    args = spec.configure_args(headers, jobs)
    _checked("configure", args, build_dir, log, timeout_s, patterns)
    remaining = max(60.0, timeout_s - (time.monotonic() - started))
    _checked("build", ["make", f"-j{jobs}", *MAKE_VARS], build_dir, log, remaining, patterns)
    ko = build_dir / MODULE_RELPATH
    if not ko.is_file():
        raise real_error("build", "compile", f"make succeeded but produced no {MODULE_RELPATH}", [str(log)])
    return BuiltModule(ko, log, time.monotonic() - started, False, "", args)


LINUXKM_INPUTS = ("configure", "wolfcrypt/src", "wolfssl", "linuxkm")


def module_cache_key(source: Path, spec: LinuxModuleSpec) -> str:
    version = spec.kernel_version or default_kernel_version()
    ident = {"source": source_fingerprint(source, LINUXKM_INPUTS), "flags": list(spec.variant_flags),
             "cflags": spec.cflags, "kernel": version, "make": list(MAKE_VARS), "base": list(LINUXKM_FLAGS)}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def cached_linux_module(source: Path, spec: LinuxModuleSpec, cache: Path, *, jobs: int = 2,
                        timeout_s: float = 1800.0, patterns: Patterns | None = None) -> BuiltModule:
    """The module for (source, flags, CFLAGS, kernel), built at most once per cache.

    Only the .ko, the build log and a record are kept; the ~300 MB build tree is removed.
    """
    key = module_cache_key(source, spec)
    home = cache / "linuxkm" / key
    record = home / "build.json"
    with exclusive(cache / "locks" / f"linuxkm-{key}.lock"):
        if record.is_file() and (home / "libwolfssl.ko").is_file():
            info = json.loads(record.read_text())
            return BuiltModule(home / "libwolfssl.ko", home / "build.log", info["seconds"], True, key,
                               info["configure_args"])
        work = home.with_name(key + ".build")
        try:
            built = build_linux_module(source, work, spec, jobs=jobs, timeout_s=timeout_s, patterns=patterns)
            home.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built.ko, home / "libwolfssl.ko")
            shutil.copy2(built.build_log, home / "build.log")
            record.write_text(json.dumps({"seconds": built.seconds, "configure_args": built.configure_args,
                                          "source": str(source)}))
        except Exception:
            # Keep the log where the StageError's evidence can still be read.
            if (work / "build.log").is_file():
                home.mkdir(parents=True, exist_ok=True)
                shutil.copy2(work / "build.log", home / "build-failed.log")
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return BuiltModule(home / "libwolfssl.ko", home / "build.log", built.seconds, False, key,
                       built.configure_args)


def build_test_modules(out_dir: Path, kernel_version: str | None = None, *,
                       timeout_s: float = 600.0) -> dict[str, Path]:
    """Build the harness's own small modules (``kmod/linux/testmods``) into ``out_dir``."""
    headers = linux_source_dir(kernel_version)
    src = linux_kmod_dir() / "testmods"
    if not src.is_dir():
        raise infra_error("build", "worker-setup", f"test module sources not found at {src}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    shutil.copytree(src, out_dir)
    log = out_dir / "build.log"
    res = run_logged(["make", f"KDIR={headers}"], cwd=out_dir, log=log, timeout_s=timeout_s)
    if res.exit_code != 0:
        line = first_compile_error(log.read_text(errors="replace")) or f"exit status {res.exit_code}"
        raise real_error("build", "compile", f"test modules did not build: {line}", [str(log)])
    return {name: out_dir / f"{name}.ko" for name in TEST_MODULES}


# --------------------------------------------------------------------------- reading the console


# /init's markers (kmod/linux/init.sh), each ending with the boot's nonce (``nonce=``), which /init
# read once and removed from the image before the module loads: a marker the module prints is not taken.
MARKERS = MarkerTable(facts={"module": r"module path=\S+ name=(\S+).*", "tainted": r"tainted=(\d+)"})


def read_console(path: Path, nonce: str | None = None) -> ConsoleReport:
    """Markers of a console log; a missing, unreadable or empty log gives an empty report."""
    try:
        return read_console_lines(console_lines(path), MARKERS, nonce)
    except OSError:
        # Judged like a VM that printed nothing: the notes then say /init never ran.
        return ConsoleReport()


# --------------------------------------------------------------------------- console -> outcome


def _stage_times(report: ConsoleReport) -> dict[str, float]:
    """Guest-clock durations: boot (to /init), load (finit_module) and unload."""
    stages: dict[str, float] = {}
    boot = report.uptime_of("init begin")
    if boot is not None:
        stages["boot"] = boot
    for step in ("load", "unload"):
        begin, end = report.uptime_of(f"{step} begin"), report.uptime_of(f"{step} rc=")
        if begin is not None and end is not None:
            stages[step] = round(end - begin, 2)
    return stages


def _notes(report: ConsoleReport, run: Watched, qemu_stderr: str) -> list[str]:
    notes = []
    if report.load_errno is not None:
        notes.append(f"finit_module failed: errno {report.load_errno} ({report.load_error_text or '?'})")
    if report.unload_errno is not None:
        notes.append(f"delete_module failed: errno {report.unload_errno}")
    if report.guest_timeout_stage:
        notes.append(f"module {report.guest_timeout_stage} did not return before the guest watchdog fired")
    if report.panic and not report.markers:
        # The kernel's own boot fell over (under TCG on a loaded host: "IO-APIC + timer doesn't
        # work"); /init loads the module, so none of the PR's code had run.
        notes.append(f"{KERNEL_BEFORE_MODULE}: {report.panic}")
    elif report.panic:
        notes.append(f"kernel panic: {report.panic}")
    if not report.markers and not run.timed_out:
        notes.append("no bsdkm-ci marker on the console: the initramfs /init never ran")
    elif not report.seen("poweroff") and not run.timed_out:
        notes.append(f"VM stopped before powering off; last marker: {report.last_marker!r}")
    if run.timed_out:
        notes.append(f"VM killed by the host timeout during {report.stage_in_progress()}")
    elif run.stopped == CONSOLE_FLOOD:
        notes.append(f"VM stopped at the console cap: the guest printed {run.log_bytes} bytes")
    elif run.exit_code != 0:
        tail = qemu_stderr.strip().splitlines()[-1:] or ["no stderr"]
        notes.append(f"qemu exited {run.exit_code}: {tail[0]}")
    if report.imitations:
        lines = ", ".join(str(n) for n in report.imitations[:5])
        notes.append(f"console lines that imitate the harness's markers were ignored (line {lines})")
    return notes


def outcome_from_console(console: Path, run: Watched, *, qemu_stderr: str = "",
                         extra_logs: dict[str, Path] | None = None,
                         nonce: str | None = None) -> ModuleLoadOutcome:
    """Judge a finished VM run from its console log and how QEMU ended (``nonce``: the boot's)."""
    report = read_console(console, nonce)
    timed_out_stage = report.guest_timeout_stage or (report.stage_in_progress() if run.timed_out else None)
    stages = _stage_times(report)
    stages["vm"] = round(run.seconds, 2)
    return ModuleLoadOutcome(
        kernel_log=console,
        load_rc=report.load_rc,
        unload_rc=report.unload_rc,
        timed_out=timed_out_stage is not None,
        timed_out_stage=timed_out_stage,
        duration_s=run.seconds,
        loaded_seen=report.module_listed,
        stages=stages,
        notes=_notes(report, run, qemu_stderr),
        extra_logs=dict(extra_logs or {}),
        load_errno=report.load_errno,
        unload_errno=report.unload_errno,
        console_flood_bytes=run.log_bytes if run.stopped == CONSOLE_FLOOD else None,
    )


# --------------------------------------------------------------------------- running a module


def module_vermagic_version(ko: Path) -> str | None:
    """The kernel release a module was built for (first word of ``vermagic``)."""
    try:
        out = subprocess.run(["modinfo", "-F", "vermagic", str(ko)], capture_output=True, text=True,
                             timeout=30, check=False).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[0] if out else None


def _script(name: str) -> Path:
    path = linux_kmod_dir() / name
    if not path.is_file():
        raise infra_error("load", "worker-setup", f"harness script missing: {path} (set BSDKM_KMOD_LINUX)")
    return path


def make_initramfs(ko: Path, out: Path, params: str = "", nonce: str | None = None) -> Path:
    """``mkinitramfs.sh`` around ``ko``; StageError with the script's reason on failure.

    ``nonce``: what /init appends to its markers (read once, then removed from the image's files).
    """
    cmd = ["sh", str(_script("mkinitramfs.sh")), str(ko), str(out)] + ([params] if params else [])
    extra = out.parent / "initramfs.d"  # laid over the image when a variant put files there (afalg.py)
    env = dict(os.environ)
    env.pop("BSDKM_CI_NONCE", None)
    if extra.is_dir():
        env["INITRAMFS_EXTRA"] = str(extra)
    if nonce:
        env["BSDKM_CI_NONCE"] = nonce
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise infra_error("load", "worker-setup", "mkinitramfs.sh timed out after 300 s") from None
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        raise infra_error("load", "worker-setup", f"initramfs not built: {reason}")
    return out


def _resolve_kernel(ko: Path, kernel_version: str | None) -> str:
    """Explicit version, else the one the module was built for, else the newest with headers."""
    if kernel_version:
        kernel_image(kernel_version)
        return kernel_version
    built_for = module_vermagic_version(ko)
    if built_for:
        kernel_image(built_for)  # a module for a kernel we cannot boot is a setup problem: say so now
        return built_for
    return default_kernel_version()


def machine(kernel: Path, initrd: Path, *, load_timeout_s: int, unload_timeout_s: int) -> list[str]:
    """What QEMU boots: Debian's kernel with the initramfs; the guest watchdogs on its command line."""
    append = (f"console=ttyS0 quiet panic=-1 bsdkm_ci.load_timeout={load_timeout_s} "
              f"bsdkm_ci.unload_timeout={unload_timeout_s}")
    return ["-kernel", str(kernel), "-initrd", str(initrd), "-append", append]


def boot_vm(initrd: Path, console: Path, *, kernel_version: str, timeout_s: int, load_timeout_s: int,
            options: VmOptions, qemu_log: Path, plugin: str | None = None,
            unload_timeout_s: int = UNLOAD_TIMEOUT_S) -> Watched:
    """One boot of the initramfs, stopped at ``timeout_s`` (``Watched.timed_out``: the host's limit hit)."""
    initrd, console, qemu_log = Path(initrd).resolve(), Path(console).resolve(), Path(qemu_log).resolve()
    boots = machine(kernel_image(kernel_version), initrd, load_timeout_s=load_timeout_s,
                    unload_timeout_s=unload_timeout_s)
    return launch(boots, console, options=options, timeout_s=timeout_s, plugin=plugin, qemu_log=qemu_log)


def guest_load_timeout(timeout_s: int) -> int:
    """Leave the guest time to boot, dump its log and power off after its own load watchdog.

    A host kill loses the load's kernel log, so the margin grows with the limit: a starved TCG
    guest has needed 30 s just to reach /init.
    """
    if timeout_s <= 120:
        return max(1, timeout_s // 2)
    return timeout_s - max(60, timeout_s // 5)


def run_linux_module(ko: Path, work_dir: Path, *, timeout_s: int, kernel_version: str | None = None,
                     load_timeout_s: int | None = None, options: VmOptions | None = None,
                     params: str = "", count: CountRequest | None = None) -> ModuleLoadOutcome:
    """Boot ``ko`` in a fresh QEMU VM: load once, unload, power off; judge from the console.

    ``count``: load the instruction-counting plugin, told this boot's nonce (``prepare_count``).

    Bad inputs (missing module, no kernel image, broken harness) raise StageError with the
    reason; anything the module or VM does is reported in the outcome, never raised.
    """
    ko, work_dir = Path(ko).resolve(), Path(work_dir).resolve()
    if not ko.is_file():
        raise real_error("load", "load-error", f"kernel module not found: {ko}")
    if timeout_s <= 0:
        raise real_error("load", "load-error", f"timeout must be positive seconds, got {timeout_s}")
    version = _resolve_kernel(ko, kernel_version)
    work_dir.mkdir(parents=True, exist_ok=True)
    nonce = new_nonce()  # this boot's: a module cannot print the markers /init prints
    initrd = make_initramfs(ko, work_dir / "initramfs.cpio.gz", params, nonce)
    console, qemu_log = work_dir / "console.log", work_dir / "qemu.log"
    plugin = count.plugin_arg(work_dir / COUNT_FILE, nonce) if count is not None else None
    run = boot_vm(initrd, console, kernel_version=version, timeout_s=timeout_s,
                  load_timeout_s=load_timeout_s or guest_load_timeout(timeout_s),
                  options=options or VmOptions(), qemu_log=qemu_log, plugin=plugin)
    return outcome_from_console(console, run, qemu_stderr=qemu_log.read_text(errors="replace")
                                if qemu_log.is_file() else "",
                                extra_logs={"console": console, "qemu": qemu_log}, nonce=nonce)


# --------------------------------------------------------------------------- counting the module


# The lkcapi variant's AF_ALG benchmark program does the counted work (``afalg-count:`` lines).
COUNTING = CountSpec()


def prepare_count(config: Config, ko: Path, work: Path) -> CountRequest | None:
    """The count of this boot, when the policy asks for it and the guest drives the module's
    entry points (an lkcapi variant's AF_ALG overlay); None otherwise. A plugin that cannot be
    built or loaded leaves its reason in ``COUNT_UNAVAILABLE`` and the boot runs without it."""
    conf = work / "initramfs.d" / "etc" / "bsdkm-ci.d" / "afalg.conf"
    request = request_count(config, work, COUNTING, lambda: module_layout(ko), wanted=conf.is_file())
    if request is None:
        return None
    plan = request.plan
    with open(conf, "a", encoding="utf-8") as f:
        f.write(f"AFALG_COUNT_BYTES={plan.bytes}\nAFALG_COUNT_SIZES={','.join(str(x) for x in plan.sizes)}\n")
        if request.ranges:  # the module's other executable sections: the guest places each
            f.write(f"AFALG_COUNT_SECTIONS={','.join(request.ranges)}\n")
    return request


# --------------------------------------------------------------------------- by hand


def main(argv: list[str] | None = None) -> int:
    """One VM run: ``python -m buildbot_bsdkm.pipeline.targets.linux_kmod_qemu.harness KO WORK_DIR``.

    Prints the outcome as JSON; exit 0 when load and unload both succeeded, 1 when not,
    2 when the inputs or the worker are unusable (reason on stderr).
    """
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m buildbot_bsdkm.pipeline.targets.linux_kmod_qemu.harness")
    parser.add_argument("ko", type=Path)
    parser.add_argument("work_dir", type=Path)
    parser.add_argument("--timeout", type=int, default=600, help="whole-VM limit in seconds")
    parser.add_argument("--load-timeout", type=int, default=None, help="guest watchdog for the load")
    parser.add_argument("--cpu", default="max", help='QEMU -cpu model, e.g. "max,-adx,-bmi2"')
    parser.add_argument("--kernel", default=None, help="kernel version (default: the module's vermagic)")
    args = parser.parse_args(argv)

    try:
        outcome = run_linux_module(args.ko, args.work_dir, timeout_s=args.timeout,
                                   load_timeout_s=args.load_timeout, kernel_version=args.kernel,
                                   options=VmOptions(cpu=args.cpu))
    except StageError as e:
        print(f"linuxkm: {e}", file=sys.stderr)
        return 2
    print(json.dumps(outcome_record(outcome), indent=2))
    return 0 if outcome.load_rc == 0 and outcome.unload_rc == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
