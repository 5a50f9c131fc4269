"""The FreeBSD path: crypto-register, then openssl speed through /dev/crypto vs software.

Runs kmod/freebsd/load.sh + offload.sh against the replay double (scenario
crypto-register-offload: constructed, OpenSSL 3.0's output shape), parses the two outputs
as paths of one run and gates them with a ``paths: true`` crossover rule.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from freebsd_double import FreeBSDDouble, make_offload_scenario
from freebsd_double.make_offload_scenario import OFFLOAD_SCENARIO

from buildbot_bsdkm.model import RunResult
from buildbot_bsdkm.pipeline.runtime.loading import read_status
from buildbot_bsdkm.pipeline.targets.freebsd_kmod.offload import offload_logs, registered_crid
from buildbot_bsdkm.policy import KIND_CROSSOVER, evaluate, parse_policy
from buildbot_bsdkm.report.offload_paths import KIND_OFFLOAD

KMOD = Path(__file__).resolve().parents[3] / "kmod" / "freebsd"
SH = shutil.which("dash") or "/bin/sh"
POLICY = """
crossovers:
  - pattern: "openssl:*"
    paths: true
    accelerated: devcrypto
    software: software
"""


def _run(double: FreeBSDDouble, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SH, str(KMOD / script), *args], env=double.env(), capture_output=True, text=True,
                          timeout=60)


def _boot(tmp_path: Path, scenario: str | dict) -> tuple[FreeBSDDouble, Path, Path]:
    double = (FreeBSDDouble.boot_doc(scenario, tmp_path / "kernel") if isinstance(scenario, dict)
              else FreeBSDDouble.boot_file(OFFLOAD_SCENARIO, tmp_path / "kernel"))
    ko = tmp_path / "libwolfssl.ko"
    ko.write_bytes(b"\x7fELF not really a module")
    return double, ko, tmp_path / "logs"


def test_scenario_file_is_what_the_generator_builds() -> None:
    """The openssl side is the generator's; the kernel side follows crypto-register (which may move)."""
    committed = json.loads(OFFLOAD_SCENARIO.read_text())
    built = make_offload_scenario.build()
    assert committed["openssl"] == built["openssl"] and committed["name"] == built["name"]
    assert any("driver loaded: 1" in line for line in committed["kldload"]["kernel_log"])


def test_offload_never_wins_through_cryptodev(tmp_path: Path) -> None:
    double, ko, logs = _boot(tmp_path, "crypto-register-offload")
    assert _run(double, "load.sh", str(ko), "5", str(logs)).returncode == 0
    r = _run(double, "offload.sh", str(logs))
    assert r.returncode == 0, r.stderr
    status = read_status(logs / "offload.status")
    assert (status["crid"], status["framework_driver_id"], status["driver"]) == ("1", "1", "libwolf0")
    assert (status["engine"], status["result"], status["alg"]) == ("devcrypto", "measured", "aes-128-cbc")
    assert "kern.crypto.allow_soft: 0" in (logs / "sysctl.kern.crypto.txt").read_text()
    # -elapsed always; the engine run only after DUMP_INFO named wolfSSL's driver
    openssl = [c for c in double.calls() if c[:1] == ["openssl"] and c[1:2] != ["version"]]
    assert [c[1] for c in openssl] == ["engine", "speed", "speed"]
    speeds = openssl[1:]
    assert [c[c.index("-engine") + 1] if "-engine" in c else None for c in speeds] == ["devcrypto", None]
    assert all("-elapsed" in c and "aes-128-cbc" in c for c in speeds)
    assert registered_crid(logs / "load.kernel.log") == 1

    run = RunResult(variant="crypto-register", target="freebsd-kmod", logs=offload_logs(logs))
    assert all(log.complete for log in run.logs)
    assert {log.metadata["offload_driver"] for log in run.logs} == {"libwolf0"}
    names = {b.name for b in run.benchmarks}
    assert "openssl:devcrypto:AES-128-CBC@16" in names and "openssl:software:AES-128-CBC@8192" in names
    verdict = evaluate([run], parse_policy(POLICY))
    (cross,) = [c for c in verdict.checks if c.kind == KIND_CROSSOVER]
    assert cross.passed and cross.detail["crossover"] == "never"
    # as the scenario states it: 57x slower at 16 bytes, still slower at 8 KiB
    rates = {b.name: b.per_second for b in run.benchmarks}
    assert round(rates["openssl:software:AES-128-CBC@16"] / rates["openssl:devcrypto:AES-128-CBC@16"]) == 57
    assert cross.detail["ratios"]["8192"] < 1
    (crid,) = [c for c in verdict.checks if c.kind == KIND_OFFLOAD]
    assert crid.passed and crid.detail["crid"] == "1" and "libwolf0" in crid.message


