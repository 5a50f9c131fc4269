"""Offload vs software inside one run: the gate of a ``crossovers`` rule with ``paths: true``.

An lkcapi run measures one algorithm along several *paths* in one boot (``parsers/afalg_bench.py``:
``afalg:<path>:<ALG>@<bytes>``); FreeBSD's offload run ``openssl:<devcrypto|software>:...``.
The rule compares two paths of the same run instead of two variants (``max_block``,
``max_slower_pct``), and every such rule adds one ``offload`` check per run and algorithm: the
registered driver was the one used. The tables and charts of these paths are ``report/offload_paths.py``'s.
"""

from __future__ import annotations

import re
from typing import Any

from ..checks import CheckKind
from ..model import RunResult
from .context import Evaluation
from .measure import crossover_block, matches
from .rules import CrossoverRule

WOLFCRYPT_MODULE = "libwolfssl"
WOLFCRYPT_FREEBSD_DRIVER = "libwolf"  # the device name of the crypto-register driver (libwolf0, ...)
_NAME = re.compile(r"\A(?P<prefix>[^:@]+):(?P<path>[^:@]+):(?P<alg>[^@]+)@(?P<size>\d+)")
_KERNEL_ALG = {"AES-128-GCM": "gcm(aes)", "AES-128-CBC": "cbc(aes)", "SHA-256": "sha256",
               "HMAC-SHA256": "hmac(sha256)"}


