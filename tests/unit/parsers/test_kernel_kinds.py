"""One table says what each kind of kernel trouble is called, in reports and in failure signatures."""

from __future__ import annotations

from buildbot_bsdkm.model import KernelEvent
from buildbot_bsdkm.parsers.kernel_shapes import KINDS, SHAPES
from buildbot_bsdkm.policy import kernel_health
from buildbot_bsdkm.triage.signature import event_signature


def test_every_kind_a_shape_makes_has_its_words() -> None:
    assert {s.kind for s in SHAPES} <= set(KINDS)
    assert set(kernel_health.GROUPS) <= set(KINDS)


def test_reports_and_signatures_read_the_one_table() -> None:
    """Two copies of the table had drifted: reports said "kernel panic", signatures "panic"."""
    for kind, words in KINDS.items():
        ev = KernelEvent(kind, "", function="f")
        assert kernel_health.describe(ev).startswith(words.label + ": ")
        assert event_signature(ev) == f"{words.head} | f"


def test_signatures_keep_their_recorded_words_where_reports_say_more() -> None:
    """Base outcomes and known-issue patterns (``panic: *``) hold the signature words, so only the
    reports' labels say "kernel": those two kinds are the table's only differing pair."""
    differ = {kind: (w.label, w.head) for kind, w in KINDS.items() if w.label != w.head}
    assert differ == {"panic": ("kernel panic", "panic"), "warning": ("kernel WARNING", "WARNING")}
