"""configure + make for one (target, variant), logged, timed, classified.

Userspace builds are out of tree (wolfSSL's automake tree supports VPATH), so the
cached autogen'd source is never written to. A build directory is keyed by
everything that goes into it (source identity, target, flags, CFLAGS), so a rerun
of the same inputs finds config.status and objects in place; ccache covers the
rest when present.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ... import targets
from ...config.bsdkm_yml import Config
from ...retry.classify_failure import Patterns, classify
from .locks import exclusive
from .proc import CommandResult, run_logged
from .stage_error import StageError

Progress = Callable[[str], None]
__all__ = [
    "CommandResult", "UserspaceBuild", "build_key", "compiler_env", "run_logged", "userspace_build",
    "userspace_flags",
]
KERNEL_FLAG_WORDS = ("linuxkm", "freebsdkm", "kernel", "linux-source")
USERSPACE = targets.USERSPACE.name


def userspace_flags(config: Config, variant: str) -> list[str]:
    """The target's flags and the variant's, without anything only a kernel build understands."""
    flags = config.configure_flags(USERSPACE, variant)
    return [f for f in flags if not any(w in f for w in KERNEL_FLAG_WORDS)]


def compiler_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base or os.environ)
    env.setdefault("LC_ALL", "C")  # error lines in English, whatever the worker's locale
    if shutil.which("ccache") and "CC" not in env:
        env["CC"] = "ccache gcc"
        # Different build directories must still share cache entries (-g would otherwise hash the cwd).
        env.setdefault("CCACHE_NOHASHDIR", "true")
    return env


@dataclass
class UserspaceBuild:
    """One out-of-tree userspace build of wolfSSL."""

    source: Path
    build_dir: Path
    configure_args: list[str]
    jobs: int
    env: dict[str, str] = field(default_factory=compiler_env)

    @property
    def stamp(self) -> Path:
        return self.build_dir / ".bsdkm-configure.json"

    def configured(self) -> bool:
        """Same arguments as the last successful configure, and configure itself unchanged."""
        if not (self.stamp.is_file() and (self.build_dir / "Makefile").is_file()):
            return False
        try:
            done = json.loads(self.stamp.read_text())
        except ValueError:
            return False
        return (
            done.get("args") == self.configure_args and done.get("configure_mtime") == self._configure_mtime()
        )

    def _configure_mtime(self) -> int:
        return (self.source / "configure").stat().st_mtime_ns

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """One configure/make at a time per build directory (runs and test sessions share them)."""
        return exclusive(self.build_dir.with_name(self.build_dir.name + ".lock"))

    def configure(self, log: Path, timeout_s: float, patterns: Patterns | None = None) -> CommandResult:
        with self.locked():
            return self._configure(log, timeout_s, patterns)

    def _configure(self, log: Path, timeout_s: float, patterns: Patterns | None = None) -> CommandResult:
        if self.configured():
            with open(log, "a") as out:
                out.write(f"# configure skipped: {self.build_dir} is configured with the same arguments\n")
            return CommandResult(0, 0.0, False)
        self.build_dir.mkdir(parents=True, exist_ok=True)
        self.stamp.unlink(missing_ok=True)
        cc = ["CC=" + self.env["CC"]] if "CC" in self.env else []
        res = self._checked("configure", [str(self.source / "configure"), *self.configure_args, *cc],
                            log, timeout_s, patterns)
        self.stamp.write_text(
            json.dumps({"args": self.configure_args, "configure_mtime": self._configure_mtime()})
        )
        return res

    def _checked(self, stage: str, argv: list[str], log: Path, timeout_s: float,
                 patterns: Patterns | None) -> CommandResult:
        """Run one build command in the build dir; a failure becomes a classified StageError."""
        res = run_logged(argv, cwd=self.build_dir, log=log, timeout_s=timeout_s, env=self.env)
        if res.exit_code != 0:
            raise StageError(classify(stage, exit_code=res.exit_code, output=_read(log),
                                      timed_out=res.timed_out, timeout_s=timeout_s, patterns=patterns,
                                      evidence=[str(log)]))
        return res

    def make(self, log: Path, timeout_s: float, patterns: Patterns | None = None) -> CommandResult:
        with self.locked():
            if not self.configured():
                self._configure(log, timeout_s, patterns)
            return self._make(log, timeout_s, patterns)

    def _make(self, log: Path, timeout_s: float, patterns: Patterns | None = None) -> CommandResult:
        res = self._checked("build", ["make", f"-j{self.jobs}"], log, timeout_s, patterns)
        for prog in self.programs().values():
            if not prog.is_file():
                raise StageError(
                    classify(
                        "build",
                        exit_code=0,
                        output=f"make succeeded but {prog} is missing",
                        patterns=patterns,
                        evidence=[str(log)],
                    )
                )
        return res

    def programs(self) -> dict[str, Path]:
        return {
            "testwolfcrypt": self.build_dir / "wolfcrypt" / "test" / "testwolfcrypt",
            "benchmark": self.build_dir / "wolfcrypt" / "benchmark" / "benchmark",
        }


def _read(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def build_key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:16]


def userspace_build(
    config: Config, variant: str, source: Path, source_id: str, cache: Path, jobs: int
) -> UserspaceBuild:
    cflags = " ".join(config.cflags(USERSPACE, variant))
    # make -jN is given by us, per run; configure's own jobserver would bake a -j into the
    # Makefile (and into the build's identity, defeating reuse across --jobs values).
    args = [*userspace_flags(config, variant), "--enable-jobserver=no"]
    if cflags:
        args.append(f"CFLAGS={cflags}")
    key = build_key(source, source_id, USERSPACE, args)
    # Named by inputs, not by variant: two variants with the same flags share one build.
    return UserspaceBuild(
        source=source,
        build_dir=cache / "build" / f"userspace-{key}",
        configure_args=args,
        jobs=jobs,
    )



SOURCE_SUFFIXES = frozenset({".c", ".h", ".S", ".s", ".asm", ".i"})
SOURCE_NAMES = frozenset({"configure", "Makefile", "Kbuild", "Makefile.am"})


def _is_module_input(path: Path) -> bool:
    # Objects and dependency files from someone else's in-tree build must not change the key.
    return path.is_file() and (path.suffix in SOURCE_SUFFIXES or path.name in SOURCE_NAMES)


def source_fingerprint(source: Path, parts: Sequence[str]) -> str:
    """Cheap identity of a tree's contents: names, sizes and mtimes of what goes into the module
    from ``parts`` (files or directories of the tree)."""
    digest = hashlib.sha256(str(source.resolve()).encode())
    for sub in parts:
        root = source / sub
        paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if _is_module_input(p))
        for p in paths:
            st = p.stat()
            digest.update(f"{p.relative_to(source)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()
