"""Base-branch results per machine fingerprint: the history the perf gate learns spread from.

Two stores with one interface (``add`` a run of the base branch, ``window`` the newest N runs of
one fingerprint/target/variant, oldest first):

- ``DirStore``: JSON files under a directory, ``<fingerprint>/<target>/<variant>/<seq>-<commit>.json``
  (the CLI's and the Action's; ``bsdkm-ci compare --history DIR`` reads it);
- ``SqlStore``: one table, ``bsdkm_perf_history``, in the Buildbot master's own database
  (the master's ``db_url``: sqlite by default, PostgreSQL when configured), via SQLAlchemy.

Only healthy runs belong here (the caller stores the base branch's passing runs). A head is
compared against a *window* of history, never against the last pass, so a slow loss of a few
percent a week cannot ratchet the baseline down with it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ..model import RunResult, from_json, to_json
from . import drift, fingerprint

TABLE = "bsdkm_perf_history"
OUTCOMES_DIR = "outcomes"  # a history directory's base outcomes (triage/outcome_store.py), no fingerprint


class StoreError(ValueError):
    """A run that cannot be stored (no fingerprint), or a store that cannot be read."""


# A fingerprint id, target or variant becomes a directory name: only plain names, so a run
# (whose metadata a PR's worker wrote) cannot name a path outside the store.
_SAFE_NAME = re.compile(r"[0-9A-Za-z_+-][0-9A-Za-z._+-]{0,127}")


def safe_name(kind: str, name: object) -> str:
    """``name`` if it is a plain file name (letters, digits, ``._+-``, not starting with a dot)."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise StoreError(f"{kind} {name!r} is not a plain name (letters, digits, '._+-', "
                         "not starting with '.'): refused as a history path")
    return name


def not_healthy(run: RunResult) -> str | None:
    """Why ``run`` does not belong in a history (None: it does). Only a run that passed every stage,
    with complete logs, every self-test passed and benchmarks printed measures the code's speed."""
    if run.failure is not None:
        return f"{run.failure.stage} failed ({run.failure.reason or run.failure.category})"
    if not run.complete:
        return "a log is incomplete"
    if any(not t.passed for t in run.tests):
        return "a self-test failed"
    if not run.benchmarks:
        return "no benchmark results"
    return None


def _key(run: RunResult) -> str:
    fp = fingerprint.of_run(run.metadata)
    if fp is None:
        raise StoreError(f"{run.target}/{run.variant}: no machine fingerprint in the run's metadata: "
                         "history would mix machines")
    return fp


def _commit(run: RunResult, commit: str | None) -> str:
    return commit or run.metadata.get("source_commit") or run.metadata.get("source_sha256") or "unknown"


class DirStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _dir(self, fp: str, target: str, variant: str) -> Path:
        d = (self.root / safe_name("fingerprint id", fp) / safe_name("target", target)
             / safe_name("variant", variant))
        # Belt and braces beside safe_name: a symlink inside the store must not lead out of it.
        root = self.root.resolve()
        if not d.resolve().is_relative_to(root):
            raise StoreError(f"{d} resolves outside the history store {root}: refused")
        return d

    def add(self, run: RunResult, commit: str | None = None) -> Path:
        d = self._dir(_key(run), run.target, run.variant)
        d.mkdir(parents=True, exist_ok=True)
        seq = len(list(d.glob("*.json"))) + 1
        safe = re.sub(r"[^0-9A-Za-z._-]", "_", _commit(run, commit))[:64]
        path = d / f"{seq:06d}-{safe}.json"
        path.write_text(to_json([run], commit=_commit(run, commit), recorded=time.time()))
        return path

    def series(self) -> list[tuple[str, str, str, int]]:
        """(fingerprint, target, variant, stored runs) of every series, sorted (as ``SqlStore``'s)."""
        out = []
        for d in sorted(p for p in self.root.glob("*/*/*") if p.is_dir()):
            fp, target, variant = d.relative_to(self.root).parts
            if fp == OUTCOMES_DIR:  # the base outcomes kept beside the history (triage/outcome_store)
                continue
            out.append((fp, target, variant, len(list(d.glob("*.json")))))
        return out

    def window(self, fp: str, target: str, variant: str, n: int = 30) -> list[tuple[str, RunResult]]:
        """(commit, run) of the newest ``n`` stored runs, oldest first."""
        out = []
        for path in sorted(self._dir(fp, target, variant).glob("*.json"))[-n:]:
            doc_commit = path.stem.split("-", 1)[1] if "-" in path.stem else path.stem
            try:
                runs = from_json(path.read_text(), str(path))
            except ValueError as e:
                raise StoreError(str(e)) from None
            out += [(doc_commit, r) for r in runs]
        return out


