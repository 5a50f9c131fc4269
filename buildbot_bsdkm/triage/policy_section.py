"""The ``triage:`` section of a policy file: which triaged failures fail the verdict.

    triage:
      pre_existing: warn   # on the base already: fail | warn
      known: warn          # matched by a known-issue entry
      flaky: warn          # did not reproduce on the re-run, or comes and goes on the base

A ``new`` failure always fails. ``warn``: the check stays failed (shown, annotated as a warning)
but does not fail the verdict. By default only ``new`` fails.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..support.yaml_reader import At

ACTIONS = ("fail", "warn")
KEYS = ("pre_existing", "known", "flaky")
# The triage words (the JSON and the reports say these).
NEW, PRE_EXISTING, KNOWN, FLAKY, FIXED = "new", "pre-existing", "known", "flaky", "fixed"


@dataclass(frozen=True)
class TriageRules:
    pre_existing: str = "warn"
    known: str = "warn"
    flaky: str = "warn"

    def blocks(self, word: str | None) -> bool:
        """Whether a failure with this triage word fails the verdict."""
        if word == PRE_EXISTING:
            return self.pre_existing == "fail"
        if word == KNOWN:
            return self.known == "fail"
        if word == FLAKY:
            return self.flaky == "fail"
        return True


def read_rules(at: At) -> TriageRules:
    """``triage:`` of a policy file (``policy/rules.py`` hands its node; errors name the line)."""
    if at.is_null():
        return TriageRules()
    m = at.mapping(KEYS)
    return TriageRules(**{k: v.choice(ACTIONS) for k, v in m.items()})
