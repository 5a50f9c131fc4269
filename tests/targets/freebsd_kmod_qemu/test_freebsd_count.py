"""The FreeBSD crypto-register module's instruction counts: the guest's fixed work through /dev/crypto
and the host's side of it.

What runs here: kldinit built for FreeBSD with the counting code (clang 19, raw system calls), the
loader's and QEMU's arguments, the plan, the choice of the ``.text`` anchor in a real ELF object, and
the record made from plugin outputs and console lines written in the shapes the plugin and kldinit
print (made up here, not recorded from a FreeBSD boot). A counted boot needs real FreeBSD sets:
``test_counted_crypto_register_boot`` skips without ``BSDKM_FREEBSD_SETS``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from freebsd_sets import RELEASE, SNAPSHOT, real_sets

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import from_json
from buildbot_bsdkm.perf.instruction_counts import (
    MEASURED,
    METADATA_KEY,
    MISSING,
    UNMEASURABLE,
    InstructionCounts,
)
from buildbot_bsdkm.perf.kernel_counts import (
    FREEBSD_ALGS,
    FREEBSD_HARNESS_PREFIX,
    SCOPE_MODULE,
    CountPlan,
    KernelCountError,
    parse_harness_lines,
    text_anchor,
    text_load_offset,
)
from buildbot_bsdkm.pipeline.runtime import guest, qemu_plugin
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import build as fbuild
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import counting
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import worker as fworker

ROOT = Path(__file__).resolve().parents[3]
NONCE = "0123456789abcdef0123456789abcdef"
PLAN = CountPlan(4096, (16, 1024), FREEBSD_ALGS)


def _request(tmp: Path) -> counting.BootCount:
    request = guest.CountRequest(tmp / "bsdkm_count.so", tmp / "text.syms", 0x1234, PLAN, counting.AREA)
    return counting.BootCount(request, 0, "wc_AesGcmEncrypt", 0x5a0)


# --------------------------------------------------------------------------- the guest program


def test_kldinit_with_the_counting_code_builds_for_freebsd(tmp_path: Path) -> None:
    try:
        tools = fworker.find_toolchain("load")
    except Exception as e:  # noqa: BLE001 - the worker's LLVM: a skip names what is missing
        pytest.skip(f"no FreeBSD cross toolchain: {e}")
    init = fbuild.init_program(tmp_path, tools)
    assert init.is_file()
    head = init.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[7] == 9  # EI_OSABI: FreeBSD
    undefined = subprocess.run([str(tools.bin_dir / "llvm-nm"), "--undefined-only", str(init)],
                               capture_output=True, text=True, check=True).stdout
    assert undefined.strip() == ""  # freestanding: no memcpy/memset the compiler could have asked for
    strings = init.read_bytes()
    for needed in (b"bsdkm_ci.count_bytes", b"bsdkm_ci.count_text_off", b"bsdkm_ci.count_anchor_off",
                   b"/dev/crypto", b"libwolf", b"/cryptodev.ko",
                   b"crypto-count: begin version=1 bytes=", b"crypto-count: range number=1 name=module"):
        assert needed in strings


def test_the_guest_algorithms_are_the_plans() -> None:
    # kldinit numbers items alg * nsizes + size in count_algs' order: the host's plan must agree.
    src = (ROOT / "kmod" / "freebsd" / "kldinit.c").read_text()
    table = src[src.index("count_algs[] = {"):]
    table = table[:table.index("};")]
    order = [name for name, _ in FREEBSD_ALGS]
    assert [table.index(f'"{n}"') for n in order] == sorted(table.index(f'"{n}"') for n in order)
    assert [i.name for i in PLAN.items()] == ["kmod:AES-128-GCM@16", "kmod:AES-128-GCM@1024",
                                              "kmod:AES-128-CBC@16", "kmod:AES-128-CBC@1024"]
    assert [i.index for i in PLAN.items()] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- the boot's arguments


def test_loader_sets_the_request_beside_the_nonce(tmp_path: Path) -> None:
    rc = fboot.loader_rc("kldload", NONCE, _request(tmp_path))
    lines = rc.splitlines()
    assert f"set bsdkm_ci.nonce={NONCE}" in lines
    assert "set bsdkm_ci.count_bytes=4096" in lines
    assert "set bsdkm_ci.count_sizes=16,1024" in lines
    assert "set bsdkm_ci.count_anchor=wc_AesGcmEncrypt" in lines
    assert "set bsdkm_ci.count_anchor_off=5a0" in lines
    assert "set bsdkm_ci.count_text_off=0" in lines
    at = lines.index("set bsdkm_ci.count_bytes=4096")
    assert lines.index("load /boot/kernel/kernel") < at < lines.index("boot")
    assert "count_" not in fboot.loader_rc("kldload", NONCE)
    # a default build (EXPORT_SYMS=NO: no global symbol) is found by its load address alone
    local = counting.BootCount(guest.CountRequest(tmp_path / "p.so", tmp_path / "s", 16, PLAN), 0)
    assert [ln for ln in local.kenv_lines() if "anchor" in ln] == []


def test_qemu_gets_the_plugin_with_the_kernel_area(tmp_path: Path) -> None:
    arg = _request(tmp_path).plugin_arg(tmp_path / "counts.txt", NONCE)
    machine = fboot.machine(tmp_path / "esp", tmp_path / "vars", None)
    cmd = guest.qemu_command(machine, guest.VmOptions(), arg)
    plugin = cmd[cmd.index("-plugin") + 1]
    assert f"nonce={NONCE}" in plugin and "size=4660" in plugin
    assert plugin.endswith(",area=ffffffff80000000-fffffffffffff000")
    assert "-plugin" not in guest.qemu_command(machine, guest.VmOptions())


def _object(tmp: Path) -> Path:
    src = tmp / "mod.c"
    src.write_text("static int helper(int x) { return x * 3 + 1; }\n"
                   "int first_global(int x) { return helper(x) + 2; }\n"
                   "int wc_AesGcmEncrypt(int x) { return first_global(x) ^ helper(x); }\n")
    obj = tmp / "mod.ko"
    subprocess.run(["gcc", "-O1", "-fno-inline", "-c", "-o", str(obj), str(src)], check=True)
    return obj


def test_text_anchor_is_a_global_function_with_its_offset(tmp_path: Path) -> None:
    obj = _object(tmp_path)
    sections, symbols = (subprocess.run(["readelf", f, str(obj)], capture_output=True, text=True,
                                        check=True).stdout for f in ("-SW", "-sW"))
    name, off = text_anchor(sections, symbols, ("wc_AesGcmEncrypt",))
    nm = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    want = next(int(line.split()[0], 16) for line in nm.splitlines() if line.endswith(" wc_AesGcmEncrypt"))
    assert (name, off) == ("wc_AesGcmEncrypt", want)
    # without a preferred name: the lowest global, never the static helper
    assert text_anchor(sections, symbols)[0] == "first_global"
    with pytest.raises(KernelCountError):
        text_anchor(sections.replace(".text", ".txet"), symbols)
    assert text_load_offset(sections) == 0


SECTIONS = """\
  [Nr] Name              Type            Address          Off    Size   ES Flg Lk Inf Al
  [ 0]                   NULL            0000000000000000 000000 000000 00      0   0  0
  [ 1] .note.gnu.build-id NOTE            0000000000000000 000040 000024 00   A  0   0  4
  [ 2] {first:<17} {type:<15} 0000000000000000 000064 00003c 00   A  0   0  8
  [ 3] .text             PROGBITS        0000000000000000 0000a0 0dd97c 00  AX  0   0 16
