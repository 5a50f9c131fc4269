"""The real module's instruction counts in QEMU (the TCG plugin): spread, detection, false alarms, cost.

    python bench/kernel_counts.py [--boots 10] [--rebuilds 10] [--out FILE] [--only PART,...]
                                  [--work DIR] [--build-only]

On the pipeline's own lkcapi module builds of the configured source (``lkcapi``: AES-NI and the
x86 assembly; ``lkcapi-portable``: no assembly), each boot through ``LinuxQemuTarget.load``
exactly as a run (the module's load-time self-test and benchmark, the timed AF_ALG benchmark,
then the counted fixed work), with the policy's ``instructions.kernel_count`` on:

- spread: one build booted ``--boots`` times; per item min, max, (max-min)/min;
- variants: lkcapi against lkcapi-portable, 1 vs 1 (every AES item must differ);
- planted: an extra AES round per GCM call inside ``#ifdef WOLFSSL_LINUXKM`` (a kernel-only path
  the user-space proxy cannot see), rebuilt, counted once, compared 1 vs 1 with the base;
- healthy rebuilds: the module rebuilt from scratch ``--rebuilds`` times (a comment changed, so the
  cache key changes), each counted once and compared with the first count (false alarms);
- forged: ``kmod/qemu/forgemod``, a module whose init executes the start and stop signals itself
  (kernel space, a nonce of zeros), booted by the real harness with the plugin on: no count, and why;
- cost: counted boots (the first, and every healthy rebuild's boot in ``--work``) against
  ``--plain-boots`` boots of the same module without the plugin and the counted work, each split
  by the console's markers into the load (the module's timed self-test and benchmark), the step
  after it (the timed AF_ALG benchmark, plus the counted work when counting) and the whole guest.

Parts: spread, variants, planted, rebuilds, forged, cost. Writes Markdown (default
``bench/results/kernel_counts.md``) and the raw counts beside it (``.json``). ``--build-only``
builds the modules the later parts need (into the shared cache, sources under ``--work``), so a
second process can build while the first boots.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.config.bsdkm_yml import Config, load_config  # noqa: E402
from buildbot_bsdkm.perf.instruction_counts import InstructionCounts, compare_counts, fmt_change  # noqa: E402
from buildbot_bsdkm.perf.kernel_counts import (  # noqa: E402
    CountPlan,
    module_counts,
    parse_harness_lines,
    parse_plugin_output,
)
from buildbot_bsdkm.pipeline.runtime import guest, qemu_plugin  # noqa: E402
from buildbot_bsdkm.pipeline.runtime.source import cache_root, wolfssl_source  # noqa: E402
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import afalg  # noqa: E402
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm  # noqa: E402
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import target as linux_target  # noqa: E402

TARGET = "linux-kmod-qemu"
LIMIT_PCT = 0.5
# The planted change: inside the streaming GCM encryption the kernel glue calls (AesGcmCrypt_1 ->
# wc_AesGcmEncryptUpdate), kernel builds only, an extra mixing round per call and per block (what
# an accidental extra round would cost; plain C, so no vector state is touched).
GCM_ANCHOR = "int wc_AesGcmEncryptUpdate(Aes* aes, byte* out, const byte* in, word32 sz,"


def config_with_counting(tmp: Path) -> Config:
    """The repository's configuration with a policy that counts the module in the guest."""
    repo = load_config(ROOT / "bsdkm.yml")
    policy = tmp / "policy.yml"
    policy.write_text("instructions:\n  kernel_count: true\n")
    text = (ROOT / "bsdkm.yml").read_text()
    cfg = tmp / "bsdkm.yml"
    # A boot with the module's self-test and benchmark took up to 500 s on the loaded worker.
    lines = [re.sub(r"\bload: \d+", "load: 1800", ln) if ln.startswith("timeouts:") else ln
             for ln in text.splitlines() if not ln.startswith("policy:")]
    cfg.write_text("\n".join(lines) + f"\npolicy: {policy}\n")
    del repo
    return load_config(cfg)


@dataclass
class Boot:
    counts: InstructionCounts | None
    wall_s: float
    load_rc: int | None
    work: Path


