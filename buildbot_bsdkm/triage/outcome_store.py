"""Base-branch outcomes, stored: what each build of the base branch did per (target, variant, kernel).

A record is the triage core's ``BaseOutcome`` as a plain dict (``to_dict``): ``target``, ``variant``,
``kernel`` (the kernel kind, ``debug``/``release`` on ``freebsd-kmod-qemu``; ``""`` for a target
with one, kept in the directory ``default``), ``verdict`` (``pass``/``fail``), ``signatures`` (the
failures' stable signatures), ``commit``, ``version``, ``date``, ``fingerprint`` and ``kinds``. Two
stores with one interface, beside the perf history they share a home with:

- ``OutcomeDirStore``: JSON files under the perf history directory (the CLI's and the Action's),
  ``outcomes/<target>/<variant>/<kernel>/<seq>-<commit>.outcome`` (JSON);
- ``OutcomeSqlStore``: the table ``bsdkm_base_outcomes`` in the Buildbot master's database (sqlite
  or PostgreSQL), next to ``bsdkm_perf_history``.

``window(target, variant, n)`` gives the newest ``n`` records of each kernel kind, oldest first: the
base's latest outcome and the builds before it ("in N of the last M base builds").
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..perf.store import OUTCOMES_DIR, StoreError, safe_name, sql_table
from .outcomes import BaseOutcome

TABLE = "bsdkm_base_outcomes"
# JSON, but not named *.json: ``compare --history DIR`` reads every *.json under DIR as a run.
SUFFIX = ".outcome"
DEFAULT_KERNEL = "default"  # the directory of a target that boots one kernel (its records say "")


def checked(record: Mapping[str, Any] | BaseOutcome) -> dict[str, Any]:
    """``record`` as stored (``BaseOutcome.to_dict``), its fields checked (StoreError naming the field)."""
    try:
        out = (record if isinstance(record, BaseOutcome) else BaseOutcome.from_dict(record)).to_dict()
    except ValueError as e:
        raise StoreError(str(e)) from None
    for key in ("target", "variant"):
        safe_name(key, out[key])
    if out["kernel"]:
        safe_name("kernel", out["kernel"])
    return out


def _kernel_dir(kernel: str) -> str:
    return kernel or DEFAULT_KERNEL


def _strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "_seq"} for r in records]


class OutcomeDirStore:
    """Base outcomes as JSON files under a perf history directory (``bsdkm-ci history``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root) / OUTCOMES_DIR

    def _dir(self, target: str, variant: str, kernel: str) -> Path:
        d = (self.root / safe_name("target", target) / safe_name("variant", variant)
             / safe_name("kernel", kernel))
        if not d.resolve().is_relative_to(self.root.resolve()):
            raise StoreError(f"{d} resolves outside the outcome store {self.root}: refused")
        return d

    def add(self, record: Mapping[str, Any]) -> Path:
        rec = checked(record)
        d = self._dir(rec["target"], rec["variant"], _kernel_dir(rec["kernel"]))
        d.mkdir(parents=True, exist_ok=True)
        seq = len(list(d.glob(f"*{SUFFIX}"))) + 1
        safe = re.sub(r"[^0-9A-Za-z._-]", "_", rec.get("commit") or "unknown")[:64]
        path = d / f"{seq:06d}-{safe}{SUFFIX}"
        path.write_text(json.dumps({**rec, "recorded": time.time()}, indent=2) + "\n", encoding="utf-8")
        return path

    def _read(self, path: Path) -> dict[str, Any]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StoreError(f"{path}: unreadable base outcome: {e}") from None
        if isinstance(doc, dict):
            doc.pop("recorded", None)
        try:
            return checked(doc)
        except StoreError as e:
            raise StoreError(f"{path}: {e}") from None

    def window(self, target: str, variant: str, n: int = 10) -> list[dict[str, Any]]:
        base = self.root / safe_name("target", target) / safe_name("variant", variant)
        out: list[dict[str, Any]] = []
        for kdir in sorted(p for p in base.glob("*") if p.is_dir()):
            for path in sorted(kdir.glob(f"*{SUFFIX}"))[-n:]:
                rec = self._read(path)
                rec["_seq"] = path.stat().st_mtime_ns
                out.append(rec)
        return _strip(sorted(out, key=lambda r: r["_seq"]))

    def pairs(self) -> list[tuple[str, str]]:
        """Every (target, variant) with outcomes."""
        return sorted((p.parent.name, p.name) for p in self.root.glob("*/*") if p.is_dir())


