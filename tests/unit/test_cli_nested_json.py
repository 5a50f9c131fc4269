"""A JSON document nested deeper than any results document is refused by name (exit 2), whichever
command reads it: no RecursionError traceback from Python's decoder."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.model import RunResult, to_json

DEPTH = 200_000


def _deep(path: Path) -> Path:
    path.write_text('{"runs": ' + "[" * DEPTH + "]" * DEPTH + "}")
    return path


def _head(tmp_path: Path) -> Path:
    path = tmp_path / "head.json"
    path.write_text(to_json([RunResult("noasm", "userspace")]))
    return path


@pytest.mark.parametrize("command", ["signature", "junit-base"])
def test_deeply_nested_json_exits_2_with_the_reason(tmp_path: Path, capsys, command: str) -> None:
    deep = _deep(tmp_path / "deep.json")
    if command == "signature":
        args = ["signature", str(deep)]
    else:
        args = ["junit", str(_head(tmp_path)), "-o", str(tmp_path / "j.xml"), "--base-results", str(deep)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "deep.json" in err and "nested deeper than 64 levels" in err, err
    assert "RecursionError" not in err and "Traceback" not in err
