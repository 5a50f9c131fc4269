"""For real: wolfSSL 5.9.2 (Debian sid) as the candidate against 5.7.2 (Debian trixie), userspace,
one variant pair (intelasm, noasm), short benchmark, two interleaved repeats per side -- run by
the example workflow ``action/examples/bsdkm-release.yml``'s Linux job through the local Actions
harness of ``test_action_local.py``, so the one real run checks both the workflow and the report.

Downloads come from Debian's archive once and are cached (~/.cache/bsdkm-ci); release builds are
kept under the cache's ``release/`` (a rerun reuses them; their warnings and build time are kept
beside them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_action_local import ROOT, VENV_BIN, LocalRunner, StepResult

from buildbot_bsdkm.model import from_json

WORKFLOW = ROOT / "action" / "examples" / "bsdkm-release.yml"

CONFIG = """\
targets:
  userspace:
    flags: [--enable-cryptonly, --enable-crypttests, --enable-all-crypto]
variants:
  intelasm:
    flags: [--enable-aesni, --enable-intelasm, --enable-sp-asm, --disable-ecc]
    targets: [userspace]
  noasm:
    flags: [--disable-asm, --disable-ecc]
    targets: [userspace]
benchmark:
  min_runtime_s: 0.01
  embedded: true
  ntimes: 1
  agreetimes: 1
  userspace_args: [-aes-gcm, -aes-cbc, -sha256]
release:
  repeats: 2
  software_variant: noasm
jobs: 2
parallel: 2
policy: release-policy.yml
"""

# A limit nothing measured can cross: a 10 ms benchmark window on a loaded 2-core machine can lose
# 99 % of an item to descheduling. The comparison is still made and reported; the test checks the
# report, not the release.
POLICY = """\
version: 1
selftests: true
complete: true
regressions:
  - {pattern: "*", max_pct: 100}
"""


class WorkflowJob(LocalRunner):
    """One job of a workflow file, run step by step like the composite action in LocalRunner."""

    def __init__(self, workflow: Path, job: str, inputs: dict[str, str], workspace: Path, temp: Path) -> None:
        doc = yaml.safe_load(workflow.read_text())
        self.job = doc["jobs"][job]
        self.workflow_env = {k: str(v) for k, v in (doc.get("env") or {}).items()}
        self.meta = {"runs": {"steps": self.job["steps"]}, "outputs": {}}
        self.action_dir = workflow.parent
        self.bin_dir = VENV_BIN  # first on PATH: bsdkm-ci is this checkout's
        self.workspace, self.temp = workspace, temp
        self.summary = temp / "step_summary.md"
        self.summary.touch()
        self.github = {"workspace": str(workspace), "server_url": "https://github.com",
                       "repository": "wolfSSL/wolfssl", "event_name": "workflow_dispatch"}
        self.runner = {"os": "Linux", "temp": str(temp)}
        self.steps: dict[str, StepResult] = {}
        self.results: list[StepResult] = []
        self.failed = False
        self.inputs = {name: str(spec.get("default", ""))
                       for name, spec in doc[True]["workflow_dispatch"]["inputs"].items()}
        self.inputs.update(inputs)

    def run_script(self, sid: str, name: str, step: dict[str, Any]) -> StepResult:
        env = {**self.workflow_env, **(step.get("env") or {})}
        return super().run_script(sid, name, {**step, "shell": "bash", "env": env})


@pytest.fixture(scope="module")
def release_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkflowJob]:
    root = tmp_path_factory.mktemp("release")
    workspace = root / "checkout"
    (workspace / ".github").mkdir(parents=True)
    (workspace / ".github" / "bsdkm.yml").write_text(CONFIG)
    (workspace / ".github" / "release-policy.yml").write_text(POLICY)
    (root / "temp").mkdir()
    job = WorkflowJob(WORKFLOW, "linux", {"candidate": "debian:sid/5.9.2", "previous": "debian:trixie/5.7.2"},
                      workspace, root / "temp")
    job.run()
    yield job


@pytest.mark.slow
def test_workflow_steps_that_ran_and_those_left_to_github(release_job: WorkflowJob) -> None:
    ran = [(r.name, r.outcome) for r in release_job.results]
    assert ran == [
        ("__0", "not-run-here"),  # actions/checkout
        ("__1", "not-run-here"),  # actions/setup-python
        ("Install bsdkm-ci", "success"),  # bsdkm-ci is on PATH here: nothing installed
        ("Sources", "success"),
        ("Candidate against previous", "success"),
        ("Job summary", "success"),
        ("Upload the release report", "not-run-here"),
        ("Verdict", "success"),
    ], [(r.name, r.outcome, r.stdout[-1500:], r.stderr[-3000:]) for r in release_job.results]
    assert release_job.step("release").outputs == {"exit-code": "0"}
    out = release_job.workspace / "bsdkm-release"
    assert release_job.summary.read_text() == (out / "release.md").read_text()


@pytest.mark.slow
def test_real_report_compares_592_with_572(release_job: WorkflowJob) -> None:
    out = release_job.workspace / "bsdkm-release"
    doc = json.loads((out / "release.json").read_text())
    assert doc["sources"]["candidate"]["tree"]["version"] == "5.9.2"
    assert doc["sources"]["previous"]["tree"]["version"] == "5.7.2"
    assert doc["repeats"] == 2 and doc["verdict"]["passed"]
    rows = {r["label"]: r for r in doc["matrix"]}
    assert set(rows) == {"userspace/intelasm", "userspace/noasm"}
    for row in rows.values():
        assert (row["candidate"], row["previous"]) == ("ok", "ok")
        # Self-test algorithm lists of both releases, compared (5.9.2 tests more than 5.7.2).
        assert set(row["selftests"]) == {"added", "removed", "newly_failing", "fixed"}
        assert row["selftests"]["newly_failing"] == []
        assert row["candidate_build"]["build_s"] > 0 and row["previous_build"]["build_s"] > 0
        assert row["warnings"]["candidate"] >= 0 and "new" in row["warnings"]
    changes = {(c["item"], c["name"]) for c in doc["changes"]}
    assert {("userspace/noasm", "AES-128-GCM-enc"), ("userspace/intelasm", "SHA-256")} <= changes
    speed = {(s["variant"], s["name"]): s for s in doc["speedups"]}
    gcm = speed[("intelasm", "AES-128-GCM-enc")]
    assert gcm["previous"] > 1 and gcm["candidate"] > 1  # AES-NI against C, then and now
    html = (out / "release.html").read_text()
    assert html.count("<svg") == 2 and "Per-item change" in html and "then and now" in html
    md = (out / "release.md").read_text()
    assert "| userspace/noasm | run | ok | ok |" in md and "### Speedups against noasm" in md
    # The candidate's medians are the new baseline of the 5.9 line, in the results format.
    baseline = from_json((out / "baseline-5.9.json").read_text())
    assert sorted(r.variant for r in baseline) == ["intelasm", "noasm"]
    assert all(r.metadata["wolfssl_version"] == "5.9.2" for r in baseline)
