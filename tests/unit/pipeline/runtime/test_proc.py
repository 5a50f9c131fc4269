"""One process runner (pipeline/runtime/proc.py) and the Linux module build's failures through classify.

A configure/make that outlives its limit is infrastructure (classify and
docs/architecture.md say so), and the config's retry patterns apply to the Linux module build too.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.proc import run_captured, run_logged, run_watched
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.retry.classify_failure import Patterns


def _tree(tmp_path: Path, configure: str) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    script = src / "configure"
    script.write_text("#!/bin/sh\n" + configure + "\n")
    script.chmod(0o755)
    return src


@pytest.fixture
def no_headers_needed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(linuxkm, "linux_source_dir", lambda version=None: tmp_path)


def test_linux_configure_timeout_is_infrastructure(tmp_path: Path, no_headers_needed: None) -> None:
    src = _tree(tmp_path, "sleep 30")
    started = time.monotonic()
    with pytest.raises(StageError) as err:
        linuxkm.build_linux_module(src, tmp_path / "b", linuxkm.LinuxModuleSpec(), timeout_s=1)
    failure = err.value.failure
    assert time.monotonic() - started < 20  # the whole group was killed, not waited for
    assert failure.category is FailureCategory.INFRASTRUCTURE
    assert (failure.stage, failure.reason) == ("configure", "timeout")
    assert failure.message == "configure timed out after 1 s"


def test_linux_build_output_never_matches_the_configs_infra_patterns(tmp_path: Path,
                                                                     no_headers_needed: None) -> None:
    # configure is the PR's to change: what it prints cannot make its own failure "infrastructure".
    src = _tree(tmp_path, "echo 'mirror hiccup BSDKM-FLAKY' >&2; exit 1")
    patterns = Patterns.with_extra(infra=[r"BSDKM-FLAKY"], real=[r"BSDKM-BROKEN"])
    with pytest.raises(StageError) as err:
        linuxkm.build_linux_module(src, tmp_path / "b", linuxkm.LinuxModuleSpec(), patterns=patterns)
    assert err.value.failure.category is FailureCategory.REAL
    assert err.value.failure.reason == "configure"


def test_linux_configure_error_stays_real_and_names_the_line(tmp_path: Path, no_headers_needed: None) -> None:
    src = _tree(tmp_path, "echo 'checking... yes'; echo 'configure: error: no kernel headers' >&2; exit 1")
    with pytest.raises(StageError) as err:
        linuxkm.build_linux_module(src, tmp_path / "b", linuxkm.LinuxModuleSpec())
    failure = err.value.failure
    assert failure.category is FailureCategory.REAL and failure.reason == "configure"
    assert failure.message == "configure failed: configure: error: no kernel headers"


def test_run_logged_kills_the_group(tmp_path: Path) -> None:
    log = tmp_path / "log"
    res = run_logged(["/bin/sh", "-c", "sleep 60 & sleep 60"], cwd=tmp_path, log=log, timeout_s=1)
    assert res.timed_out and res.exit_code is None
    assert "killed after 1 s time limit" in log.read_text()


def test_run_captured_keeps_output_of_a_killed_program(tmp_path: Path) -> None:
    res = run_captured(["/bin/sh", "-c", "echo said; echo err >&2; exec sleep 60"], timeout_s=1)
    assert res.exit_code is None and res.stdout == b"said\n" and res.stderr == b"err\n"
    assert run_captured(["/bin/sh", "-c", "exit 3"], timeout_s=10).exit_code == 3


def test_run_watched_stops_on_what_the_output_says(tmp_path: Path) -> None:
    log = tmp_path / "console"
    res = run_watched(["/bin/sh", "-c", "echo booting; echo 'mountroot>'; exec sleep 60"], log=log,
                      timeout_s=30, stop=lambda text: "mountroot" if "mountroot>" in text else None,
                      poll_s=0.1)
    assert res.stopped == "mountroot" and not res.timed_out and res.seconds < 20
    res = run_watched(["/bin/sh", "-c", "exec sleep 60"], log=log, timeout_s=1, poll_s=0.1)
    assert res.timed_out and res.stopped is None
    assert run_watched(["/bin/sh", "-c", "exit 4"], log=log, timeout_s=10).exit_code == 4
