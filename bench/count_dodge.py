"""Can a module dodge the instruction count by putting code outside ``.text``? The real module, measured.

The planted regression of ``bench/kernel_counts.py`` (an extra mixing round per call and per block in
``wc_AesGcmEncryptUpdate``, kernel builds only), with that function also placed in
``.text.unlikely`` (``__attribute__((section(".text.unlikely")))``, what ``__cold`` code gets): a
module a PR could build. One counted boot, as the pipeline's load stage makes it, with every
executable section a declared range. From its per-function counts:

- what the plugin counted before it counted every executable section (``.text`` only: the
  functions of range 0 and its ``(no symbol)``), against the base, is the count the gate saw;
- what it counts now (every range), against the base, and what the gate makes of both with the
  policy's flags.

The base is the healthy ``lkcapi`` build of the same source and configuration, counted in one boot
the same way. Writes ``bench/results/count_dodge.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import kernel_counts as kc  # noqa: E402

from buildbot_bsdkm.perf.instruction_counts import (  # noqa: E402
    FLAG_DROP_PCT,
    FLAG_FUNCTION_PCT,
    MEASURED,
    InstructionCounts,
    ItemCount,
    compare_item,
    fmt_change,
)
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source  # noqa: E402

MOVED = "wc_AesGcmEncryptUpdate"


def dodging_source(base: Path, dest: Path) -> Path:
    """The planted source, with the planted function placed in ``.text.unlikely``."""
    if (dest / ".bsdkm-dodge").is_file():
        return dest
    planted = kc.planted_source(base, dest)
    aes = planted / "wolfcrypt" / "src" / "aes.c"
    text = aes.read_text()
    at = text.index(kc.GCM_ANCHOR)
    aes.write_text(text[:at] + '__attribute__((section(".text.unlikely")))\n' + text[at:])
    (dest / ".bsdkm-dodge").write_text("planted, and moved to .text.unlikely\n")
    return dest


def text_only(counts: InstructionCounts, outside: set[str]) -> InstructionCounts:
    """What the plugin counted when it counted ``.text`` alone: the functions not in ``outside``."""
    items = []
    for item in counts.items:
        kept = {f: n for f, n in item.functions.items() if f not in outside}
        items.append(ItemCount(item.name, item.kind, item.amount,
                               sum(kept.values()) if item.status == MEASURED else None, item.status,
                               item.reason, kept))
    return InstructionCounts(items=items, tool=counts.tool, scope=counts.scope)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bsdkm-count-dodge")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "count_dodge.md")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    config = kc.config_with_counting(args.work)
    healthy = wolfssl_source(config)
    base_boot = kc.boot(config, "lkcapi", kc.build(config, "lkcapi", healthy), args.work / "base")
    assert base_boot.counts is not None and base_boot.counts.measured, "the base boot counted nothing"
    source = dodging_source(healthy, args.work / "src-dodge")
    ko = kc.build(config, "lkcapi", source)
    print("built", ko, flush=True)
    b = kc.boot(config, "lkcapi", ko, args.work / "dodge")
    assert b.counts is not None and b.counts.measured, "the boot counted nothing"
    vm = args.work / "dodge" / "vm"
    outside: set[str] = set()  # the functions of every range but .text, and each range's "(name)"
    in_range = False
    for line in (vm / "text.syms").read_text().splitlines():
        parts = line.split()
        if parts[0] == "range":
            in_range = True
            outside.add(f"({parts[3]})")
        elif in_range:
            outside.add(parts[2])
    base = base_boot.counts
    old = text_only(b.counts, outside)
    rows, raw = [], []
    for item in b.counts.items:
        name = item.name
        seen_before = compare_item(base.item(name), old.item(name), kc.LIMIT_PCT, name=name)
        seen_now = compare_item(base.item(name), item, kc.LIMIT_PCT, name=name,
                                flag_drop_pct=FLAG_DROP_PCT, flag_function_pct=FLAG_FUNCTION_PCT)
        moved = item.functions.get(MOVED, 0)
        verdict_before = "FAIL" if seen_before.regressed else "pass"
        verdict_now = "FAIL" if seen_now.regressed else ("flagged" if seen_now.flagged else "pass")
        rows.append(f"| {name} | {base.item(name).instructions} | {old.item(name).instructions} | "  # type: ignore[union-attr]
                    f"{fmt_change(seen_before.change_pct)} {verdict_before} | {item.instructions} | "
                    f"{fmt_change(seen_now.change_pct)} {verdict_now} | {moved} |")
        raw.append({"item": name, "base": base.item(name).instructions,  # type: ignore[union-attr]
                    "text_only": old.item(name).instructions, "text_only_change_pct": seen_before.change_pct,
                    "text_only_regressed": seen_before.regressed, "all": item.instructions,
                    "all_change_pct": seen_now.change_pct, "all_regressed": seen_now.regressed,
                    "all_flagged": seen_now.flagged, "in_moved_function": moved})
    declared = [line for line in (vm / "counts.txt").read_text().splitlines() if " range " in line]
    md = ["# Code outside .text: the count before and after every executable section is counted", "",
          "`python bench/count_dodge.py` on the shared 2-core worker (QEMU TCG, Debian's 6.1 kernel, wolfSSL",
          f"5.9.2 `lkcapi`). The planted regression in `{MOVED}` (bench/kernel_counts.py), with that",
          "function placed in `.text.unlikely`. One counted boot of it, one of the healthy build (the base).",
          f"Limit {kc.LIMIT_PCT} %; flags: a drop beyond {FLAG_DROP_PCT:g} %, a function of "
          f"{FLAG_FUNCTION_PCT:g} % gone.", "",
          "Ranges the guest declared:", "", *[f"    {line}" for line in declared], "",
          "| item | base | .text only (as counted before) | change, gate | every section (now) "
          f"| change, gate | in {MOVED} |",
          "|---|---:|---:|---|---:|---|---:|", *rows, ""]
    args.out.write_text("\n".join(md) + "\n")
    doc = {"declared": declared, "items": raw}
    args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    print(args.out.read_text())
    shutil.rmtree(args.work / "dodge" / "vm" / "initramfs.d", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