def boot(config: Config, variant: str, ko: Path, work: Path, *, count: bool = True) -> Boot:
    """One boot as the pipeline's load stage makes it (overlay, plugin, console), its counts."""
    source = wolfssl_source(config)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    flags = config.configure_flags(TARGET, variant)
    program = str(afalg.build_bench(source, flags, cache_root(config), jobs=2,
                                    cflags=" ".join(config.cflags(TARGET, variant)), log=work / "build.log"))
    vm = work / "vm"
    afalg.stage_overlay(program, ko, vm)
    started = time.monotonic()
    if count:
        outcome = linux_target.TARGET.load(config, ko, vm)
    else:
        outcome = linuxkm.run_linux_module(ko, vm, timeout_s=int(config.timeout("load")),
                                           options=linuxkm.VmOptions(cpu="max"))
    wall = time.monotonic() - started
    counts = guest.read_counts(vm, vm / "console.log", linuxkm.COUNTING) if count else None
    return Boot(counts, wall, outcome.load_rc, work)


_UPTIME = re.compile(r"^### bsdkm-ci: (load begin|load rc=-?\d+|after-load begin|after-load rc=-?\d+"
                     r"|poweroff).* uptime=([0-9.]+)")


def guest_times(console: Path) -> dict[str, float] | None:
    """Guest seconds of a boot from its markers: ``load_s`` (the module's init: self-test and timed
    benchmark), ``after_load_s`` (the timed AF_ALG benchmark, and the counted work when counted),
    ``guest_s`` (boot to power-off); None when the boot did not get that far."""
    at: dict[str, float] = {}
    for line in console.read_text(errors="replace").splitlines() if console.is_file() else []:
        m = _UPTIME.match(line)
        if m:
            at.setdefault(m[1].split(" rc=")[0] + (" rc" if " rc=" in m[1] else ""), float(m[2]))
    need = ("load begin", "load rc", "after-load begin", "after-load rc", "poweroff")
    if not all(k in at for k in need):
        return None
    return {"load_s": round(at["load rc"] - at["load begin"], 2),
            "after_load_s": round(at["after-load rc"] - at["after-load begin"], 2),
            "guest_s": round(at["poweroff"], 2)}


def forged(work: Path) -> dict[str, object]:
    """``kmod/qemu/forgemod`` booted by the real harness with the plugin on: what the plugin and the
    record say of a module that executes the signals itself."""
    shutil.rmtree(work, ignore_errors=True)
    src = work / "forgemod"
    shutil.copytree(ROOT / "kmod" / "qemu" / "forgemod", src)
    subprocess.run(["nice", "-n", "10", "make", "-C", str(linuxkm.linux_source_dir()), f"M={src}", "modules"],
                   check=True, capture_output=True, timeout=600)
    ko = src / "bsdkm_countforge.ko"
    plugin = qemu_plugin.plugin_for(cache_root(None))
    layout = qemu_plugin.module_layout(ko)
    syms = work / "text.syms"
    syms.write_text(layout.symbols_file())
    plan = CountPlan(65536, (16, 1024, 16384))
    request = linuxkm.CountRequest(plugin.path, syms, layout.size, plan)
    outcome = linuxkm.run_linux_module(ko, work / "vm", timeout_s=600, count=request)
    text = (work / "vm" / qemu_plugin.COUNT_FILE).read_text()
    out = parse_plugin_output(text)
    counts = module_counts(plan, out, parse_harness_lines(()))
    return {"load_rc": outcome.load_rc, "plugin_lines": text.splitlines(), "void_reason": out.void_reason,
            "items_counted": len(counts.measured), "items": len(counts.items),
            "item_reasons": sorted({i.reason or "" for i in counts.items}), "notes": counts.notes}


def build(config: Config, variant: str, source: Path | None = None) -> Path:
    src = source or wolfssl_source(config)
    return linux_target.TARGET.build(config, variant, src, cache_root(config), 2, Path(tempfile.mktemp()))


