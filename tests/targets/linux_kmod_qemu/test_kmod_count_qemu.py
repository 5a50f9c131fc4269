"""The counting plugin in real QEMU TCG boots: a minimal guest, and a module that forges the signal.

- ``kmod/qemu/count_selftest.c`` as ``/init``: it counts a function of its own, so the counts are
  known exactly (the loop is 7 instructions an iteration), then signals with another nonce or out
  of order, which must void the run; and it does work in a section of its own beside the counted
  one, as a module could put code outside ``.text``: counted only once that section is a declared
  range, and a listed range the guest never declares voids the run;
- ``kmod/qemu/forgemod``: a module whose init executes the start and stop signals itself (kernel
  space, no nonce), loaded by the real harness with the plugin on: no count, and the reason.
The real wolfSSL module is counted in ``tests/targets/linux_kmod_qemu/test_offload_qemu.py``
(the lkcapi boot).
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.perf.instruction_counts import UNMEASURABLE
from buildbot_bsdkm.perf.kernel_counts import (
    CountPlan,
    PluginOutput,
    module_counts,
    parse_harness_lines,
    parse_plugin_output,
)
from buildbot_bsdkm.pipeline.runtime import qemu_plugin
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.support.resources import data_path

pytestmark = pytest.mark.slow
USER_AREA = "400000-800000"  # a static non-PIE program's text


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> qemu_plugin.Plugin:
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("no qemu-system-x86_64")
    return qemu_plugin.plugin_for(tmp_path_factory.mktemp("plugin-cache"))


@pytest.fixture(scope="module")
def selftest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int, int]:
    """The minimal guest's initramfs, the address and size of its counted function, and the size of
    the function it keeps in a section of its own."""
    tmp = tmp_path_factory.mktemp("selftest")
    root = tmp / "root"
    root.mkdir()
    init = root / "init"
    subprocess.run(["gcc", "-static", "-O1", "-no-pie", "-Wall", "-o", str(init),
                    str(data_path("kmod", "qemu", "count_selftest.c"))], check=True)
    nm = subprocess.run(["nm", "-S", str(init)], capture_output=True, text=True, check=True).stdout
    found = {p[3]: (int(p[0], 16), int(p[1], 16)) for p in (ln.split() for ln in nm.splitlines())
             if len(p) == 4}
    initrd = tmp / "initrd.cpio.gz"
    subprocess.run(f"cd {root} && echo init | cpio -o -H newc -R 0:0 --quiet | gzip -1 > {initrd}",
                   shell=True, check=True)
    return initrd, found["work"][0], found["work"][1], found["hidden"][1]


def boot_selftest(plugin: qemu_plugin.Plugin, selftest: tuple[Path, int, int, int], mode: str,
                  tmp: Path, *, ranges: bool = False) -> tuple[PluginOutput, str]:
    """``ranges``: the plugin is told of the section ``hidden()`` lives in, as range 1 (the guest
    gives its base and size); else it knows ``work()``'s range only, as the plugin once knew .text."""
    initrd, _, size, hidden = selftest
    nonce = secrets.token_hex(16)
    out, syms = tmp / "counts.txt", tmp / "syms"
    dodge = f"range 1 0 bsdkm_dodge\n0 {hidden:x} hidden\n" if ranges else ""
    syms.write_text(f"0 {size:x} work\n{dodge}")
    console = tmp / "console.log"
    kernel = linuxkm.kernel_image(linuxkm.default_kernel_version())
    subprocess.run(
        ["nice", "-n", "10", "timeout", "300", "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max",
         "-m", "256", "-smp", "1", "-nographic", "-no-reboot", "-kernel", str(kernel), "-initrd", str(initrd),
         "-append", f"console=ttyS0 quiet panic=-1 BSDKM_NONCE={nonce} BSDKM_MODE={mode}",
         "-serial", f"file:{console}", "-monitor", "none", "-display", "none",
         "-plugin", f"{plugin.path},out={out},nonce={nonce},size={size},syms={syms},area={USER_AREA}"],
        check=True, timeout=330)
    return parse_plugin_output(out.read_text()), console.read_text(errors="replace")