def test_required_crossover_fails_when_offload_never_wins(tmp_path: Path) -> None:
    double, ko, logs = _boot(tmp_path, "crypto-register-offload")
    _run(double, "load.sh", str(ko), "5", str(logs))
    _run(double, "offload.sh", str(logs))
    run = RunResult(variant="crypto-register", target="freebsd-kmod", logs=offload_logs(logs))
    policy = parse_policy(POLICY + "    max_block: 8192\n")
    verdict = evaluate([run], policy)
    (cross,) = [c for c in verdict.checks if c.kind == KIND_CROSSOVER]
    assert not cross.passed and "at or below 8192 bytes" in cross.message


def test_offload_wins_from_a_block_size(tmp_path: Path) -> None:
    doc = json.loads(OFFLOAD_SCENARIO.read_text())
    faster = (3725.36, 14501.22, 1300000.0, 2100000.0, 2600000.0, 2700000.0)  # wins from 256 bytes
    out, err = make_offload_scenario.speed_output("aes-128-cbc", faster, "devcrypto")
    doc["openssl"]["engine"] = {"stdout": out, "stderr": err, "exit": 0}
    double, ko, logs = _boot(tmp_path, doc)
    _run(double, "load.sh", str(ko), "5", str(logs))
    assert _run(double, "offload.sh", str(logs)).returncode == 0
    run = RunResult(variant="crypto-register", target="freebsd-kmod", logs=offload_logs(logs))
    verdict = evaluate([run], parse_policy(POLICY + "    max_block: 1024\n"))
    (cross,) = [c for c in verdict.checks if c.kind == KIND_CROSSOVER]
    assert cross.passed and cross.detail["crossover"] == 256


def test_no_crid_means_nothing_measured(tmp_path: Path) -> None:
    doc = json.loads(OFFLOAD_SCENARIO.read_text())
    kept = [line for line in doc["kldload"]["kernel_log"] if "driver loaded" not in line]
    doc["kldload"]["kernel_log"] = kept
    double, ko, logs = _boot(tmp_path, doc)
    _run(double, "load.sh", str(ko), "5", str(logs))
    r = _run(double, "offload.sh", str(logs))
    assert r.returncode == 4 and "did not register" in r.stderr
    assert not [c for c in double.calls() if c[:1] == ["openssl"] and "speed" in c]
    run = RunResult(variant="crypto-register", target="freebsd-kmod", logs=offload_logs(logs))
    assert all(not log.complete and "missing" in (log.incomplete_reason or "") for log in run.logs)


def test_engine_needs_the_module(tmp_path: Path) -> None:
    """Without a loaded module /dev/crypto names no driver for the engine: nothing is timed as offload;
    software is still measured."""
    double, ko, logs = _boot(tmp_path, "crypto-register-offload")
    logs.mkdir()
    (logs / "load.kernel.log").write_text("libwolf0: info: driver loaded: 1\n")  # a stale log
    r = _run(double, "offload.sh", str(logs))
    assert r.returncode == 1
    status = dict(line.split("=", 1) for line in (logs / "offload.status").read_text().splitlines())
    assert (status["result"], status["driver"], status["software_rc"]) == ("no-driver", "unknown", "0")
    json.dumps(status)