class OutcomeSqlStore:
    """Base outcomes in a SQL database (the Buildbot master's), one row per (build, kernel kind)."""

    def __init__(self, db_url: str) -> None:
        self._sa, self.engine, self.table = sql_table(
            db_url, TABLE, "a database outcome store",
            [("target", 64, False), ("variant", 64, False), ("kernel", 64, False), ("verdict", 16, False),
             ("commit", 128, False), ("version", 64, True), ("fingerprint", 64, True)],
            ("target", "variant", "kernel"))

    def add(self, record: Mapping[str, Any]) -> int:
        rec = checked(record)
        row = {"target": rec["target"], "variant": rec["variant"], "kernel": rec["kernel"],
               "verdict": rec["verdict"], "commit": (rec.get("commit") or "unknown")[:128],
               "version": (rec.get("version") or None), "fingerprint": (rec.get("fingerprint") or None),
               "recorded_at": time.time(), "document": json.dumps(rec)}
        with self.engine.begin() as conn:
            res = conn.execute(self.table.insert().values(**row))
            return int(res.inserted_primary_key[0])

    def window(self, target: str, variant: str, n: int = 10) -> list[dict[str, Any]]:
        t, sa = self.table, self._sa
        with self.engine.connect() as conn:
            kernels = [k for (k,) in conn.execute(
                sa.select(t.c.kernel).where(t.c.target == target, t.c.variant == variant).distinct())]
            rows: list[tuple[int, str]] = []
            for kernel in kernels:
                q = (sa.select(t.c.id, t.c.document)
                     .where(t.c.target == target, t.c.variant == variant, t.c.kernel == kernel)
                     .order_by(t.c.id.desc()).limit(n))
                rows += [(int(i), str(doc)) for i, doc in conn.execute(q)]
        out = []
        for i, doc in sorted(rows):
            try:
                rec = checked(json.loads(doc))
            except (ValueError, StoreError) as e:
                raise StoreError(f"{TABLE} row {i}: {e}") from None
            out.append(rec)
        return out

    def pairs(self) -> list[tuple[str, str]]:
        t, sa = self.table, self._sa
        q = sa.select(t.c.target, t.c.variant).distinct().order_by(t.c.target, t.c.variant)
        with self.engine.connect() as conn:
            return [(str(a), str(b)) for a, b in conn.execute(q)]

    def close(self) -> None:
        self.engine.dispose()


def latest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest record of each kernel kind (the base's latest outcome)."""
    newest: dict[str, dict[str, Any]] = {}
    for rec in records:
        newest[rec.get("kernel") or ""] = rec
    return list(newest.values())


def describe(records: list[dict[str, Any]]) -> list[str]:
    """One line per kernel kind: its latest verdict and signatures, over how many base builds."""
    by_kernel: dict[str, list[dict[str, Any]]] = {}
    for rec in records:
        by_kernel.setdefault(rec.get("kernel") or "", []).append(rec)
    lines = []
    for kernel, recs in sorted(by_kernel.items()):
        last = recs[-1]
        fails = sum(1 for r in recs if r["verdict"] == "fail")
        since = last.get("version") or (last.get("commit") or "?")[:12]
        sigs = "; ".join(last["signatures"]) or "no failures"
        where = f" ({kernel} kernel)" if kernel else ""
        lines.append(f"{last['target']}/{last['variant']}{where}: {last['verdict']} at {since} "
                     f"({fails} of the last {len(recs)} failed): {sigs}")
    return lines
