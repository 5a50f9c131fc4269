"""A crypto-register module's instructions counted inside the FreeBSD guest (the QEMU TCG plugin).

With the policy's ``instructions.kernel_count`` on and a module that registers with opencrypto,
the release kernel's kldload boot also counts fixed work through ``/dev/crypto``:

- ``prepare_count`` builds (or reuses) the plugin, reads the ``.ko``'s ``.text`` size, its function
  symbols and how the guest finds ``.text``'s base, and writes the plan beside the boot. Besides
  ``.text`` the plugin counts the module's whole mapping (``MODULE_RANGE``, which ``kldinit``
  declares from ``kldstat``'s address and size before the first item): code the module placed in
  another executable section is counted too, as ``(module)`` where no ``.text`` function holds it.
  The base is
  the module's load address (``kldstat``) when ``.text`` is the first section FreeBSD's linker
  places (``text_load_offset``); a global function's address (``kldsym``) less its offset checks it,
  or stands in when ``.text`` is not first. wolfSSL's module is built with ``EXPORT_SYMS=NO``, which
  makes every symbol local, and ``kldsym`` may not see local symbols: the load address is the path
  a default build takes;
- the loader puts the request in the kernel environment (``kenv_lines``), where ``kldinit`` reads
  it before the module loads; after ``kldstat`` it runs AES-128-GCM and AES-128-CBC bound to
  wolfSSL's driver by name, each item between the plugin's start and stop signals;
- QEMU runs with the plugin told this boot's nonce and the kernel's upper 2 GiB as the area to
  instrument (FreeBSD/amd64 puts kernel modules there);
- ``read_counts`` turns the plugin's file and kldinit's ``crypto-count:`` lines into the run's
  ``InstructionCounts`` (``scope="module"``), items named like the Linux module's
  (``kmod:AES-128-GCM@1024``).

A plugin that cannot be built or loaded leaves one sentence in ``COUNT_UNAVAILABLE``; the boot runs
without it and every item is *not counted* with that reason, never a pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....config.bsdkm_yml import Config
from ....perf.instructions import METADATA_KEY, InstructionCounts, counts_of
from ....perf.kernel_counts import (
    FREEBSD_ALGS,
    FREEBSD_HARNESS_PREFIX,
    CountPlan,
    KernelCountError,
    module_counts,
    parse_harness_lines,
    parse_plugin_output,
    text_anchor,
    text_layout,
    text_load_offset,
)
from ....policy import load_policy
from ...runtime.console import console_lines
from ...runtime.qemu_plugin import (
    COUNT_FILE,
    COUNT_PLAN,
    COUNT_SYMBOLS,
    COUNT_UNAVAILABLE,
    PROXY_STATE_KEY,
    PluginUnavailable,
    plugin_for,
    plugin_source,
    readelf_tables,
)
from ...runtime.source import cache_root

# FreeBSD/amd64 links kernel modules for the kernel code model: they live above KERNBASE.
AREA = "ffffffff80000000-fffffffffffff000"
# The plugin's range 1: the module's whole mapping, sized by the guest (kldstat).
MODULE_RANGE = "module"
# A symbol every crypto-register build has; any global function of .text would do.
PREFERRED_ANCHORS = ("wc_AesGcmEncrypt", "wc_AesCbcEncrypt", "wolfCrypt_Init")
_NOT_COUNTED = "the module itself was not counted"


@dataclass(frozen=True)
class CountRequest:
    """The plugin for one boot and what kldinit is asked to do."""

    plugin: Path
    symbols: Path
    text_size: int
    plan: CountPlan
    text_offset: int | None  # .text's offset from the load address kldstat gives
    anchor: str | None = None  # a global function of .text, for kldsym
    anchor_offset: int = 0

    def plugin_arg(self, out: Path, nonce: str) -> str:
        return (f"{self.plugin},out={out},nonce={nonce},size={self.text_size},syms={self.symbols},"
                f"area={AREA}")

    def kenv_lines(self) -> list[str]:
        """The loader's ``set`` lines kldinit reads (before it loads the module)."""
        lines = [f"set bsdkm_ci.count_bytes={self.plan.bytes}",
                 f"set bsdkm_ci.count_sizes={','.join(str(s) for s in self.plan.sizes)}"]
        if self.text_offset is not None:
            lines.append(f"set bsdkm_ci.count_text_off={self.text_offset:x}")
        if self.anchor is not None:
            lines += [f"set bsdkm_ci.count_anchor={self.anchor}",
                      f"set bsdkm_ci.count_anchor_off={self.anchor_offset:x}"]
        return lines


