"""The lkcapi variant's AF_ALG benchmark: what goes into the guest, what comes out.

A ``linux-kmod-qemu`` variant whose flags include ``--enable-linuxkm-lkcapi-register``
registers wolfCrypt with the Linux kernel crypto API. For such a variant this module

- builds ``kmod/linux/afalg_bench.c`` static, linked against a static userspace
  ``libwolfssl.a`` of the same variant flags so that the third path (wolfCrypt in user
  space) runs in the same guest, with the same loop and clock; if that library does not
  build, the program is built without it and the user path is missing from the results
  (the log says why);
- lays an overlay over the initramfs (``<vm dir>/initramfs.d``, picked up by
  ``linuxkm.make_initramfs``): the program, ``/etc/bsdkm-ci.d/after-load``
  (``kmod/linux/afalg-run.sh``) and the kernel's own AF_ALG/crypto modules of the
  kernel the module was built for;
- after the boot, copies the ``afalg-*`` lines of the console into ``afalg.log`` and
  parses it (``parsers/afalg_bench.py``).

Everything is cached under ``<cache>/afalg/<key>/`` by source, flags and program source.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

from ...runtime.locks import exclusive
from ...runtime.stage_error import real_error
from ...runtime.userspace_build import source_fingerprint
from .harness import LINUXKM_INPUTS, default_kernel_version, linux_kmod_dir, module_vermagic_version

LKCAPI_FLAG = "--enable-linuxkm-lkcapi-register"
PROGRAM = "bsdkm-afalg"
# The kernel's own side, in load order (modules.dep): AF_ALG itself, the GCM template and
# its parts, and the x86 drivers the kernel prefers when the CPU has AES-NI / SSSE3.
KERNEL_MODULES = (
    "af_alg", "algif_hash", "algif_skcipher", "algif_aead", "gf128mul", "ghash-generic", "ctr", "gcm",
    "cryptd", "crypto_simd", "aesni-intel", "sha256-ssse3",
)
# The static library for the user path: only what the benchmark calls.
USER_FLAGS = ("--enable-cryptonly", "--disable-shared", "--enable-static", "--disable-crypttests",
              "--disable-examples")
DEFAULT_BUDGET_MS = 100
DEFAULT_SIZES = (16, 64, 256, 1024, 4096, 16384, 65536)


def kmod_dir() -> Path:
    return linux_kmod_dir()


def wants_afalg(flags: list[str] | tuple[str, ...]) -> bool:
    """A variant that registers wolfCrypt with the kernel crypto API (and not ``=none``/``=no``)."""
    for f in flags:
        if f == LKCAPI_FLAG or (f.startswith(LKCAPI_FLAG + "=") and f.split("=", 1)[1] not in ("none", "no")):
            return True
    return False


def user_configure_flags(flags: list[str] | tuple[str, ...]) -> list[str]:
    """The variant's own flags for a userspace build: the kernel-only ones dropped."""
    own = [f for f in flags if "linuxkm" not in f and "freebsdkm" not in f and "kernel" not in f]
    return [*USER_FLAGS, *own]


def _cache_key(source: Path, flags: list[str], cflags: str) -> str:
    program = (kmod_dir() / "afalg_bench.c").read_bytes()
    ident = {"source": source_fingerprint(source, LINUXKM_INPUTS), "flags": flags, "cflags": cflags,
             "program": hashlib.sha256(program).hexdigest()}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:20]


def _run(cmd: list[str], cwd: Path, log: Path, timeout_s: float) -> int:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            return subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  check=False).returncode
        except subprocess.TimeoutExpired:
            out.write(f"# timed out after {timeout_s:.0f} s\n".encode())
            return 124


def _compile(out: Path, log: Path, lib_build: Path | None, source: Path | None) -> int:
    src = kmod_dir() / "afalg_bench.c"
    cmd = ["gcc", "-static", "-O2", "-Wall", "-o", str(out), str(src)]
    if lib_build is not None and source is not None:
        cmd[4:4] = ["-DAFALG_WOLFCRYPT", f"-I{lib_build}", f"-I{source}"]
        cmd += [str(lib_build / "src" / ".libs" / "libwolfssl.a"), "-lm", "-lpthread"]
    return _run(cmd, out.parent, log, 300)