def path_series(run: RunResult, pattern: str = "*") -> dict[str, dict[str, dict[int, float]]]:
    """family (``afalg:AES-128-GCM``) -> path -> {block bytes: bytes/s} of one run's path items."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for log in run.logs:
        for b in log.benchmarks:
            m = _NAME.fullmatch(b.name)
            if m is None or b.failed or b.per_second <= 0 or not matches(b.name, pattern):
                continue
            family = f"{m['prefix']}:{m['alg']}"
            out.setdefault(family, {}).setdefault(m["path"], {})[int(m["size"])] = b.per_second
    return out


def _bound(run: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    bound: dict[str, Any] = {}
    proc: dict[str, Any] = {}
    for log in run.logs:
        bound.update(log.metadata.get("afalg_bound") or {})
        proc.update(log.metadata.get("afalg_proc") or {})
    return bound, proc


def evaluate_paths(ev: Evaluation, rule: CrossoverRule) -> None:
    """The checks of one ``paths: true`` crossover rule."""
    for run in ev.runs:
        if rule.targets and run.target not in rule.targets:
            continue
        series = path_series(run, rule.pattern)
        if not series:
            continue
        compared = 0
        for family, paths in sorted(series.items()):
            acc, soft = paths.get(rule.accelerated, {}), paths.get(rule.software, {})
            ratios = {size: acc[size] / soft[size] for size in acc if size in soft and soft[size] > 0}
            if len(ratios) < 2:
                ev.note(f"{run.target}/{run.variant}: {family} has no {rule.accelerated} and {rule.software} "
                        "results at two or more common block sizes")
                continue
            compared += 1
            _crossover_check(ev, run, rule, family, ratios, crossover_block(ratios), paths)
        _driver_checks(ev, run, series)
        if not compared:
            ev.note(f"{run.target}/{run.variant}: no {rule.pattern!r} items on both paths "
                    f"{rule.accelerated} and {rule.software}")


def _crossover_check(ev: Evaluation, run: RunResult, rule: CrossoverRule, family: str,
                     ratios: dict[int, float],
                     point: int | None, paths: dict[str, dict[int, float]]) -> None:
    where = "never" if point is None else f"{point} bytes"
    worst = min(ratios.values())
    problems = []
    if rule.max_block is not None and (point is None or point > rule.max_block):
        problems.append(f"crossover must be at or below {rule.max_block} bytes")
    if rule.max_slower_pct is not None and worst < 1 - rule.max_slower_pct / 100:
        problems.append(f"{rule.accelerated} is {100 * (1 - worst):.0f}% slower than {rule.software} at "
                        f"{min(ratios, key=ratios.__getitem__)} bytes (limit {rule.max_slower_pct:g}%)")
    steps = ", ".join(f"{size}: {ratio:.2f}x" for size, ratio in sorted(ratios.items()))
    msg = (f"{family}: {rule.accelerated} vs {rule.software} crossover {where} ({steps})"
           + (f"; {'; '.join(problems)}" if problems else ""))
    ev.add(run, f"{family} {rule.accelerated} vs {rule.software}", CheckKind.CROSSOVER, not problems, msg,
           value=float(point) if point is not None else None, unit="bytes",
           threshold=float(rule.max_block) if rule.max_block else None, metric="per_second",
           detail={"software": rule.software, "accelerated": rule.accelerated, "paths": True,
                   "crossover": point if point is not None else "never",
                   "ratios": {str(k): round(v, 3) for k, v in sorted(ratios.items())},
                   "worst_ratio": round(worst, 3), "max_slower_pct": rule.max_slower_pct,
                   "series": {p: {str(k): round(v, 1) for k, v in sorted(s.items())}
                              for p, s in sorted(paths.items())}})


def _driver_checks(ev: Evaluation, run: RunResult, series: dict[str, dict[str, dict[int, float]]]) -> None:
    """The registered driver was the one AF_ALG used: module libwolfssl, priority as in /proc/crypto."""
    bound, proc = _bound(run)
    for family in sorted(series):
        name = f"{family} registered driver"
        if any(c.name == name and c.variant == run.variant and c.target == run.target
               for c in ev.verdict.checks):
            continue  # several rules over the same run check the driver once
        if not family.startswith("afalg:"):
            _crid_check(ev, run, name, family)
            continue
        alg = _KERNEL_ALG.get(family.split(":", 1)[1], family.split(":", 1)[1])
        lk = bound.get(f"lkcapi:{alg}")
        if lk is None:
            ev.add(run, name, CheckKind.OFFLOAD, False,
                   f"{family}: no AF_ALG bind to wolfCrypt's driver recorded")
            continue
        listed = proc.get(lk.get("driver", ""), {})
        best = max((p.get("priority", -1) for p in proc.values() if p.get("name") == alg
                    and p.get("internal") != "yes"), default=-1)
        problems = []
        if lk.get("module") != WOLFCRYPT_MODULE:
            problems.append(f"bound to {lk.get('driver')} of module {lk.get('module')}, "
                            f"not {WOLFCRYPT_MODULE}")
        if listed.get("priority") != lk.get("priority"):
            problems.append(f"/proc/crypto lists priority {listed.get('priority')} for {lk.get('driver')}")
        by_name = bound.get(f"name:{alg}")
        if by_name is not None and by_name.get("driver") != lk.get("driver"):
            problems.append(f"the generic name {alg} resolved to {by_name.get('driver')}, "
                            "not wolfCrypt's driver")
        msg = (f"{family}: AF_ALG used {lk.get('driver')} (module {lk.get('module')}, priority "
               f"{lk.get('priority')}; highest listed for {alg}: {best})"
               + (f"; {'; '.join(problems)}" if problems else ""))
        ev.add(run, name, CheckKind.OFFLOAD, not problems, msg, value=float(lk.get("priority") or 0),
               unit="priority",
               detail={"driver": lk.get("driver"), "module": lk.get("module"), "priority": lk.get("priority"),
                       "by_name": by_name.get("driver") if by_name else None,
                       "kernel_driver": (bound.get(f"kernel:{alg}") or {}).get("driver")})


def _crid_check(ev: Evaluation, run: RunResult, name: str, family: str) -> None:
    """FreeBSD (``pipeline/targets/freebsd_kmod/offload.py``): the driver registered a crid with the
    crypto framework, and /dev/crypto gave the engine wolfCrypt's driver (when offload.sh could tell
    which)."""
    facts = next((log.metadata for log in run.logs if "offload_crid" in log.metadata), None)
    if facts is None:
        return  # not an offload run: nothing to say about drivers
    crid, driver = facts.get("offload_crid"), facts.get("offload_driver")
    other = driver not in (None, "unknown") and not str(driver).startswith(WOLFCRYPT_FREEBSD_DRIVER)
    if not crid:
        msg = (f"{family}: no 'driver loaded: <crid>' line: the driver did not register with the crypto "
               "framework")
    elif other:
        msg = (f"{family}: wolfCrypt's driver registered crid {crid}, but /dev/crypto gave the openssl "
               f"engine {driver}: the engine path measured another driver")
    else:
        msg = (f"{family}: wolfCrypt's driver registered crid {crid} with the crypto framework "
               f"(openssl engine {facts.get('offload_engine')}, driver {driver or 'not named'})")
    ev.add(run, name, CheckKind.OFFLOAD, bool(crid) and not other, msg, value=float(crid) if crid else None,
           unit="crid",
           detail={"crid": crid, "engine": facts.get("offload_engine"), "driver": driver,
                   "kern_crypto": facts.get("kern_crypto")})
