"""What a PR comment asks for: a retest (all or some variants), an approval, or nothing.

Pure functions, shared by the Buildbot hook and the GitHub Action.

Compatible with what wolfSSL maintainers type to Jenkins today (``retest this please``,
``test this please``, any case and spacing), with two fixes: a phrase must be a line of its
own (so a sentence that merely mentions it, a ``> quoted`` line or a code block does not
trigger), and ``retest <variant> please`` rebuilds only the named variants. A commit may follow
either form (``retest this please 1a2b3c4``): the head the commenter reviewed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from ..contract import STATUS_CONTEXT_PREFIX, status_context

DEFAULT_RETEST_PHRASES: tuple[str, ...] = ("retest this please", "test this please")
DEFAULT_APPROVE_PHRASES: tuple[str, ...] = ("ok to test",)
_SELECTOR_PREFIX = STATUS_CONTEXT_PREFIX  # a selector names a status context, or its variant part
_TRAILING_PUNCTUATION = ".!,;:"
_SHA = re.compile(r"[0-9a-f]{7,40}")


class TriggerKind(StrEnum):
    RETEST = "retest"
    APPROVE = "approve"


@dataclass(frozen=True)
class Selector:
    """One ``retest`` target: a variant on every target, or one (target, variant) builder."""

    variant: str
    target: str | None = None

    def matches(self, target: str, variant: str) -> bool:
        return self.variant == variant and (self.target is None or self.target == target)

    def __str__(self) -> str:
        return status_context(self.target, self.variant) if self.target else _SELECTOR_PREFIX + self.variant


@dataclass(frozen=True)
class Trigger:
    kind: TriggerKind
    # Empty: every variant. Otherwise only builders matching one of these.
    selectors: tuple[Selector, ...] = ()
    # Names typed that are no known variant/target (reported back, never built).
    unknown: tuple[str, ...] = ()
    line: str = ""
    # ``ok to test 1a2b3c4`` or ``retest this please 1a2b3c4``: the commit reviewed (a prefix of
    # 7-40 hex digits).
    sha: str | None = None

    @property
    def everything(self) -> bool:
        return not self.selectors


@dataclass(frozen=True)
class TriggerConfig:
    retest_phrases: tuple[str, ...] = DEFAULT_RETEST_PHRASES
    approve_phrases: tuple[str, ...] = DEFAULT_APPROVE_PHRASES
    # Verbs accepted in the per-variant form ``<verb> <selector>[, <selector>...] please``.
    variant_verbs: tuple[str, ...] = ("retest", "test")
    known_variants: frozenset[str] = field(default_factory=frozenset)  # empty: accept any name
    known_targets: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        for phrase in (*self.retest_phrases, *self.approve_phrases):
            if not normalise_line(phrase):
                raise ValueError(f"empty trigger phrase {phrase!r}")


def normalise_line(line: str) -> str:
    """Lower case, single spaces, no surrounding punctuation: how phrases are compared."""
    text = " ".join(line.lower().split())
    return text.strip().rstrip(_TRAILING_PUNCTUATION).strip()


def _candidate_lines(body: str) -> Iterable[str]:
    """Lines a human typed as a command: not quoted, not inside a fenced code block."""
    in_fence = False
    for raw in body.splitlines():
        stripped = raw.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or stripped.startswith(">"):
            continue
        # Inline code around the whole command is how some people type it: `retest this please`.
        yield normalise_line(stripped.strip("`*_ "))


def _variant_form(config: TriggerConfig) -> re.Pattern[str]:
    verbs = "|".join(re.escape(normalise_line(v)) for v in config.variant_verbs)
    return re.compile(rf"(?:{verbs}) (?P<names>[a-z0-9_./, -]+?) please")


def _parse_selector(name: str, config: TriggerConfig) -> Selector | None:
    parts = name.removeprefix(_SELECTOR_PREFIX).split("/")
    if len(parts) == 1:
        variant, target = parts[0], None
    elif len(parts) == 2:
        target, variant = parts
    else:
        return None
    if not variant or (config.known_variants and variant not in config.known_variants):
        return None
    if target is not None and config.known_targets and target not in config.known_targets:
        return None
    return Selector(variant=variant, target=target)


def _parse_variant_form(line: str, config: TriggerConfig) -> Trigger | None:
    match = _variant_form(config).fullmatch(line)
    if match is None:
        return None
    names = [n for n in re.split(r"[,\s]+", match.group("names")) if n and n != "and"]
    if not names or names == ["this"]:
        return None
    selectors: list[Selector] = []
    unknown: list[str] = []
    for name in names:
        selector = _parse_selector(name, config)
        if selector is None:
            unknown.append(name)
        elif selector not in selectors:
            selectors.append(selector)
    if not selectors and not unknown:
        return None
    return Trigger(TriggerKind.RETEST, tuple(selectors), tuple(unknown), line)


def parse_comment(body: str, config: TriggerConfig | None = None) -> Trigger | None:
    """The first command in a comment, or None when it asks for nothing."""
    config = config or TriggerConfig()
    retest = {normalise_line(p) for p in config.retest_phrases}
    approve = {normalise_line(p) for p in config.approve_phrases}
    for line in _candidate_lines(body or ""):
        if not line:
            continue
        if line in approve:
            return Trigger(TriggerKind.APPROVE, line=line)
        phrase, _, last = line.rpartition(" ")
        if phrase in approve and _SHA.fullmatch(last):
            return Trigger(TriggerKind.APPROVE, line=line, sha=last)
        found = _retest(line, retest, config)
        if found is None and _SHA.fullmatch(last):
            found = _retest(phrase, retest, config)
            found = None if found is None else dataclasses.replace(found, line=line, sha=last)
        if found is not None:
            return found
    return None


def _retest(line: str, phrases: set[str], config: TriggerConfig) -> Trigger | None:
    if line in phrases:
        return Trigger(TriggerKind.RETEST, line=line)
    return _parse_variant_form(line, config)


def selected_builders(trigger: Trigger, builders: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (target, variant) builders a trigger asks for, in the given order."""
    return [b for b in builders if trigger.everything or any(s.matches(*b) for s in trigger.selectors)]
