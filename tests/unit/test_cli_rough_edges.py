"""What a newcomer meets first on the command line: output piped into ``head``, a mistyped file name."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from conftest import fixture_text

CLI = [sys.executable, "-m", "buildbot_bsdkm.cli"]


def test_a_reader_that_goes_away_ends_the_output_without_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    log.write_text(fixture_text("userspace/noasm/bench_default.txt"), encoding="utf-8")
    # Four copies of the log: far more JSON than a pipe holds, so the writer is still writing when
    # the reader leaves, whatever the machine's speed.
    proc = subprocess.Popen([*CLI, "parse", str(log), str(log), str(log), str(log), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # what `| head -1` does once it has its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE
    assert err == "", err


def test_a_missing_config_file_is_named_plainly(tmp_path: Path) -> None:
    done = subprocess.run([*CLI, "run", "--config", "nosuch.yml", "--out", "out"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "bsdkm-ci run: bad config: nosuch.yml: no such file"
