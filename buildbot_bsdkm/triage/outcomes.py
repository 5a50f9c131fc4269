"""What a base-branch build did, per (target, variant, kernel kind): the record triage compares with.

``BaseOutcome`` is plain data (``to_dict``/``from_dict``) so the shells can store it (Buildbot's
database, the Action's results store) and hand it back. ``outcomes_of(runs, verdict)`` derives the
records from a gated build; ``outcomes_from_document(doc)`` from a results document as
``parse --json``, ``run`` (``summary.json``, ``results.json``) or ``compare --json`` write them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..checks import Verdict
from ..model import RunResult, from_json
from ..perf.fingerprint import of_run
from .signature import signature

# console-debug.log, console-release-crypto.log: the kernel a FreeBSD QEMU boot ran
_KERNEL_LOG = re.compile(r"(?:^|/)console-(?P<kind>[\w-]+?)(?:\.\d+)?\.log$")


@dataclass
class BaseOutcome:
    """One (target, variant, kernel) of one base build: its verdict and failure signatures."""

    target: str
    variant: str
    kernel: str = ""  # the kernel kind (debug, release, ...) where a target boots several; else ""
    verdict: str = "pass"  # pass | fail
    signatures: list[str] = field(default_factory=list)  # sorted, each once
    commit: str | None = None
    version: str | None = None  # the wolfSSL version built
    date: str | None = None  # ISO 8601, UTC
    fingerprint: str | None = None  # perf/fingerprint.py id of the machine that ran it
    kinds: list[str] = field(default_factory=list)  # check kinds the build ran (selftest, kernel, ...)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.target, self.variant, self.kernel)

    @property
    def label(self) -> str:
        return f"{self.target}/{self.variant}" + (f" ({self.kernel} kernel)" if self.kernel else "")

    @property
    def since(self) -> str | None:
        """What names this build in a sentence: its commit (short), else its version."""
        return self.commit[:12] if self.commit else self.version

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BaseOutcome:
        """``to_dict`` back; ValueError naming the problem when ``d`` is not an outcome."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a base outcome is a mapping, not {type(d).__name__}")
        for key in ("target", "variant"):
            if not isinstance(d.get(key), str) or not d.get(key):
                raise ValueError(f"base outcome needs a {key!r} string")
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"base outcome has unknown keys: {', '.join(map(str, unknown))}")
        if d.get("verdict", "pass") not in ("pass", "fail"):
            raise ValueError(f"base outcome verdict must be pass or fail, not {d.get('verdict')!r}")
        sigs = d.get("signatures") or []
        kinds = d.get("kinds") or []
        if not isinstance(sigs, list) or not all(isinstance(s, str) for s in sigs):
            raise ValueError("base outcome 'signatures' must be a list of strings")
        if not isinstance(kinds, list):
            raise ValueError("base outcome 'kinds' must be a list of strings")

        def opt(key: str) -> str | None:
            v = d.get(key)
            return None if v is None else str(v)

        return cls(d["target"], d["variant"], str(d.get("kernel") or ""), str(d.get("verdict", "pass")),
                   sorted(set(sigs)), opt("commit"), opt("version"), opt("date"), opt("fingerprint"),
                   sorted({str(k) for k in kinds}))


def kernel_of_source(source: str | None) -> str:
    """The kernel kind a log was booted on (``console-debug.log`` -> ``debug``), else ``""``."""
    m = _KERNEL_LOG.search(source or "")
    return m["kind"] if m else ""


def run_kernels(run: RunResult) -> list[str]:
    """The kernel kinds a run booted, in its logs' order (``[""]`` when it names none)."""
    kinds: list[str] = []
    for log in run.logs:
        k = kernel_of_source(log.source)
        if k and k not in kinds:
            kinds.append(k)
    return kinds or [""]