def planted_source(base: Path, dest: Path, marker: str = "") -> Path:
    """A copy of the source with the planted GCM change (or, with ``marker``, only a comment);
    kept as it is once made, so the module cache (keyed by the files' times) finds its build."""
    if (dest / ".bsdkm-planted").is_file():
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(base, dest, symlinks=True)
    aes = dest / "wolfcrypt" / "src" / "aes.c"
    text = aes.read_text()
    if marker:
        text = f"/* healthy rebuild {marker} */\n" + text
    else:
        at = text.index(GCM_ANCHOR)
        body = text.index("{", at) + 1
        text = text[:body] + """
#ifdef WOLFSSL_LINUXKM
    {   /* planted: an extra round per call and per block, kernel builds only */
        volatile word32 planted_mix = 0;
        word32 planted_n;
        for (planted_n = 0; planted_n < 16 + sz / WC_AES_BLOCK_SIZE; planted_n++)
            planted_mix = ((planted_mix << 7) | (planted_mix >> 25)) ^ planted_n;
    }
#endif
""" + text[body:]
    aes.write_text(text)
    (dest / ".bsdkm-planted").write_text(marker or "planted")
    return dest


def spread(boots: list[Boot]) -> dict[str, dict[str, float]]:
    per: dict[str, list[int]] = {}
    for b in boots:
        for item in b.counts.measured if b.counts else []:
            per.setdefault(item.name, []).append(int(item.instructions or 0))
    out = {}
    for name, values in per.items():
        lo, hi = min(values), max(values)
        out[name] = {"n": len(values), "min": lo, "max": hi,
                     "spread_pct": (hi - lo) / lo * 100 if lo else 0.0}
    return out


