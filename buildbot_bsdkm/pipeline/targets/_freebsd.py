"""What the two FreeBSD module targets share, owned by neither: the packaged kmod files, the
module's base configure flags and the check of a variant's own flag."""

from __future__ import annotations

import os
from pathlib import Path

from ...support.resources import kmod_dir

KMOD_DIR = kmod_dir("freebsd")  # package data


def freebsd_kmod_dir() -> Path:
    """The worker scripts, ``$BSDKM_KMOD_FREEBSD`` read at each call, else the packaged ``KMOD_DIR``."""
    return Path(os.environ.get("BSDKM_KMOD_FREEBSD") or KMOD_DIR)


# --enable-crypttests is the default, but the self-test at load is the point of the run.
FREEBSD_BASE_FLAGS = (
    "--enable-freebsdkm",
    "--enable-cryptonly",
    "--enable-crypttests",
    "--enable-kernel-benchmarks",
)
# Options that only make sense for the Linux module: a variant carrying one is a config mistake.
LINUX_ONLY_PREFIXES = ("--enable-linuxkm", "--with-linux-source", "--with-linux-arch")


class FreeBSDFlagError(ValueError):
    """A configure flag that cannot be used for the FreeBSD module; the message names it."""


def check_flag(flag: str) -> None:
    if not isinstance(flag, str) or not flag.strip():
        raise FreeBSDFlagError(f"configure flag {flag!r} is empty or not text")
    if flag.startswith(LINUX_ONLY_PREFIXES):
        raise FreeBSDFlagError(f"configure flag {flag!r} is for the Linux module, not freebsd-kmod")
    if not flag.startswith("--") and "=" not in flag:
        raise FreeBSDFlagError(f"configure flag {flag!r} is neither --option nor VAR=value")