def check_kernels(check: Any, run: RunResult | None) -> list[str]:
    """The kernel kinds a check is about: its log's, else every kernel its run booted."""
    detail = getattr(check, "detail", None) or {}
    source = detail.get("source") if isinstance(detail, Mapping) else None
    source = source or getattr(check, "log_source", None)
    k = kernel_of_source(source)
    if k:
        return [k]
    if run is None:
        return [""]
    kernels = run_kernels(run)
    if len(kernels) > 1 and str(getattr(check, "kind", "")) in ("selftest", "benchmark"):
        # a self-test or benchmark item fails in the logs that print it failing, not in every boot
        name = getattr(check, "name", "")
        found = [kernel_of_source(log.source) for log in run.logs
                 if any(t.name == name and not t.passed for t in log.tests)
                 or any(b.name == name and b.failed for b in log.benchmarks)]
        if [k for k in found if k]:
            return sorted({k for k in found if k}, key=kernels.index)
    if len(kernels) > 1 and getattr(check, "name", "").startswith("stage:"):
        # a stage failure is one kernel's: the part of the run its record names ("debug kernel",
        # as the freebsd-kmod-qemu target and ``RunResult.not_run_parts`` name a kernel)
        part = _failed_part(check, run)
        said = next((k for k in kernels if part == f"{k} kernel"), None)
        if said is not None:
            return [said]
        for log in run.logs:
            if log.kernel and kernel_of_source(log.source):
                return [kernel_of_source(log.source)]
    return kernels


def _failed_part(check: Any, run: RunResult) -> str | None:
    """The ``part`` of the stage failure a stage check is of: its run's record, else the check's."""
    stage = getattr(check, "name", "").removeprefix("stage:")
    if run.failure is not None and run.failure.stage == stage:
        return run.failure.part
    detail = getattr(check, "detail", None) or {}
    record = detail.get("failure") if isinstance(detail, Mapping) else None
    return record.get("part") if isinstance(record, Mapping) else None


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def outcomes_of(runs: Sequence[RunResult], verdict: Any, *, commit: str | None = None,
                version: str | None = None, date: str | None = None,
                sign: Callable[[Any, RunResult | None], str] = signature) -> list[BaseOutcome]:
    """One ``BaseOutcome`` per (target, variant, kernel) of a gated build (``verdict``: a
    ``Verdict``). ``commit``/``version`` default to the runs' metadata, ``date`` to now."""
    by_label = {(r.target, r.variant): r for r in runs}
    out: dict[tuple[str, str, str], BaseOutcome] = {}
    when = date or now_iso()
    for run in runs:
        for k in run_kernels(run):
            key = (run.target, run.variant, k)
            if key not in out:
                out[key] = BaseOutcome(
                    run.target, run.variant, k, "pass", [],
                    commit or _str(run.metadata.get("source_commit")),
                    version or _str(run.metadata.get("wolfssl_version")), when, of_run(run.metadata))
    for c in getattr(verdict, "checks", []):
        run = by_label.get((c.target, c.variant))
        if run is None:
            continue
        for k in check_kernels(c, run):
            o = out.get((c.target, c.variant, k))
            if o is None:
                continue
            kind = str(getattr(c.kind, "value", c.kind))
            if kind not in o.kinds:
                o.kinds.append(kind)
            if not c.passed:
                o.verdict = "fail"
                s = sign(c, run)
                if s not in o.signatures:
                    o.signatures.append(s)
    for o in out.values():
        o.signatures.sort()
        o.kinds.sort()
    return list(out.values())


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def outcomes_from_document(doc: Mapping[str, Any], where: str,
                           judge: Callable[[list[RunResult]], Any] | None = None,
                           date: str | None = None) -> list[BaseOutcome]:
    """Base outcomes of a results document. A document with a ``verdict`` (``summary.json``,
    ``compare --json``) is read as judged; one without (``parse --json``, ``results.json``) is
    judged by ``judge(runs) -> Verdict`` (the caller's policy). ValueError names ``where``."""
    if isinstance(doc.get("base_outcomes"), list):  # a store of outcomes (the shells' export)
        try:
            return [BaseOutcome.from_dict(o) for o in doc["base_outcomes"]]
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    runs = from_json(json.dumps({k: v for k, v in doc.items() if k in ("schema", "runs")}), where)
    verdict_doc = doc.get("verdict")
    if isinstance(verdict_doc, Mapping) and isinstance(verdict_doc.get("checks"), list):
        try:
            verdict = Verdict.from_dict(verdict_doc)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    elif judge is not None:
        verdict = judge(runs)
    else:
        raise ValueError(f"{where}: no verdict in the document and no policy to judge its runs")
    return outcomes_of(runs, verdict, date=date or _str(doc.get("date")))