def test_the_load_stage_measures_offload_when_the_driver_attached(tmp_path: Path) -> None:
    """run_freebsd_module runs offload.sh while a crypto-register module is loaded; collect reads it."""
    from buildbot_bsdkm.pipeline.targets import kernel
    from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import run_freebsd_module

    double, ko, _ = _boot(tmp_path, "crypto-register-offload")
    work = tmp_path / "run"
    outcome = run_freebsd_module(ko, work, timeout_s=5, privilege=[], env=double.env())
    assert outcome.load_rc == 0 and "offload" in outcome.stages
    assert (work / "offload.status").is_file() and outcome.unload_rc == 0
    logs = kernel.target("freebsd-kmod").measured_logs({}, work, outcome, outcome.kernel_log)
    assert sorted(log.metadata["offload_path"] for log in logs) == ["devcrypto", "software"]
    verdict = evaluate([RunResult(variant="crypto-register", target="freebsd-kmod", logs=logs)],
                       parse_policy(POLICY))
    assert verdict.of_kind(KIND_CROSSOVER)


def test_a_module_without_a_driver_is_not_measured(tmp_path: Path) -> None:
    from buildbot_bsdkm.pipeline.targets import kernel
    from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import run_freebsd_module

    double = FreeBSDDouble.boot("success", tmp_path / "kernel")
    ko = tmp_path / "libwolfssl.ko"
    ko.write_bytes(b"\x7fELF not really a module")
    outcome = run_freebsd_module(ko, tmp_path / "run", timeout_s=5, privilege=[], env=double.env())
    assert outcome.load_rc == 0 and "offload" not in outcome.stages
    target = kernel.target("freebsd-kmod")
    assert target.measured_logs({}, tmp_path / "run", outcome, outcome.kernel_log) == []


def test_offload_loads_cryptodev_and_keeps_allow_soft_off_for_the_run(tmp_path: Path) -> None:
    """GENERIC has no /dev/crypto until cryptodev.ko is loaded; allow_soft=0 while measuring, then back."""
    doc = json.loads(OFFLOAD_SCENARIO.read_text())
    doc["sysctl"]["kern.crypto.allow_soft"] = "1"  # a machine someone set to 1
    double, ko, logs = _boot(tmp_path, doc)
    assert _run(double, "load.sh", str(ko), "5", str(logs)).returncode == 0
    assert _run(double, "offload.sh", str(logs)).returncode == 0
    status = read_status(logs / "offload.status")
    assert (status["cryptodev"], status["allow_soft_before"], status["allow_soft"]) == ("loaded", "1", "0")
    assert ["kldload", "cryptodev"] in double.calls()
    sets = [c for c in double.calls() if c[:1] == ["sysctl"] and any("=" in a for a in c)]
    assert sets == [["sysctl", "kern.crypto.allow_soft=0"], ["sysctl", "kern.crypto.allow_soft=1"]]
    # run again: cryptodev is there now and is not loaded twice
    assert _run(double, "offload.sh", str(logs)).returncode == 0
    assert read_status(logs / "offload.status")["cryptodev"] == "present"
    assert double.calls().count(["kldload", "cryptodev"]) == 1


def test_another_driver_behind_dev_crypto_is_not_timed_as_wolfssl(tmp_path: Path) -> None:
    """The devcrypto engine picks a driver by capability: one that is not wolfSSL's is refused, and said."""
    doc = json.loads(OFFLOAD_SCENARIO.read_text())
    doc["openssl"]["dump_driver"] = "ccp0"
    double, ko, logs = _boot(tmp_path, doc)
    assert _run(double, "load.sh", str(ko), "5", str(logs)).returncode == 0
    r = _run(double, "offload.sh", str(logs))
    assert r.returncode == 1 and "ccp0" in r.stderr and "not wolfSSL's driver" in r.stderr
    status = read_status(logs / "offload.status")
    assert (status["driver"], status["result"], status["software_rc"]) == ("ccp0", "other-driver", "0")
    assert not [c for c in double.calls() if c[:2] == ["openssl", "speed"] and "-engine" in c]
    run = RunResult(variant="crypto-register", target="freebsd-kmod", logs=offload_logs(logs))
    (crid,) = [c for c in evaluate([run], parse_policy(POLICY)).checks if c.kind == KIND_OFFLOAD]
    assert not crid.passed and "ccp0" in crid.message
