"""The command line's structure: no subcommand imports its caller, each input is read
once per run, and the Action's wrapped commands run through the one process runner.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest

from buildbot_bsdkm.commands.action import results
from buildbot_bsdkm.config.bsdkm_yml import default_config_path, parse_config
from buildbot_bsdkm.model import to_json
from buildbot_bsdkm.pipeline import gating as report_out
from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix
from buildbot_bsdkm.pipeline.runtime.proc import run_streamed

PACKAGE = Path(__file__).resolve().parents[2] / "buildbot_bsdkm"


def _imported(path: Path) -> set[str]:
    """Modules ``path`` imports anywhere in it (inside functions too), relative names resolved."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            found |= {target, *(f"{target}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_no_subcommand_imports_the_cli_above_it() -> None:
    upward = {str(p.relative_to(PACKAGE)): sorted(m for m in _imported(p) if m == "buildbot_bsdkm.cli")
              for p in (PACKAGE / "commands").rglob("*.py")}
    assert {k: v for k, v in upward.items() if v} == {}


def test_the_action_is_a_package_of_one_job_a_module() -> None:
    assert not (PACKAGE / "commands" / "action_cmd.py").exists()
    for path in (PACKAGE / "commands" / "action").glob("*.py"):
        assert len(path.read_text().splitlines()) < 450, path


def test_action_gate_reads_the_config_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = results.load_config
    monkeypatch.setattr(results, "load_config", lambda p: calls.append(p) or real(p))
    (tmp_path / "summary.json").write_text(to_json([]))  # no stored verdict: judged here
    outcome = results.load_outcome(results.ResultsRequest(out=tmp_path, config=default_config_path()))
    assert calls == [default_config_path()]  # policy and baseline both come from that one read
    assert outcome.report_path == tmp_path / "report.md" and outcome.report_path.is_file()


def test_run_reads_policy_and_baseline_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []
    policy, baseline = report_out.load_policy, report_out.load_baseline
    monkeypatch.setattr(report_out, "load_policy",
                        lambda p, **kw: read.append("policy") or policy(p, **kw))
    monkeypatch.setattr(report_out, "load_baseline", lambda p: read.append("baseline") or baseline(p))
    (tmp_path / "src").mkdir()  # not a wolfSSL tree: the fetch fails at once, the gate still runs
    (tmp_path / "baseline.json").write_text(to_json([]))
    config = parse_config(f"""\
source: {{local: {tmp_path / 'src'}}}
targets: {{userspace: {{flags: [--enable-cryptonly]}}}}
variants: {{noasm: {{flags: [--disable-asm], targets: [userspace]}}}}
policy: {PACKAGE.parent / 'policies' / 'default.yml'}
baseline: {tmp_path / 'baseline.json'}
""", str(tmp_path / "bsdkm.yml"), tmp_path)
    result = run_matrix(config, None, None, tmp_path / "out", progress=lambda _: None)
    assert result.runs[0].failure is not None and result.runs[0].failure.stage == "fetch"
    assert read == ["policy", "baseline"]


def test_run_streamed_hands_over_lines_and_kills_the_whole_group_at_the_limit() -> None:
    lines: list[str] = []
    started = time.monotonic()
    # The background sleep keeps the output pipe open: only killing the group ends the read.
    result = run_streamed(["sh", "-c", "echo one; echo two >&2; sleep 30 & wait"], timeout_s=1.0,
                          on_line=lines.append)
    assert time.monotonic() - started < 15
    assert lines == ["one\n", "two\n"]
    assert result.timed_out and result.exit_code is None


def test_run_streamed_reports_the_exit_status_and_refuses_a_missing_program() -> None:
    result = run_streamed(["sh", "-c", "echo done; exit 3"], timeout_s=None, on_line=lambda _: None)
    assert (result.exit_code, result.timed_out) == (3, False)
    with pytest.raises(OSError):
        run_streamed(["/nonexistent/program"], timeout_s=5, on_line=lambda _: None)
