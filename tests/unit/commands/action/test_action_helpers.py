"""Workflow-command and output-file formatting, checked by reading it back the runner's way."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from buildbot_bsdkm.commands.action.workflow import (
    ActionsError,
    Annotation,
    Level,
    append_step_summary,
    cap_annotations,
    output_block,
    read_outputs,
    summary_text,
    write_outputs,
)


def runner_parse(line: str) -> tuple[str, dict[str, str], str]:
    """How the Actions runner (ActionCommand.TryParseV2) reads a ``::cmd props::data`` line."""
    assert line.startswith("::")
    end = line.index("::", 2)
    head, data = line[2:end], line[end + 2 :]
    name, _, props_text = head.partition(" ")
    props: dict[str, str] = {}
    for pair in filter(None, props_text.split(",")):
        key, _, value = pair.partition("=")
        props[key] = unescape_property(value)
    return name, props, unescape_data(data)


def unescape_data(s: str) -> str:
    return s.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def unescape_property(s: str) -> str:
    s = s.replace("%0D", "\r").replace("%0A", "\n")
    return s.replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def test_annotation_with_title_and_location() -> None:
    a = Annotation(Level.ERROR, "PWDBASED failed: code -125", title="Self-test PWDBASED", file="x.c", line=7)
    assert a.command() == "::error title=Self-test PWDBASED,file=x.c,line=7::PWDBASED failed: code -125"


def test_characters_that_would_break_the_command_are_escaped() -> None:
    a = Annotation(Level.WARNING, "50%\nnext: line", title="AES-128-GCM-enc: 1,234 MiB/s")
    line = a.command()
    assert "\n" not in line
    assert line == "::warning title=AES-128-GCM-enc%3A 1%2C234 MiB/s::50%25%0Anext: line"


@given(st.text(), st.text(min_size=1))
def test_any_message_and_title_survive_the_runner(message: str, title: str) -> None:
    name, props, data = runner_parse(Annotation(Level.ERROR, message, title=title).command())
    assert (name, props["title"], data) == ("error", title, message)


def test_cap_keeps_ten_per_level_and_reports_the_rest() -> None:
    many = [Annotation(Level.ERROR, f"e{i}") for i in range(13)] + [Annotation(Level.WARNING, "w")]
    capped = cap_annotations(many)
    assert [a.message for a in capped.shown] == [f"e{i}" for i in range(10)] + ["w"]
    assert capped.dropped == {Level.ERROR: 3}
    assert capped.commands()[-1].endswith("::3 more error annotation(s) not shown; see the job summary")


@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,20}", fullmatch=True), st.text()))
def test_outputs_read_back_exactly(outputs: dict[str, str]) -> None:
    text = "".join(output_block(k, v) for k, v in outputs.items())
    assert read_outputs(text) == outputs


def test_value_containing_a_delimiter_like_line_cannot_end_the_block() -> None:
    value = "a\nghadelimiter_0000\nEOF\nverdict=pass"
    assert read_outputs(output_block("report", value)) == {"report": value}


@pytest.mark.parametrize("bad", ["", "1abc", "has space", "a=b", "x<<y"])
def test_bad_output_name_is_refused_with_its_name(bad: str) -> None:
    with pytest.raises(ActionsError, match="invalid output name"):
        output_block(bad, "v")


def test_write_outputs_appends(tmp_path: Path) -> None:
    f = tmp_path / "out"
    f.write_text("earlier=1\n")
    write_outputs(f, {"verdict": "fail", "failed-tests": "1"})
    assert read_outputs(f.read_text()) == {"earlier": "1", "verdict": "fail", "failed-tests": "1"}


def test_unwritable_output_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ActionsError, match=r"cannot write GITHUB_OUTPUT file .*missing/out"):
        write_outputs(tmp_path / "missing" / "out", {"verdict": "pass"})


def test_unterminated_heredoc_is_reported() -> None:
    with pytest.raises(ActionsError, match="no closing delimiter"):
        read_outputs("report<<EOF\nhalf\n")


def test_oversized_summary_is_cut_at_a_line_with_a_note(tmp_path: Path) -> None:
    md = "".join(f"| row {i} | é |\n" for i in range(100_000))
    text = summary_text(md, limit=10_000)
    assert len(text.encode()) < 10_200
    body, note = text.split("\n\n_Summary truncated")
    rows = body.rstrip("\n").split("\n")
    assert all(row.startswith("| row ") and row.endswith(" | é |") for row in rows)
    assert "1 MiB" in note
    path = tmp_path / "summary.md"
    append_step_summary(path, "# one\n")
    append_step_summary(path, "# two")
    assert path.read_text() == "# one\n# two\n"
