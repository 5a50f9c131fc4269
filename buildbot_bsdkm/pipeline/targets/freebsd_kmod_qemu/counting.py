"""A crypto-register module's instructions counted inside the FreeBSD guest (the QEMU TCG plugin).

With the policy's ``instructions.kernel_count`` on and a module that registers with opencrypto,
the release kernel's kldload boot also counts fixed work through ``/dev/crypto``:

- ``prepare_count`` asks the guest layer (``runtime.guest.request_count``) for the plugin, reads the
  ``.ko``'s ``.text`` size, its function symbols and how the guest finds ``.text``'s base. Besides
  ``.text`` the plugin counts the module's whole mapping (``MODULE_RANGE``, which ``kldinit``
  declares from ``kldstat``'s address and size before the first item): code the module placed in
  another executable section is counted too, as ``(module)`` where no ``.text`` function holds it.
  The base is the module's load address (``kldstat``) when ``.text`` is the first section FreeBSD's linker
  places (``text_load_offset``); a global function's address (``kldsym``) less its offset checks it,
  or stands in when ``.text`` is not first. wolfSSL's module is built with ``EXPORT_SYMS=NO``, which
  makes every symbol local, and ``kldsym`` may not see local symbols: the load address is the path
  a default build takes;
- the loader puts the request in the kernel environment (``kenv_lines``), where ``kldinit`` reads
  it before the module loads; after ``kldstat`` it runs AES-128-GCM and AES-128-CBC bound to
  wolfSSL's driver by name, each item between the plugin's start and stop signals;
- QEMU runs with the plugin told this boot's nonce and the kernel's upper 2 GiB as the area to
  instrument (FreeBSD/amd64 puts kernel modules there);
- ``runtime.guest.read_counts`` turns the plugin's file and kldinit's ``crypto-count:`` lines
  (``COUNTING``) into the run's ``InstructionCounts`` (``scope="module"``), items named like the
  Linux module's (``kmod:AES-128-GCM@1024``).

A plugin that cannot be built or loaded leaves one sentence in ``COUNT_UNAVAILABLE``; the boot runs
without it and every item is *not counted* with that reason, never a pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ....config.bsdkm_yml import Config
from ....perf.kernel_counts import (
    FREEBSD_ALGS,
    FREEBSD_HARNESS_PREFIX,
    KernelCountError,
    TextLayout,
    text_anchor,
    text_layout,
    text_load_offset,
)
from ...runtime.guest import CountRequest, CountSpec, request_count
from ...runtime.qemu_plugin import PluginUnavailable, readelf_tables

# FreeBSD/amd64 links kernel modules for the kernel code model: they live above KERNBASE.
AREA = "ffffffff80000000-fffffffffffff000"
# The plugin's range 1: the module's whole mapping, sized by the guest (kldstat).
MODULE_RANGE = "module"
# A symbol every crypto-register build has; any global function of .text would do.
PREFERRED_ANCHORS = ("wc_AesGcmEncrypt", "wc_AesCbcEncrypt", "wolfCrypt_Init")
COUNTING = CountSpec(FREEBSD_ALGS, FREEBSD_HARNESS_PREFIX, "kldinit.c", AREA)


@dataclass(frozen=True)
class BootCount:
    """The plugin for one kldload boot, and how kldinit finds the module's ``.text`` in the guest."""

    request: CountRequest
    text_offset: int | None  # .text's offset from the load address kldstat gives
    anchor: str | None = None  # a global function of .text, for kldsym
    anchor_offset: int = 0

    def plugin_arg(self, out: Path, nonce: str) -> str:
        return self.request.plugin_arg(out, nonce)

    def kenv_lines(self) -> list[str]:
        """The loader's ``set`` lines kldinit reads (before it loads the module)."""
        plan = self.request.plan
        lines = [f"set bsdkm_ci.count_bytes={plan.bytes}",
                 f"set bsdkm_ci.count_sizes={','.join(str(s) for s in plan.sizes)}"]
        if self.text_offset is not None:
            lines.append(f"set bsdkm_ci.count_text_off={self.text_offset:x}")
        if self.anchor is not None:
            lines += [f"set bsdkm_ci.count_anchor={self.anchor}",
                      f"set bsdkm_ci.count_anchor_off={self.anchor_offset:x}"]
        return lines


class _Placement:
    """The module's code as the plugin counts it (``.text``, and its whole mapping as range 1), and
    where kldinit finds ``.text``: read from the ``.ko`` when the count is prepared."""

    def __init__(self, ko: Path) -> None:
        self.ko = ko
        self.text_offset: int | None = None
        self.anchor: str | None = None
        self.anchor_offset = 0

    def __call__(self) -> TextLayout:
        name = self.ko.name
        sections, symbols = readelf_tables(self.ko)
        try:
            layout = text_layout(sections, symbols, other_sections=False).with_range(MODULE_RANGE)
        except KernelCountError as e:
            raise PluginUnavailable(f"{name}: {e}") from None
        self.text_offset = text_load_offset(sections)
        try:
            self.anchor, self.anchor_offset = text_anchor(sections, symbols, PREFERRED_ANCHORS)
        except KernelCountError as e:
            if self.text_offset is None:
                raise PluginUnavailable(f"{name}: .text is not the first section the kernel's linker "
                                        f"places, and {e}") from None
        return layout


def prepare_count(config: Config, ko: Path, work: Path, *, crypto: bool, mode: str) -> BootCount | None:
    """The count of this boot when the policy asks for it, the module registers with opencrypto and
    the boot runs kldinit (kldload); None otherwise, or when the plugin cannot count (the reason
    left in ``COUNT_UNAVAILABLE``)."""
    where = _Placement(ko)
    request = request_count(config, work, COUNTING, where, wanted=crypto and mode == "kldload")
    if request is None:
        return None
    return BootCount(request, where.text_offset, where.anchor, where.anchor_offset)
