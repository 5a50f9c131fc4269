"""``bsdkm-ci action retry``: real processes, classified by the core's ``classify``.

Infrastructure failures (network, timeouts of a non-test stage) are retried up to the bound;
a real failure is never retried.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"

# Fails with a real curl/apt network message until it has run `$1` times, then succeeds.
FLAKY_NETWORK = (
    'n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; '
    'if [ $n -ge "$1" ]; then echo "Fetched 28078586 B"; exit 0; fi; '
    'echo "curl: (6) Could not resolve host: deb.debian.org" >&2; exit 6'
)


def retry(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), "action", "retry", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp)


def test_network_failure_is_retried_until_it_passes(tmp_path: Path) -> None:
    proc = retry(tmp_path, "--stage", "fetch", "--attempts", "3", "--delay", "0", "--record", "rec.json",
                 "--", "sh", "-c", FLAKY_NETWORK, "flaky", "3")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "count").read_text().strip() == "3"
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("::warning")]
    assert warnings == [
        "::warning title=bsdkm-ci%3A retrying fetch (attempt 2)::infrastructure failure (network) at fetch: "
        "retry 1 of 2",
        "::warning title=bsdkm-ci%3A retrying fetch (attempt 3)::infrastructure failure (network) at fetch: "
        "retry 2 of 2",
    ]
    record = json.loads((tmp_path / "rec.json").read_text())
    assert [(a["passed"], a["category"], a["reason"]) for a in record[0]["attempts"]] == [
        (False, "infrastructure", "network"), (False, "infrastructure", "network"), (True, None, None)]
    assert record[0]["summary"] == "passed after 2 infrastructure retries (network, network)"


def test_infrastructure_retries_are_bounded(tmp_path: Path) -> None:
    proc = retry(tmp_path, "--stage", "fetch", "--attempts", "2", "--delay", "0",
                 "--", "sh", "-c", FLAKY_NETWORK, "flaky", "99")
    assert proc.returncode == 6
    assert (tmp_path / "count").read_text().strip() == "2"
    assert proc.stdout.splitlines()[-1] == ("::error title=bsdkm-ci%3A fetch failed::infrastructure failure, "
                                            "gave up after 2 attempts (network, network)")


def test_real_failure_is_never_retried(tmp_path: Path) -> None:
    script = 'echo x >> count; echo "E: Unable to locate package qemu-system-x87"; exit 100'
    proc = retry(tmp_path, "--stage", "deps", "--attempts", "5", "--delay", "0", "--", "sh", "-c", script)
    assert proc.returncode == 100
    assert (tmp_path / "count").read_text() == "x\n"
    assert "retrying" not in proc.stdout


def test_compile_error_is_real_even_with_attempts_left(tmp_path: Path) -> None:
    src = tmp_path / "broken.c"
    src.write_text("int main(void) { return undefined_symbol; }\n")
    proc = retry(tmp_path, "--stage", "build", "--attempts", "3", "--delay", "0", "--", "cc", "-c", str(src))
    assert proc.returncode != 0
    assert proc.stdout.count("::stop-commands::") == 1  # one attempt only
    assert "compile failed" in proc.stderr


def test_a_hung_build_times_out_and_counts_as_infrastructure(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = retry(tmp_path, "--stage", "build", "--attempts", "2", "--delay", "0", "--timeout", "0.5",
                 "--", "sh", "-c", "echo x >> count; exec sleep 30")
    assert time.monotonic() - started < 10
    assert proc.returncode == 124
    assert (tmp_path / "count").read_text() == "x\nx\n"
    assert "infrastructure failure (timeout) at build" in proc.stdout


def test_output_cannot_issue_workflow_commands(tmp_path: Path) -> None:
    script = "echo '::add-mask::oops'; echo '::error::fake'"
    proc = retry(tmp_path, "--stage", "fetch", "--", "sh", "-c", script)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0
    start, end = lines[0], lines[3]
    token = start.removeprefix("::stop-commands::")
    assert len(token) == 32 and end == f"::{token}::"
    assert lines[1:3] == ["::add-mask::oops", "::error::fake"]


def test_usage_errors_are_named(tmp_path: Path) -> None:
    proc = retry(tmp_path, "--stage", "fetch")
    assert proc.returncode == 2 and "no command given" in proc.stderr
    proc = retry(tmp_path, "--stage", "fetch", "--", "/no/such/program")
    assert proc.returncode == 2 and "cannot run '/no/such/program'" in proc.stderr
    proc = retry(tmp_path, "--stage", "fetch", "--attempts", "0", "--", "true")
    assert proc.returncode == 2 and "--attempts must be at least 1" in proc.stderr
    (tmp_path / "rec.json").write_text("{}")
    proc = retry(tmp_path, "--stage", "fetch", "--record", "rec.json", "--", "true")
    assert proc.returncode == 2 and "is not a JSON list" in proc.stderr
