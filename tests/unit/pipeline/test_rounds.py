"""Each round's order of an interleaved base/head measurement.

Strict base-first alternation can alias with a once-a-second stall of the machine and make one side
look consistently slower; a coin flip per round (``benchmark.round_order: shuffled``, the default)
gives neither side a fixed phase.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import ROOT, interleaved_rounds
from test_perf_stage_base import built

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, load_config, parse_config
from buildbot_bsdkm.pipeline import rounds
from buildbot_bsdkm.pipeline.job import Job
from buildbot_bsdkm.pipeline.jobs.pair import load_interleaved


def test_alternate_is_always_base_first() -> None:
    assert rounds.round_plan(4, "alternate") == [("base", "head")] * 4
    assert rounds.describe(rounds.round_plan(2, "alternate")) == "B H, B H"


def test_shuffled_draws_each_rounds_order_and_every_round_has_both_sides() -> None:
    plan = rounds.round_plan(40, "shuffled", random.Random(7))
    assert set(plan) == {("base", "head"), ("head", "base")}
    assert all(sorted(sides) == ["base", "head"] for sides in plan)


def test_an_unknown_order_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown round order 'abba'"):
        rounds.round_plan(3, "abba")


def test_the_config_names_the_order_and_refuses_another(tmp_path: Path) -> None:
    text = (ROOT / "bsdkm.yml").read_text()
    assert load_config(ROOT / "bsdkm.yml").benchmark.round_order == "shuffled"
    alt = text.replace("  round_order: shuffled", "  round_order: alternate", 1)
    assert alt != text
    assert parse_config(alt, "bsdkm.yml", tmp_path).benchmark.round_order == "alternate"
    bad = text.replace("  round_order: shuffled", "  round_order: abba", 1)
    with pytest.raises(ConfigError, match=r"benchmark.round_order: must be one of shuffled, alternate"):
        parse_config(bad, "bsdkm.yml", tmp_path)


def _pair(tmp_path: Path, config_text: str | None = None) -> tuple[Job, Job, Path]:
    out, order = tmp_path / "bsdkm-out", tmp_path / "order"
    built(out, "head", order)
    built(out / "base", "base", order)
    config = (parse_config(config_text, str(tmp_path / "bsdkm.yml"), tmp_path) if config_text
              else load_config(ROOT / "bsdkm.yml"))
    head, base = (Job(config, "userspace", "noasm", root, progress=lambda _: None)
                  for root in (out, out / "base"))
    return head, base, order


class _HeadFirst(random.Random):
    def random(self) -> float:
        return 0.9  # every coin flip: head first


def test_a_round_can_measure_the_head_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: every round ran the base first, whatever the machine's rhythm.
    monkeypatch.setattr(rounds, "_RNG", _HeadFirst())
    head, base, order = _pair(tmp_path)
    assert load_interleaved(head, base, 3) is None
    assert order.read_text().split() == ["head", "base"] * 3
    assert head.state["round_order"] == "H B, H B, H B"


def test_alternate_keeps_base_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rounds, "_RNG", _HeadFirst())
    text = (ROOT / "bsdkm.yml").read_text()
    text = text.replace("  round_order: shuffled", "  round_order: alternate", 1)
    text = text.replace("policy: policies/default.yml", f"policy: {ROOT / 'policies/default.yml'}")
    text = text.replace("  max_repeats: 15 ", "  max_repeats: 2 ")  # below min_repeats: it would add more
    head, base, order = _pair(tmp_path, text)
    assert load_interleaved(head, base, 2) is None
    assert interleaved_rounds(order.read_text().split(), 2) == "B H, B H" == head.state["round_order"]