def build_bench(source: Path, flags: list[str], cache: Path, *, jobs: int = 2, cflags: str = "",
                timeout_s: float = 1800.0, log: Path | None = None) -> Path:
    """The static ``bsdkm-afalg`` for these variant flags, built at most once per cache.

    With wolfCrypt linked in when the userspace library builds; StageError only when not even
    the AF_ALG-only program compiles.
    """
    user_flags = user_configure_flags(flags)
    key = _cache_key(source, user_flags, cflags)
    home = cache / "afalg" / key
    program, record = home / PROGRAM, home / "build.json"
    with exclusive(cache / "locks" / f"afalg-{key}.lock"):
        if not (record.is_file() and program.is_file()):
            home.mkdir(parents=True, exist_ok=True)
            blog = home / "build.log"
            blog.write_bytes(b"")
            started = time.monotonic()
            with_user = _build_user(source, home / "lib", user_flags, cflags, jobs, timeout_s, blog)
            rc = _compile(program, blog, home / "lib" if with_user else None, source if with_user else None)
            if rc != 0 and with_user:
                with_user = False
                rc = _compile(program, blog, None, None)
            if rc != 0:
                raise real_error("build", "compile", f"{PROGRAM} did not compile (see {blog})", [str(blog)])
            shutil.rmtree(home / "lib", ignore_errors=True)  # only the static program is kept
            record.write_text(json.dumps({"user_path": with_user, "configure_args": user_flags,
                                          "seconds": round(time.monotonic() - started, 1)}))
        if log is not None:
            info = json.loads(record.read_text())
            with open(log, "a", encoding="utf-8") as out:
                out.write(f"# {PROGRAM}: {program} (user path {'in' if info['user_path'] else 'NOT in'} it; "
                          f"libwolfssl.a configured with {' '.join(info['configure_args'])}; "
                          f"{info['seconds']} s)\n")
    return program


def _build_user(source: Path, build: Path, flags: list[str], cflags: str, jobs: int, timeout_s: float,
                log: Path) -> bool:
    """A static libwolfssl.a configured out of tree (the cached source stays untouched)."""
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    args = [str(source / "configure"), *flags, f"--enable-jobserver={jobs}"]
    if cflags:
        args.append(f"CFLAGS={cflags}")
    if _run(args, build, log, timeout_s) != 0:
        return False
    if _run(["make", f"-j{jobs}", "src/libwolfssl.la"], build, log, timeout_s) != 0:
        return False
    return (build / "src" / ".libs" / "libwolfssl.a").is_file()


def kernel_module_paths(kernel_version: str, root: Path = Path("/lib/modules")) -> list[Path]:
    """The kernel's own crypto modules for ``kernel_version`` that exist there, in load order."""
    base = root / kernel_version / "kernel"
    found: dict[str, Path] = {}
    for sub in ("crypto", "arch/x86/crypto"):
        for p in sorted((base / sub).glob("*.ko*")):
            found.setdefault(p.name.split(".ko")[0], p)
    return [found[name] for name in KERNEL_MODULES if name in found]


def make_overlay(program: Path, dest: Path, kernel_version: str, *, budget_ms: int = DEFAULT_BUDGET_MS,
                 sizes: tuple[int, ...] = DEFAULT_SIZES) -> Path:
    """``dest`` (``<vm dir>/initramfs.d``) with the program, the after-load hook and the modules."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "bin").mkdir(parents=True)
    (dest / "etc" / "bsdkm-ci.d").mkdir(parents=True)
    mods = dest / "lib" / "modules" / "afalg"
    mods.mkdir(parents=True)
    shutil.copy2(program, dest / "bin" / PROGRAM)
    hook = dest / "etc" / "bsdkm-ci.d" / "after-load"
    shutil.copy2(kmod_dir() / "afalg-run.sh", hook)
    hook.chmod(0o755)
    (dest / "etc" / "bsdkm-ci.d" / "afalg.conf").write_text(
        f"AFALG_BUDGET_MS={int(budget_ms)}\nAFALG_SIZES={','.join(str(s) for s in sizes)}\n")
    names = []
    for ko in kernel_module_paths(kernel_version):
        shutil.copy2(ko, mods / ko.name)
        names.append(ko.name)
    (mods / "order").write_text("".join(f"{n}\n" for n in names))
    return dest


def stage_overlay(program: str | None, ko: Path, vm_dir: Path) -> None:
    """Before a boot: the overlay for an lkcapi run, and none (a stale one removed) otherwise."""
    dest = vm_dir / "initramfs.d"
    shutil.rmtree(dest, ignore_errors=True)
    if not program:
        return
    vm_dir.mkdir(parents=True, exist_ok=True)
    make_overlay(Path(program), dest, module_vermagic_version(ko) or default_kernel_version())