"""


def test_text_is_at_the_load_address_only_when_nothing_placed_comes_first() -> None:
    assert text_load_offset(SECTIONS.format(first=".note.other", type="NOTE")) == 0
    assert text_load_offset(SECTIONS.format(first="set_sysinit_set", type="PROGBITS")) is None
    assert text_load_offset(SECTIONS.format(first=".bss", type="NOBITS")) is None
    no_text = SECTIONS.format(first=".note.other", type="NOTE").replace(".text", ".txet")
    assert text_load_offset(no_text) is None


def _config(tmp: Path, kernel_count: bool) -> Path:
    policy = tmp / "policy.yml"
    policy.write_text(f"instructions:\n  kernel_count: {str(kernel_count).lower()}\n  kernel_bytes: 4096\n"
                      "  kernel_sizes: [16, 1024]\n")
    cfg = tmp / "bsdkm.yml"
    cfg.write_text(f"source: {{local: {tmp}}}\ncache_dir: {tmp / 'cache'}\npolicy: {policy}\n"
                   "targets:\n  freebsd-kmod-qemu: {flags: []}\n"
                   "variants:\n  crypto-register: {flags: [--enable-freebsdkm-crypto-register], "
                   "targets: [freebsd-kmod-qemu]}\n")
    return cfg


def test_prepare_count_only_for_a_counted_kldload_of_a_crypto_module(tmp_path: Path) -> None:
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 is not installed")
    obj = _object(tmp_path)
    config = load_config(_config(tmp_path, True))
    assert counting.prepare_count(config, obj, tmp_path / "a", crypto=False, mode="kldload") is None
    assert counting.prepare_count(config, obj, tmp_path / "b", crypto=True, mode="preload") is None
    req = counting.prepare_count(config, obj, tmp_path / "c", crypto=True, mode="kldload")
    assert req is not None and req.anchor == "wc_AesGcmEncrypt" and req.request.plugin.is_file()
    assert req.text_offset == 0
    assert "wc_AesGcmEncrypt" in req.request.symbols.read_text()
    # Besides .text, the module's whole mapping (kldinit declares it from kldstat): no code uncounted.
    assert req.request.symbols.read_text().splitlines()[-1] == f"range 1 0 {counting.MODULE_RANGE}"
    plan = json.loads((tmp_path / "c" / qemu_plugin.COUNT_PLAN).read_text())
    assert plan == {"bytes": 4096, "sizes": [16, 1024]}
    (tmp_path / "off").mkdir()
    off = load_config(_config(tmp_path / "off", False))
    assert counting.prepare_count(off, obj, tmp_path / "d", crypto=True, mode="kldload") is None
    assert not (tmp_path / "d" / qemu_plugin.COUNT_PLAN).exists()


# --------------------------------------------------------------------------- reading the boot


def _boot(tmp: Path, plugin: str | None, console: str, unavailable: str | None = None) -> Path:
    work = tmp / "release"
    work.mkdir(exist_ok=True)
    (work / qemu_plugin.COUNT_PLAN).write_text(json.dumps({"bytes": PLAN.bytes, "sizes": list(PLAN.sizes)}))
    if plugin is not None:
        (work / qemu_plugin.COUNT_FILE).write_text(plugin)
    if unavailable is not None:
        (work / qemu_plugin.COUNT_UNAVAILABLE).write_text(unavailable)
    (work / "console.log").write_text(console)
    return work


def _plugin(items: dict[int, int], void: str | None = None) -> str:
    lines = ["bsdkm-count: begin version=1 size=4660 syms=3"]
    for index, n in items.items():
        lines += [f"bsdkm-count: item index={index} instructions={n} base=0xffffffff82a00000",
                  f"bsdkm-count: func index={index} instructions={n} name=wc_AesGcmEncrypt"]
    if void:
        lines.append(f"bsdkm-count: void reason={void} at=0xffffffff82a01000")
    lines.append(f"bsdkm-count: end items={len(items)} void={int(bool(void))}")
    return "\n".join(lines) + "\n"


def _console(ops: dict[int, int]) -> str:
    lines = ["### bsdkm-ci: load rc=0 nonce=" + NONCE,
             "crypto-count: begin version=1 bytes=4096 sizes=16,1024 base=0xffffffff82a00000"]
    for p in PLAN.items():
        if p.index in ops:
            lines.append(f"crypto-count: item index={p.index} alg={p.alg} driver=libwolf bytes={p.size} "
                         f"ops={ops[p.index]} rc=0")
    return "\n".join(lines) + "\n"


def test_a_counted_boot_becomes_the_runs_module_counts(tmp_path: Path) -> None:
    ops = {p.index: p.ops for p in PLAN.items()}
    work = _boot(tmp_path, _plugin({0: 700000, 1: 20000, 2: 300000, 3: 9000}), _console(ops))
    counts = guest.read_counts(work, work / "console.log", counting.COUNTING)
    assert counts is not None and counts.scope == SCOPE_MODULE
    assert [(i.name, i.status) for i in counts.items] == [(p.name, MEASURED) for p in PLAN.items()]
    assert counts.items[0].functions == {"wc_AesGcmEncrypt": 700000}
    state: dict[str, object] = {}
    guest.merge_counts(state, counts)
    assert InstructionCounts.from_dict(state[METADATA_KEY]).scope == SCOPE_MODULE  # type: ignore[arg-type]


def test_a_forged_signal_counts_nothing_and_says_why(tmp_path: Path) -> None:
    ops = {p.index: p.ops for p in PLAN.items()}
    work = _boot(tmp_path, _plugin({0: 700000}, void="signal-from-kernel-space"), _console(ops))
    counts = guest.read_counts(work, work / "console.log", counting.COUNTING)
    assert counts is not None and not counts.measured
    assert all(i.status == UNMEASURABLE and "kernel space" in (i.reason or "") for i in counts.items)


def test_no_dev_crypto_leaves_every_item_missing_with_kldinits_reason(tmp_path: Path) -> None:
    console = _console({}) + "crypto-count: error reason=open-dev-crypto errno=2\n"
    work = _boot(tmp_path, _plugin({}), console)
    counts = guest.read_counts(work, work / "console.log", counting.COUNTING)
    assert counts is not None
    assert {(i.status, i.reason) for i in counts.items} == {(MISSING, "open-dev-crypto errno=2")}


def test_an_unavailable_plugin_is_one_reason_and_the_proxy_stands_in(tmp_path: Path) -> None:
    work = _boot(tmp_path, None, "", unavailable="no C compiler (gcc) to build the counting plugin")
    counts = guest.read_counts(work, work / "console.log", counting.COUNTING)
    assert counts is not None and not counts.measured
    assert {i.reason for i in counts.items} == {
        "the counting plugin is unavailable: no C compiler (gcc) to build the counting plugin"}
    proxy = InstructionCounts(items=[], tool="callgrind", valgrind=None, seconds=0.0, program=None, notes=[],
                              scope="proxy")
    state: dict[str, object] = {METADATA_KEY: proxy.to_dict()}
    guest.merge_counts(state, counts)
    kept = InstructionCounts.from_dict(state[METADATA_KEY])  # type: ignore[arg-type]
    assert kept.scope == "proxy" and "the module itself was not counted" in kept.notes[-1]


def test_the_linux_harness_lines_are_not_the_freebsd_guests() -> None:
    line = "afalg-count: item index=0 alg=gcm(aes) driver=gcm-aesni bytes=16 ops=256 rc=0"
    assert parse_harness_lines([line], FREEBSD_HARNESS_PREFIX).ran == {}
    assert parse_harness_lines([line]).ran == {0: (256, 0, "gcm-aesni")}


# --------------------------------------------------------------------------- a real counted boot

COUNTED = """\
source: {{debian: {{suite: sid, package: wolfssl, version: "5.9.2"}}}}
targets:
  freebsd-kmod-qemu:
    flags: [--enable-cryptonly, --enable-crypttests]
    kernels: [release]
    boot_timeout_s: 1200