Selftest = tuple[Path, int, int, int]


def test_plugin_counts_the_minimal_guest_exactly(plugin: qemu_plugin.Plugin, selftest: Selftest,
                                                 tmp_path: Path) -> None:
    out, console = boot_selftest(plugin, selftest, "ok", tmp_path)
    assert "count-selftest: done mode=ok" in console
    assert out.begun and out.ended and not out.void
    first, double, again = (out.items[i].instructions for i in (0, 1, 2))
    assert first == again  # the same work counts the same
    assert double - first == 7 * 1000  # 1000 more iterations of a 7-instruction loop, nothing else
    assert out.items[1].functions == {"work": double}


@pytest.mark.parametrize("mode,reason", [("badnonce", "wrong-nonce"), ("order", "stop-while-idle")])
def test_a_signal_without_the_nonce_or_out_of_order_voids(plugin: qemu_plugin.Plugin,
                                                          selftest: Selftest, tmp_path: Path,
                                                          mode: str, reason: str) -> None:
    out, console = boot_selftest(plugin, selftest, mode, tmp_path)
    assert f"count-selftest: done mode={mode}" in console
    assert out.void_reason == reason and out.ended
    counts = module_counts(CountPlan(4096, (16,)), out, parse_harness_lines(()))
    assert not counts.measured and all(i.status == UNMEASURABLE for i in counts.items)


def test_code_outside_the_counted_section_is_counted_once_declared(
        plugin: qemu_plugin.Plugin, selftest: Selftest, tmp_path: Path) -> None:
    # The dodge: work(1000) counted, hidden(1000) in another section of the same program not. The
    # plugin as it was (one range, .text) gave exactly this: 7006 instructions, hidden's 6006 lost.
    (tmp_path / "old").mkdir()
    old, console = boot_selftest(plugin, selftest, "dodge", tmp_path / "old")
    assert "count-selftest: done mode=dodge" in console and not old.void
    assert old.items[0].functions == {"work": old.items[0].instructions}
    # Declared as a range (its base and size from the guest), the section is counted like the rest.
    (tmp_path / "new").mkdir()
    new, console = boot_selftest(plugin, selftest, "declared", tmp_path / "new", ranges=True)
    assert "count-selftest: done mode=declared" in console and not new.void
    assert new.ranges == {1: ("bsdkm_dodge", selftest[3])}
    functions = new.items[0].functions
    assert functions["work"] == old.items[0].instructions
    assert functions["hidden"] == 6 * 1000 + 6  # a 6-instruction loop, and its way in and out
    assert new.items[0].instructions == functions["work"] + functions["hidden"]
    # A range the host knows of but the guest never placed: nothing is counted, never a pass.
    (tmp_path / "undeclared").mkdir()
    void, _ = boot_selftest(plugin, selftest, "dodge", tmp_path / "undeclared", ranges=True)
    assert void.void_reason == "range-not-declared" and not void.items
    assert "never placed" in (void.why_void() or "")


def test_a_module_that_executes_the_signal_itself_gets_no_count(plugin: qemu_plugin.Plugin,
                                                                tmp_path: Path) -> None:
    src = tmp_path / "forgemod"
    shutil.copytree(data_path("kmod", "qemu", "forgemod"), src)
    headers = linuxkm.linux_source_dir()
    subprocess.run(["nice", "-n", "10", "make", "-C", str(headers), f"M={src}", "modules"], check=True,
                   capture_output=True, timeout=600)
    ko = src / "bsdkm_countforge.ko"
    layout = qemu_plugin.module_layout(ko)
    syms = tmp_path / "text.syms"
    syms.write_text(layout.symbols_file())
    request = linuxkm.CountRequest(plugin.path, syms, layout.size, CountPlan(4096, (16,)))
    outcome = linuxkm.run_linux_module(ko, tmp_path / "vm", timeout_s=300, count=request)
    assert outcome.load_rc == 0
    out = parse_plugin_output((tmp_path / "vm" / linuxkm.COUNT_FILE).read_text())
    assert out.void_reason == "signal-from-kernel-space" and not out.items
    assert "kernel space" in (out.why_void() or "")