def summarize(work: Path, compare_json: Path | None, out: Path) -> None:
    """The results page from what the parts saved: ``spread-<i>.json`` per boot, and the other
    parts' JSON (a second process may have run them while the first booted for the spread)."""
    boots = []
    for f in sorted(work.glob("spread-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        d = json.loads(f.read_text())
        boots.append(Boot(InstructionCounts.from_dict(d) if d else None, 0.0, 0, f))
    s = spread(boots)
    md = ["# The real module's instruction counts in QEMU TCG", "",
          "`python bench/kernel_counts.py` on the shared 2-core worker (QEMU 7.2 TCG, Debian's 6.1 kernel,",
          "wolfSSL 5.9.2 `lkcapi` and `lkcapi-portable` modules built by the pipeline). Fixed work per item:",
          "65536 bytes at 16, 1024 and 16384 bytes per operation through AF_ALG bound to wolfCrypt's driver.",
          f"Limit {LIMIT_PCT} % at 1 vs 1.", "",
          f"## Spread: one lkcapi build, {len(boots)} boots", "",
          "| item | boots | min | max | spread |", "|---|---:|---:|---:|---:|"]
    md += [f"| {n} | {v['n']} | {v['min']} | {v['max']} | {v['spread_pct']:.4f} % |" for n, v in s.items()]
    md += [""]
    raw: dict[str, object] = {"spread": s}
    if compare_json is not None and compare_json.is_file():
        other = json.loads(compare_json.read_text())
        raw.update(other)
        for label, rows in other.items():
            if not isinstance(rows, list):
                continue
            md += [f"## {label}", "", "| item | change | over the limit | most changed |",
                   "|---|---:|---|---|"]
            for c in rows:
                top = ", ".join(f"{f['name']} {fmt_change(f['change_pct'])}" for f in c["functions"][:2])
                over = "yes" if c["regressed"] else "no"
                md.append(f"| {c['name']} | {fmt_change(c['change_pct'])} | {over} | {top} |")
            md += [""]
        if "healthy_alarms" in other:
            n, alarms = other.get("healthy_rebuilds"), other["healthy_alarms"]
            md += [f"## Healthy rebuilds: {n}, alarms: {alarms}", ""]
        if "cost" in other:
            md += ["## Cost per run", "", "```", json.dumps(other["cost"], indent=1), "```", ""]
    out.write_text("\n".join(md) + "\n")
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boots", type=int, default=10)
    ap.add_argument("--first-boot", type=int, default=0, help="number of the first spread boot")
    ap.add_argument("--rebuilds", type=int, default=10)
    ap.add_argument("--only", default="spread,variants,planted,rebuilds,forged,cost")
    ap.add_argument("--plain-boots", type=int, default=3, help="uncounted boots the cost part compares with")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "kernel_counts.md")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bsdkm-kcount")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--summarize", type=Path, default=None, metavar="COMPARE_JSON",
                    help="only write the results page from the saved boots and this JSON of the other parts")
    args = ap.parse_args(argv)
    if args.summarize is not None:
        summarize(args.work, args.summarize, args.out)
        return 0
    parts = set(args.only.split(","))
    tmp = args.work
    tmp.mkdir(parents=True, exist_ok=True)
    config = config_with_counting(tmp)
    source = wolfssl_source(config)
    if args.build_only:
        if "variants" in parts:
            print("portable", build(config, "lkcapi-portable", source), flush=True)
        if "planted" in parts:
            print("planted", build(config, "lkcapi", planted_source(source, tmp / "src-planted")), flush=True)
        for i in range(args.rebuilds if "rebuilds" in parts else 0):
            hko = build(config, "lkcapi", planted_source(source, tmp / f"src-healthy-{i}", marker=str(i)))
            print("healthy", i, hko, flush=True)
        return 0
    raw: dict[str, object] = {}
    md = ["# The real module's instruction counts in QEMU TCG", "",
          f"Machine: shared 2-core worker, QEMU TCG; limit {LIMIT_PCT} % at 1 vs 1.", ""]

    ko = build(config, "lkcapi", source)
    first: Boot | None = None
    if "spread" in parts:
        boots = []
        for i in range(args.first_boot, args.first_boot + args.boots):
            b = boot(config, "lkcapi", ko, tmp / f"spread-{i}")
            boots.append(b)
            (tmp / f"spread-{i}.json").write_text(json.dumps(b.counts.to_dict() if b.counts else None))
            (tmp / f"spread-{i}.wall").write_text(f"{b.wall_s:.1f}\n")
            measured = len(b.counts.measured) if b.counts else 0
            print(f"spread boot {i}: {b.wall_s:.0f} s, measured {measured}", flush=True)
            if not measured:  # a boot that did not reach the counted work is no sample of the spread
                (tmp / f"spread-{i}.json").unlink()
        first = boots[0]
        s = spread(boots)
        raw["spread"] = s
        raw["spread_wall_s"] = [round(b.wall_s, 1) for b in boots]
        md += [f"## Spread: one lkcapi build, {args.boots} boots", "",
               "| item | boots | min | max | spread |", "|---|---:|---:|---:|---:|"]
        md += [f"| {n} | {v['n']} | {v['min']} | {v['max']} | {v['spread_pct']:.4f} % |"
               for n, v in s.items()]
        md += [""]
    if first is None and (tmp / "spread-0.json").is_file():  # the spread's first boot, run before
        first = Boot(InstructionCounts.from_dict(json.loads((tmp / "spread-0.json").read_text())),
                     float((tmp / "spread-0.wall").read_text()) if (tmp / "spread-0.wall").is_file() else 0.0,
                     0, tmp / "spread-0")
    if first is None and (tmp / "first" / "vm" / "counts.txt").is_file():  # an earlier run's first boot
        kept = guest.read_counts(tmp / "first" / "vm", tmp / "first" / "vm" / "console.log",
                                 linuxkm.COUNTING)
        if kept is not None and kept.measured:
            first = Boot(kept, 0.0, 0, tmp / "first")
    if first is None:
        first = boot(config, "lkcapi", ko, tmp / "first")
    assert first.counts is not None

    def compare(label: str, other: InstructionCounts) -> list[str]:
        changes = compare_counts(first.counts, other, LIMIT_PCT)  # type: ignore[arg-type]
        rows = [f"### {label}", "", "| item | change | over the limit | most changed |", "|---|---:|---|---|"]
        for c in changes:
            top = ", ".join(f"{f.name} {fmt_change(f.change_pct)}" for f in c.functions[:2])
            over = "yes" if c.regressed else "no"
            rows.append(f"| {c.name} | {fmt_change(c.change_pct)} | {over} | {top} |")
        raw[label] = [c.to_dict() for c in changes]
        (tmp / "partial.json").write_text(json.dumps(raw, indent=1))
        (tmp / "partial.md").write_text("\n".join(md + rows) + "\n")
        return rows + [""]

    if "variants" in parts:
        pko = build(config, "lkcapi-portable", source)
        pb = boot(config, "lkcapi-portable", pko, tmp / "portable")
        if pb.counts is not None:
            md += ["## lkcapi against lkcapi-portable", ""] + compare("lkcapi-portable vs lkcapi", pb.counts)
    if "planted" in parts:
        psrc = planted_source(source, tmp / "src-planted")
        pko = build(config, "lkcapi", psrc)
        pb = boot(config, "lkcapi", pko, tmp / "planted")
        if pb.counts is not None:
            md += ["## Planted extra AES block per GCM call (#ifdef WOLFSSL_LINUXKM)", ""]
            md += compare("planted vs base", pb.counts)
    if "rebuilds" in parts:
        alarms = not_counted = 0
        healthy: list[dict[str, object]] = []
        for i in range(args.rebuilds):
            hsrc = planted_source(source, tmp / f"src-healthy-{i}", marker=str(i))
            hko = build(config, "lkcapi", hsrc)
            hb = boot(config, "lkcapi", hko, tmp / f"healthy-{i}")
            changes = compare_counts(first.counts, hb.counts, LIMIT_PCT) if hb.counts else []
            (tmp / f"healthy-{i}.json").write_text(json.dumps(hb.counts.to_dict() if hb.counts else None))
            if not changes:  # a rebuild whose boot counted nothing is no sample, and no pass either
                not_counted += 1
            alarms += sum(1 for c in changes if c.regressed)
            worst = max((abs(c.change_pct) for c in changes if c.change_pct is not None), default=None)
            healthy.append({"rebuild": i, "wall_s": round(hb.wall_s, 1),
                            "alarms": sum(c.regressed for c in changes), "max_abs_change_pct": worst})
            print(f"healthy rebuild {i}: {hb.wall_s:.0f} s, largest change {worst}, alarms so far {alarms}",
                  flush=True)
        raw["healthy_alarms"] = alarms
        raw["healthy_rebuilds"] = args.rebuilds
        raw["healthy_not_counted"] = not_counted
        raw["healthy"] = healthy
        md += [f"## Healthy rebuilds: {args.rebuilds}, alarms: {alarms}", ""]
    if "forged" in parts:
        f = forged(tmp / "forged")
        raw["forged"] = f
        md += ["## A module that executes the signals itself", "",
               f"load rc {f['load_rc']}; plugin: `{f['void_reason']}`; items counted {f['items_counted']} of "
               f"{f['items']}; reason: {'; '.join(f['item_reasons'])}", ""]  # type: ignore[arg-type]
    if "cost" in parts:
        counted = [{"boot": "first", **({"wall_s": round(first.wall_s, 1)} if first.wall_s else {}),
                    **(guest_times(tmp / "first" / "vm" / "console.log") or {})}]
        rebuilt = [p for p in tmp.glob("healthy-*") if p.is_dir()]
        for d in sorted(rebuilt, key=lambda p: int(p.name.split("-")[1])):
            if t := guest_times(d / "vm" / "console.log"):
                counted.append({"boot": d.name, **t})
        plain = []
        for d in sorted(tmp.glob("plain*")):  # uncounted boots of an earlier run, wall time not kept
            if d.is_dir() and (t := guest_times(d / "vm" / "console.log")):
                plain.append({"boot": d.name, **t})
        done = len(list(tmp.glob("plain-*")))
        for i in range(done, done + args.plain_boots):
            pb = boot(config, "lkcapi", ko, tmp / f"plain-{i}", count=False)
            plain.append({"boot": f"plain-{i}", "wall_s": round(pb.wall_s, 1),
                          **(guest_times(tmp / f"plain-{i}" / "vm" / "console.log") or {})})
            print(f"plain boot {i}: {pb.wall_s:.0f} s", flush=True)
        raw["cost"] = {"counted": counted, "plain": plain}
        md += ["## Cost per run", "", "| boot | wall s | load (timed self-test + benchmark) s | "
               "after load s | guest s |", "|---|---:|---:|---:|---:|"]
        md += [f"| {b['boot']} | {b.get('wall_s', '')} | {b.get('load_s')} | {b.get('after_load_s')} | "
               f"{b.get('guest_s')} |" for b in counted + plain]
        md += [""]
    args.out.write_text("\n".join(md) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
