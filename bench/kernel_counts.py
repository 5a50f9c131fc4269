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
- forged: a module build whose init executes the start signal without the nonce gets no count;
- cost: each boot's wall seconds with the plugin against the same boot without it.

Parts: spread, variants, planted, rebuilds, cost. Writes Markdown (default
``bench/results/kernel_counts.md``) and the raw counts beside it (``.json``). ``--build-only``
builds the modules the later parts need (into the shared cache, sources under ``--work``), so a
second process can build while the first boots.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from buildbot_bsdkm.config.bsdkm_yml import Config, load_config  # noqa: E402
from buildbot_bsdkm.perf.instructions import InstructionCounts, compare_counts, fmt_change  # noqa: E402
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
    counts = linuxkm.read_module_counts(vm, vm / "console.log") if count else None
    return Boot(counts, wall, outcome.load_rc, work)


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
    ap.add_argument("--only", default="spread,variants,planted,rebuilds,cost")
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
        alarms = 0
        for i in range(args.rebuilds):
            hsrc = planted_source(source, tmp / f"src-healthy-{i}", marker=str(i))
            hko = build(config, "lkcapi", hsrc)
            hb = boot(config, "lkcapi", hko, tmp / f"healthy-{i}")
            changes = compare_counts(first.counts, hb.counts, LIMIT_PCT) if hb.counts else []
            alarms += sum(1 for c in changes if c.regressed)
            print(f"healthy rebuild {i}: alarms so far {alarms}", flush=True)
        raw["healthy_alarms"] = alarms
        raw["healthy_rebuilds"] = args.rebuilds
        md += [f"## Healthy rebuilds: {args.rebuilds}, alarms: {alarms}", ""]
    if "cost" in parts:
        plain = boot(config, "lkcapi", ko, tmp / "plain", count=False)
        raw["cost"] = {"counted_s": round(first.wall_s, 1), "plain_s": round(plain.wall_s, 1)}
        md += ["## Cost per run", "", f"A counted boot: {first.wall_s:.0f} s; the same boot without the "
               f"plugin and the counted work: {plain.wall_s:.0f} s.", ""]
    args.out.write_text("\n".join(md) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(raw, indent=1) + "\n")
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
