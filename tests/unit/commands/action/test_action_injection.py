"""Artifact data printed by the privileged job's steps cannot become a workflow command.

The runner reads every line a step prints, on stdout and stderr alike, and acts on two forms
(actions/runner, ``src/Runner.Common/ActionCommand.cs``): ``::name props::data`` at the start
of a line (after leading blanks), and the legacy ``##[name props]data`` anywhere in a line; the
command runs when ``name`` is a registered one (``add-mask``, ``stop-commands``, ``warning``, ...).
``runner_commands`` below parses a step's output by those two rules, so a test sees what the
runner would run. A results artifact comes from the PR's own job: its ``not_run`` reason, its
names and the merge's notes are the PR author's text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from buildbot_bsdkm.model import RunResult, to_json

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
# The runner's command extensions and its own stop-commands (ActionCommandManager).
REGISTERED = {"set-env", "set-output", "save-state", "add-mask", "add-path", "add-matcher", "remove-matcher",
              "debug", "warning", "error", "notice", "group", "endgroup", "echo", "stop-commands"}
EVIL = ("no FreeBSD host\n::add-mask::hunter2\r::stop-commands::pause\n::warning::fake news"
        " ##[add-mask]hunter3 \u2028::set-output name=run::true")


def runner_commands(text: str) -> list[tuple[str, str]]:
    """(name, data) of every command the runner would take from ``text``, by its two rules."""
    found: list[tuple[str, str]] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        trimmed = line.lstrip()
        if trimmed.startswith("::") and trimmed.find("::", 2) > 0:
            end = trimmed.find("::", 2)
            name = trimmed[2:end].split(" ", 1)[0]
            if name in REGISTERED:
                found.append((name, trimmed[end + 2:]))
                continue
        start = line.find("##[")
        end = line.find("]", start) if start >= 0 else -1
        if end > 0 and line[start + 3:end].split(" ", 1)[0] in REGISTERED:
            found.append((line[start + 3:end].split(" ", 1)[0], line[end + 1:]))
    return found


def test_runner_commands_reads_both_forms() -> None:
    assert runner_commands("x\n  ::add-mask::s\nok ##[warning]w") == [("add-mask", "s"), ("warning", "w")]
    assert runner_commands("bsdkm-ci: ::add-mask::s") == []


def _results(tmp: Path) -> Path:
    out = tmp / "out"
    out.mkdir()
    (out / "summary.json").write_text(to_json([RunResult("noasm", "userspace", not_run=EVIL)]))
    return out


def _run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=env)


def _env(tmp: Path) -> dict[str, str]:
    (tmp / "github_output").touch()
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")},
            "GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp / "github_output"),
            "GITHUB_STEP_SUMMARY": str(tmp / "summary.md")}


def test_a_not_run_reason_from_the_artifact_runs_no_command(tmp_path: Path) -> None:
    out, env = _results(tmp_path), _env(tmp_path)
    for step in ("outputs", "gate"):
        proc = _run(step, "--out", out, env=env)
        assert proc.returncode in (0, 1), proc.stderr
        for stream in (proc.stdout, proc.stderr):
            names = [name for name, _ in runner_commands(stream)]
            # Only the annotations the step means to make, each one line with its data escaped.
            assert set(names) <= {"error", "warning", "notice"}, (step, stream)
            assert "hunter2" not in " ".join(d for n, d in runner_commands(stream) if n != "error"), stream
        assert "no FreeBSD host ::add-mask::hunter2" in proc.stdout + proc.stderr, (step, proc.stderr)


def test_a_merge_of_artifact_paths_runs_no_command(tmp_path: Path) -> None:
    """The artifact's own directory names reach the merge's notes and errors: still no command."""
    source = tmp_path / "bsdkm-results"
    for name in ("a\n::add-mask::hunter2", "b ##[stop-commands]pause"):
        (source / name).mkdir(parents=True)
        (source / name / "summary.json").write_text(to_json([RunResult("noasm", "userspace")]))
    proc = _run("merge", "--out", tmp_path / "merged", source, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert {n for n, _ in runner_commands(proc.stdout + "\n" + proc.stderr)} <= {"warning"}, proc.stdout
    (source / "c\n::add-mask::hunter4").mkdir()
    (source / "c\n::add-mask::hunter4" / "summary.json").write_text('{"schema": 9, "runs": []}')
    proc = _run("merge", "--out", tmp_path / "merged", source, env=_env(tmp_path))
    assert proc.returncode == 2
    assert runner_commands(proc.stderr) == [] and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_log_line() -> None:
    from buildbot_bsdkm.commands.action.workflow import log_line

    assert log_line("a\nb\r\n  c\u2028d\x00e") == "a b c d e"
    assert log_line("::add-mask::x") == ": :add-mask::x"
    assert log_line("x ##[add-mask]y") == "x # #[add-mask]y"
    assert runner_commands(log_line(EVIL)) == []
