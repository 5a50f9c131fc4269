"""When the base branch asks for a bisection: a new failure signature between two recorded builds, or
a confirmed regression (the drift detector's change point in the perf history).

Pure: the base-branch outcomes of one (target, variant, kernel) (``triage.outcomes.BaseOutcome``
records, as the master stores them after each base build) in, the bisections to run out. A
signature is bisected once: ``done`` holds the keys of those already asked for. The range is the
newest recorded build that did not show the signature (the good end) up to the oldest build of the
run of builds that show it (the bad end): commits after that cannot have introduced it. A
regression's range is the last base build before the drift detector's new, slower level and the
first one at it (``perf.drift.detect`` over each item's best value per base build).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..perf import drift

# A level shift smaller than this is not worth a bisection (the drift detector names shifts from 1 %).
MIN_DROP = 0.05


@dataclass(frozen=True)
class BisectRequest:
    target: str
    variant: str
    signature: str
    good: str  # commit
    bad: str  # commit
    kernel: str = ""
    regression: str = ""  # a benchmark item that got slower (then signature is "")
    pct: float | None = None  # its drop in percent

    @property
    def key(self) -> str:
        """Once per signature (or slowed item and range): the same problem is bisected once."""
        what = self.signature or f"regression:{self.regression}@{self.bad}"
        return f"{self.target}/{self.variant}/{self.kernel}:{what}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BisectRequest:
        pct = d.get("pct")
        return cls(str(d["target"]), str(d["variant"]), str(d.get("signature") or ""), str(d["good"]),
                   str(d["bad"]), str(d.get("kernel") or ""), str(d.get("regression") or ""),
                   None if pct is None else float(pct))


def _field(o: Any, name: str, default: Any = None) -> Any:
    return o.get(name, default) if isinstance(o, Mapping) else getattr(o, name, default)


def requests_for(outcomes: Sequence[Any], done: Iterable[str] = ()) -> list[BisectRequest]:
    """The bisections the newest of ``outcomes`` (oldest first, one target/variant/kernel) asks for.

    Only signatures the newest build shows count (a failure since fixed needs no culprit now), and
    only with a good end recorded: a signature every recorded build shows has no range.
    """
    rows = [o for o in outcomes if _field(o, "commit")]
    if not rows:
        return []
    seen = set(done)
    newest = rows[-1]
    out = []
    for sig in sorted(set(_field(newest, "signatures") or [])):
        first_bad = len(rows) - 1
        while first_bad > 0 and sig in (_field(rows[first_bad - 1], "signatures") or []):
            first_bad -= 1
        if first_bad == 0:
            continue  # no recorded build without it: no good end
        good, bad = rows[first_bad - 1], rows[first_bad]
        req = BisectRequest(str(_field(newest, "target")), str(_field(newest, "variant")), sig,
                            str(_field(good, "commit")), str(_field(bad, "commit")),
                            str(_field(newest, "kernel") or ""))
        if req.key not in seen and req.good != req.bad:
            seen.add(req.key)
            out.append(req)
    return out


def regression_requests(target: str, variant: str, series: Mapping[str, Sequence[tuple[str, float]]],
                        done: Iterable[str] = (), min_drop: float = MIN_DROP) -> list[BisectRequest]:
    """A bisection per item whose base-branch history shifted to a level at least ``min_drop`` slower.

    ``series``: item -> (commit, best value of that base build), oldest first (``perf.store.best_series``).
    """
    seen = set(done)
    out = []
    for item, points in sorted(series.items()):
        for shift in drift.detect(points):
            if shift.change > -min_drop or shift.index < 1:
                continue
            good, bad = points[shift.index - 1][0], points[shift.index][0]
            req = BisectRequest(target, variant, "", good, bad, regression=item,
                                pct=round(-100 * shift.change, 1))
            if good and bad and good != bad and req.key not in seen:
                seen.add(req.key)
                out.append(req)
    return out
