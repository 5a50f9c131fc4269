"""The triage of a verdict in a few words, for one-line places: a commit status's description, a
Buildbot step summary, an annotation's title (``1 pre-existing failure since 5.9.2``).

Pure functions over the verdict dictionary (``policy.Verdict.to_dict()``), whose failed checks carry
``triage`` (new, pre-existing, known, flaky, fixed), ``signature``, ``triage_note`` and ``blocking``
(the triage core, ``buildbot_bsdkm/triage``). Shared by ``buildbot/`` and ``github/``, which never
import each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MAX_NEW = 3  # new failures named in the property

TRIAGE_ORDER = ("new", "pre-existing", "known", "flaky", "fixed")
_SINCE = re.compile(r"\bsince ([^,;()\s]+)")


def failed_checks(verdict: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    checks = verdict.get("checks", []) or []
    return [c for c in checks if isinstance(c, Mapping) and not c.get("passed", True)]


def triage_property(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """What the commit status and step summary say of the triage: distinct failures (by signature)
    per word (``new``, ``pre-existing``, ...), how many checks block, where a pre-existing one began,
    the new ones' signatures. Checks the triage has not seen (no ``triage``) are not counted."""
    failed = failed_checks(verdict)
    seen: dict[str, list[str]] = {}
    for c in verdict.get("checks", []) or []:
        if not isinstance(c, Mapping) or not c.get("triage"):
            continue
        if c.get("passed", True) and c.get("triage") != "fixed":
            continue
        sig = str(c.get("signature") or c.get("name"))
        names = seen.setdefault(str(c["triage"]), [])
        if sig not in names:
            names.append(sig)
    summary = verdict.get("triage") if isinstance(verdict.get("triage"), Mapping) else {}
    for f in summary.get("fixed") or []:  # the base's failures this build no longer shows
        sig = str(f.get("signature")) if isinstance(f, Mapping) else str(f)
        names = seen.setdefault("fixed", [])
        if sig not in names:
            names.append(sig)
    since = next((m.group(1) for c in failed if c.get("triage") == "pre-existing"
                  and (m := _SINCE.search(str(c.get("triage_note") or "")))), None)
    order = [w for w in (*TRIAGE_ORDER, *sorted(seen)) if w in seen]
    prop = {"counts": {w: len(seen[w]) for w in dict.fromkeys(order)},
            "blocking": sum(1 for c in failed if c.get("blocking", True)),
            "since": since, "new": seen.get("new", [])[:MAX_NEW]}
    if "triage" in verdict:  # with no base outcome nothing is new: said so, as the report's sections say
        prop["compared"] = bool(summary.get("base_outcomes"))
    return prop


def triage_words(triage: Mapping[str, Any] | None) -> str:
    """``1 new failure, 1 pre-existing failure since 5.9.2``: the triage as a phrase ("" for none)."""
    if not isinstance(triage, Mapping):
        return ""
    counts = triage.get("counts") if isinstance(triage.get("counts"), Mapping) else {}
    parts = []
    for word, n in counts.items():
        if not isinstance(n, int) or n <= 0:
            continue
        if word == "fixed":
            parts.append(f"{n} fixed")
            continue
        text = f"{n} {word} failure{'s' if n != 1 else ''}"
        if word == "new" and triage.get("compared") is False:
            text = f"{n} failure{'s' if n != 1 else ''} with no base to compare with"
        if word == "pre-existing" and triage.get("since"):
            text += f" since {triage['since']}"
        parts.append(text)
    return ", ".join(parts)


