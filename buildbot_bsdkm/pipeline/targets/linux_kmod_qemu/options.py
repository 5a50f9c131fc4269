"""``linux-kmod-qemu``'s own keys under ``targets.linux-kmod-qemu``, read when the config loads."""

from __future__ import annotations

from dataclasses import dataclass

from ....support.yaml_schema import STRING, option


@dataclass(frozen=True)
class LinuxQemuOptions:
    # The Debian kernel to build against and boot; None: the newest /boot/vmlinuz-* with headers.
    kernel_version: str | None = option(STRING)
    cpu: str | None = option(STRING)  # QEMU's -cpu; None: the harness's own default
