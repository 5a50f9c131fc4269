"""Failure reasons are one set of words (``contract.FailureReason``): every module spells them from it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from buildbot_bsdkm.contract import TARGET_UNAVAILABLE, FailureReason
from buildbot_bsdkm.model import FailureCategory, StageFailure
from buildbot_bsdkm.retry.decision import Attempt

PACKAGE = Path(__file__).resolve().parents[2] / "buildbot_bsdkm"
# Calls that take a failure reason, and where: (positional index, keyword).
REASON_ARGS = {"infra_error": 1, "real_error": 1, "StageFailure": 3}


def _reason_literals() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in REASON_ARGS:
                continue
            args = [a for a in node.args[REASON_ARGS[name]:REASON_ARGS[name] + 1]]
            args += [k.value for k in node.keywords if k.arg == "reason"]
            found += [(str(path.relative_to(PACKAGE)), node.lineno, a.value) for a in args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return found


def test_every_reason_the_package_spells_out_is_one_of_the_words() -> None:
    """The instruction counter's build said ``compile-error`` where every other build says ``compile``."""
    literals = _reason_literals()
    assert literals, "the scan found no reason at all: it no longer sees the calls"
    known = {r.value for r in FailureReason}
    assert [(where, line, word) for where, line, word in literals if word not in known] == []


def test_a_module_that_imports_a_reason_constant_uses_it() -> None:
    """The FreeBSD QEMU target imported TARGET_UNAVAILABLE and still spelled out its word once."""
    spelled = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names}
        if "TARGET_UNAVAILABLE" not in imported:
            continue
        spelled += [(str(path.relative_to(PACKAGE)), n.lineno) for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and n.value == TARGET_UNAVAILABLE.value]
    assert spelled == []


def test_a_failure_record_holds_a_reason_of_the_set() -> None:
    f = StageFailure("build", "compile failed: x.c:1: error: y", FailureCategory.REAL, "compile")
    assert f.reason is FailureReason.COMPILE
    assert f.to_dict()["reason"] == "compile" and type(f.to_dict()["reason"]) is str
    assert StageFailure.from_dict(f.to_dict()) == f
    with pytest.raises(ValueError, match="unknown failure reason 'kernel-trouble'"):
        StageFailure("load", "m", FailureCategory.REAL, "kernel-trouble")
    with pytest.raises(ValueError, match="unknown failure reason"):
        StageFailure.from_dict({"stage": "load", "message": "m", "reason": "kernel-trouble"})


def test_records_written_with_the_old_word_read_back_as_compile() -> None:
    old = {"stage": "build", "message": "the changed source did not build", "category": "real",
           "reason": "compile-error", "evidence": []}
    assert StageFailure.from_dict(old).reason is FailureReason.COMPILE


def test_an_attempt_record_keeps_the_reason_word() -> None:
    failure = StageFailure("load", "module load timed out after 600 s", FailureCategory.REAL, "load-timeout")
    attempt = Attempt.failing(1, "w1", failure)
    assert attempt.reason is FailureReason.LOAD_TIMEOUT
    assert attempt.to_dict()["reason"] == "load-timeout"
    assert Attempt.from_dict(attempt.to_dict()) == attempt


def test_a_stage_is_a_reason_of_its_own() -> None:
    assert FailureReason.of_stage("unload") is FailureReason.UNLOAD
    assert FailureReason.of_stage("no-such-stage") is FailureReason.UNKNOWN