variants:
  crypto-register:
    flags: [--enable-freebsdkm-crypto-register, --enable-aesni, --enable-intelasm, --disable-ecc]
    targets: [freebsd-kmod-qemu]
freebsd: {{release: {release}, snapshot: {snapshot}, mirror: {mirror}}}
policy: {policy}
"""


@pytest.mark.slow
def test_counted_crypto_register_boot(tmp_path: Path) -> None:
    sets = real_sets()
    policy = tmp_path / "policy.yml"
    policy.write_text("instructions:\n  kernel_count: true\n")
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(COUNTED.format(release=RELEASE, snapshot=SNAPSHOT, mirror=sets, policy=policy))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "buildbot_bsdkm.cli", "run", "--config", str(cfg), "--out",
                           str(out), "--target", "freebsd-kmod-qemu"], capture_output=True, text=True,
                          timeout=3600)
    run = from_json((out / "freebsd-kmod-qemu" / "crypto-register" / "results.json").read_text())[0]
    counts = InstructionCounts.from_dict(run.metadata[METADATA_KEY])
    assert counts.scope == SCOPE_MODULE, proc.stderr[-2000:]
    measured = {i.name: i for i in counts.measured}
    assert set(measured) == {p.name for p in CountPlan(algs=FREEBSD_ALGS).items()}, counts.notes
    assert all(any(f.startswith(("wc_Aes", "wolfkdriv_", "AES_")) for f in i.functions)
               for i in measured.values())