def sql_table(db_url: str, name: str, what: str, strings: list[tuple[str, int, bool]],
              key: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """(sqlalchemy, engine, table) of one of our tables in a Buildbot master's database.

    The table is ``id``, the named string columns (name, length, nullable), ``recorded_at`` and the
    JSON ``document``, indexed by ``key`` then ``id``; it is created next to Buildbot's own, once.
    """
    try:
        import sqlalchemy as sa
    except ImportError:
        raise StoreError(f"{what} needs SQLAlchemy, which the Buildbot extra brings: "
                         "pip install 'buildbot-bsdkm[buildbot]'") from None
    engine = sa.create_engine(db_url, future=True)
    meta = sa.MetaData()
    table = sa.Table(
        name, meta,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        *(sa.Column(col, sa.String(length), nullable=nullable) for col, length, nullable in strings),
        sa.Column("recorded_at", sa.Float, nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Index(f"{name}_key", *key, "id"),
    )
    meta.create_all(engine)
    return sa, engine, table


class SqlStore:
    """History in a SQL database (the Buildbot master's), one row per stored run."""

    def __init__(self, db_url: str) -> None:
        self._sa, self.engine, self.table = sql_table(
            db_url, TABLE, "a database history",
            [("fingerprint", 64, False), ("target", 64, False), ("variant", 64, False),
             ("commit", 128, False)],
            ("fingerprint", "target", "variant"))

    def add(self, run: RunResult, commit: str | None = None) -> int:
        row: dict[str, Any] = {"fingerprint": _key(run), "target": run.target, "variant": run.variant,
                               "commit": _commit(run, commit), "recorded_at": time.time(),
                               "document": to_json([run])}
        with self.engine.begin() as conn:
            res = conn.execute(self.table.insert().values(**row))
            return int(res.inserted_primary_key[0])

    def window(self, fp: str, target: str, variant: str, n: int = 30) -> list[tuple[str, RunResult]]:
        t, sa = self.table, self._sa
        q = (sa.select(t.c.commit, t.c.document)
             .where(t.c.fingerprint == fp, t.c.target == target, t.c.variant == variant)
             .order_by(t.c.id.desc()).limit(n))
        with self.engine.connect() as conn:
            rows = list(conn.execute(q))
        out = []
        for commit, doc in reversed(rows):
            try:
                out += [(commit, r) for r in from_json(doc, f"{TABLE}:{commit}")]
            except ValueError as e:
                raise StoreError(str(e)) from None
        return out

    def series(self) -> list[tuple[str, str, str, int]]:
        """Every stored (fingerprint, target, variant) with its run count."""
        t, sa = self.table, self._sa
        q = (sa.select(t.c.fingerprint, t.c.target, t.c.variant, sa.func.count())
             .group_by(t.c.fingerprint, t.c.target, t.c.variant)
             .order_by(t.c.target, t.c.variant, t.c.fingerprint))
        with self.engine.connect() as conn:
            return [(fp, target, variant, int(n)) for fp, target, variant, n in conn.execute(q)]

    def close(self) -> None:
        self.engine.dispose()


def best_series(window: list[tuple[str, RunResult]]) -> dict[str, list[tuple[str, float]]]:
    """Per item, each run's best throughput (its repeats' highest), oldest first, with its commit."""
    series: dict[str, list[tuple[str, float]]] = {}
    for commit, run in window:
        best: dict[str, float] = {}
        for log in run.logs:
            for b in log.benchmarks:
                if not b.failed and b.per_second > 0:
                    best[b.name] = max(best.get(b.name, 0.0), b.per_second)
        for name, value in best.items():
            series.setdefault(name, []).append((commit, value))
    return series


def trend(window: list[tuple[str, RunResult]]) -> dict[str, dict[str, Any]]:
    """Per item, the history as the report's trend panel draws it: every run's best value (oldest
    first, the newest as the panel's highlighted point) and the drift ``drift.detect`` finds.

    The same shape as the verdict's ``perf[].trend`` (report.trend_svg draws both); here the
    "verdict" names how many runs the series has, since nothing is judged.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, full in best_series(window).items():
        points = [(str(commit)[:12], value) for commit, value in full]
        if len(points) < 2:
            continue
        found = drift.detect(points)
        out[name] = {"points": [[c, round(v, 6)] for c, v in points[:-1]], "head": round(points[-1][1], 6),
                     "head_label": "newest", "verdict": f"{len(points)} runs", "cycles": False,
                     "drift": ({"commit": found[-1].commit, "index": found[-1].index,
                                "change": round(found[-1].change, 4)} if found else None)}
    return out