def prepare_count(config: Config, ko: Path, work: Path, *, crypto: bool, mode: str) -> CountRequest | None:
    """The count of this boot when the policy asks for it, the module registers with opencrypto and
    the boot runs kldinit (kldload); None otherwise, or when the plugin cannot count (the reason
    left in ``COUNT_UNAVAILABLE``)."""
    work.mkdir(parents=True, exist_ok=True)
    for stale in (COUNT_FILE, COUNT_PLAN, COUNT_UNAVAILABLE, COUNT_SYMBOLS):
        (work / stale).unlink(missing_ok=True)
    settings = load_policy(config.policy).instructions
    if not settings.kernel_count or not crypto or mode != "kldload":
        return None
    plan = CountPlan(settings.kernel_bytes, settings.kernel_sizes, FREEBSD_ALGS)
    (work / COUNT_PLAN).write_text(json.dumps({"bytes": plan.bytes, "sizes": list(plan.sizes)}))
    try:
        plugin = plugin_for(cache_root(config))
        sections, symbols = readelf_tables(ko)
        try:
            layout = text_layout(sections, symbols, other_sections=False).with_range(MODULE_RANGE)
        except KernelCountError as e:
            raise PluginUnavailable(f"{ko.name}: {e}") from None
        text_offset = text_load_offset(sections)
        try:
            anchor: str | None
            anchor, offset = text_anchor(sections, symbols, PREFERRED_ANCHORS)
        except KernelCountError as e:
            if text_offset is None:
                raise PluginUnavailable(f"{ko.name}: .text is not the first section the kernel's linker "
                                        f"places, and {e}") from None
            anchor, offset = None, 0
        if "," in str(plugin.path) + str(work):
            raise PluginUnavailable(f"a path holds a comma, which QEMU's -plugin option cannot carry: {work}")
    except PluginUnavailable as e:
        (work / COUNT_UNAVAILABLE).write_text(str(e))
        return None
    (work / COUNT_SYMBOLS).write_text(layout.symbols_file())
    return CountRequest(plugin.path, work / COUNT_SYMBOLS, layout.size, plan, text_offset, anchor, offset)


def read_counts(work: Path, console: Path) -> InstructionCounts | None:
    """What the boot in ``work`` counted in the module; None when no count was asked."""
    plan_file = work / COUNT_PLAN
    if not plan_file.is_file():
        return None
    raw = json.loads(plan_file.read_text())
    plan = CountPlan(int(raw["bytes"]), tuple(int(x) for x in raw["sizes"]), FREEBSD_ALGS)
    program = "kldinit.c + " + plugin_source().name
    if (work / COUNT_UNAVAILABLE).is_file():
        why = (work / COUNT_UNAVAILABLE).read_text().strip()
        return module_counts(plan, None, parse_harness_lines((), FREEBSD_HARNESS_PREFIX), program=program,
                             unavailable=f"the counting plugin is unavailable: {why}")
    lines = console_lines(console) if console.is_file() else ()
    harness = parse_harness_lines(lines, FREEBSD_HARNESS_PREFIX)
    out = work / COUNT_FILE
    try:
        plugin = parse_plugin_output(out.read_text(errors="replace")) if out.is_file() else None
    except KernelCountError as e:
        return module_counts(plan, None, harness, program=program,
                             unavailable=f"the counting plugin's output is unreadable: {e}")
    return module_counts(plan, plugin, harness, program=program)


def merge_counts(state: dict[str, Any], counts: InstructionCounts) -> None:
    """The module's counts become the run's; when none could be made and the build has the proxy's,
    the proxy's stand, with a note saying why."""
    current = counts_of(state)
    if current is not None and current.scope == "proxy" and not any(_NOT_COUNTED in n for n in current.notes):
        state[PROXY_STATE_KEY] = current.to_dict()
    proxy = counts_of(state, PROXY_STATE_KEY)
    if not counts.measured and proxy is not None:
        reasons = sorted({i.reason or i.status for i in counts.items})
        proxy.notes.append(f"{_NOT_COUNTED} ({'; '.join(reasons)}): the user-space proxy's counts stand in")
        state[METADATA_KEY] = proxy.to_dict()
        return
    state[METADATA_KEY] = counts.to_dict()
