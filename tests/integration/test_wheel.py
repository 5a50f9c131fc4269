"""The installed package, as a new user gets it: `python -m build`, a fresh venv with only
the wheel and its base dependencies, every command run from a directory outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT
from junit_readers import validate

pytestmark = pytest.mark.slow


def run(venv: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("user")


def test_the_wheel_carries_the_runtime_data(built_wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(built_wheel).namelist())
    data = "buildbot_bsdkm/_data/"
    for rel in ("bsdkm.yml", "bsdkm.schema.json", "master.cfg", "policies/default.yml",
                "workers/local/buildbot.tac", "workers/freebsd/setup.sh", "workers/linux-qemu/setup.sh",
                "kmod/freebsd/load.sh", "kmod/freebsd/unload.sh", "kmod/freebsd/collect.sh",
                "kmod/freebsd/_common.sh", "kmod/linux/loader.c", "kmod/linux/init.sh",
                "kmod/linux/mkinitramfs.sh", "kmod/linux/run-qemu.sh", "kmod/linux/testmods/Kbuild",
                "kmod/linux/testmods/bsdkm_ok.c"):
        assert data + rel in names, rel
    assert not any(n.startswith(("kmod/", "policies/")) for n in names)  # inside the package only
    # the licence notice travels with the package (license-files)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-8:]


def test_the_base_install_brings_no_buildbot_and_no_requests(fresh_venv: Path, built_wheel: Path,
                                                             elsewhere: Path) -> None:
    """What `pip install` of the wheel alone resolves to, from the index: the command's few packages."""
    report = elsewhere / "resolve.json"
    proc = run(fresh_venv, elsewhere, "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
               "--report", str(report), str(built_wheel), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    names = {i["metadata"]["name"].lower().replace("_", "-") for i in installs}
    assert "buildbot-bsdkm" in names
    assert "requests" not in names
    assert not {n for n in names if n.startswith("buildbot") and n != "buildbot-bsdkm"}
    assert not names & {"twisted", "treq", "sqlalchemy", "cryptography"}, names  # [github], [buildbot]


def test_installed_package_finds_its_data_outside_the_checkout(fresh_venv: Path, elsewhere: Path) -> None:
    probe = (
        "import json, buildbot_bsdkm, buildbot_bsdkm.support.resources as r\n"
        "from buildbot_bsdkm.pipeline.targets import _freebsd as freebsd_common\n"
        "from buildbot_bsdkm.pipeline.targets.freebsd_kmod import target as freebsd\n"
        "from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm\n"
        "from buildbot_bsdkm.policy import DEFAULT_POLICY_PATH\n"
        "from buildbot_bsdkm.config.bsdkm_yml import default_config_path\n"
        "print(json.dumps({'pkg': buildbot_bsdkm.__file__, 'policy': str(DEFAULT_POLICY_PATH),\n"
        "  'config': str(default_config_path()), 'freebsd': str(freebsd_common.KMOD_DIR),\n"
        "  'linux': str(linuxkm.KMOD_DIR), 'scripts': list(freebsd.SCRIPTS)}))\n"
    )
    proc = run(fresh_venv, elsewhere, "python", "-c", probe)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    site = str(fresh_venv)
    assert found["pkg"].startswith(site) and not found["pkg"].startswith(str(ROOT))
    for key in ("policy", "config", "freebsd", "linux"):
        assert found[key].startswith(site), (key, found[key])
        assert Path(found[key]).exists(), found[key]
    for script in found["scripts"]:
        assert (Path(found["freebsd"]) / script).is_file(), script
    for rel in ("loader.c", "init.sh", "mkinitramfs.sh", "run-qemu.sh", "testmods/Makefile"):
        assert (Path(found["linux"]) / rel).is_file(), rel
    # the base install is the CLI: no Buildbot, no requests
    for module in ("buildbot", "requests"):
        assert run(fresh_venv, elsewhere, "python", "-c", f"import {module}").returncode == 1, module


def test_readme_commands_work_from_the_wheel(fresh_venv: Path, built_wheel: Path, elsewhere: Path) -> None:
    accel, again = FIXTURES / "noise/accel_r01.txt", FIXTURES / "noise/accel_r03.txt"
    parsed = run(fresh_venv, elsewhere, "bsdkm-ci", "parse", str(accel), "--json")
    assert parsed.returncode in (0, 1), parsed.stderr
    assert json.loads(parsed.stdout)["runs"][0]["logs"][0]["benchmarks"]
    (elsewhere / "base.json").write_text(parsed.stdout)
    head = run(fresh_venv, elsewhere, "bsdkm-ci", "parse", str(again), "--json")
    (elsewhere / "head.json").write_text(head.stdout)

    # no --policy: the packaged default policy (was: ".../site-packages/policies/default.yml: no such file")
    junit = run(fresh_venv, elsewhere, "bsdkm-ci", "junit", str(accel), "-o", "junit.xml",
                "--markdown", "report.md", "--html", "report.html")
    assert junit.returncode in (0, 1), junit.stderr
    validate((elsewhere / "junit.xml").read_bytes(), "wheel junit.xml")
    assert "bsdkm-ci results" in (elsewhere / "report.md").read_text()
    compare = run(fresh_venv, elsewhere, "bsdkm-ci", "compare", "base.json", "head.json")
    assert compare.returncode in (0, 1), compare.stderr
    assert "no such policy file" not in compare.stderr

    # no --config: the packaged bsdkm.yml (was: cannot find bsdkm.yml)
    tree = elsewhere / "wolfssl"
    tree.mkdir()
    config = run(fresh_venv, elsewhere, "bsdkm-ci", "action", "config", "--source", str(tree),
                 "--write", "derived.yml")
    assert config.returncode == 0, config.stderr
    assert str(tree) in (elsewhere / "derived.yml").read_text()

    # the Action's judging steps on a run's results: outputs (no GITHUB_OUTPUT: name=value lines), gate
    out = elsewhere / "action-out"
    out.mkdir()
    labelled = run(fresh_venv, elsewhere, "bsdkm-ci", "parse", str(accel), "--json", "--variant", "intelasm",
                   "--target", "userspace")
    (out / "summary.json").write_text(labelled.stdout)
    (out / "run.exit-code").write_text("0\n")
    outputs = run(fresh_venv, elsewhere, "bsdkm-ci", "action", "outputs", "--out", str(out))
    assert outputs.returncode == 0, outputs.stderr
    assert "verdict=pass" in outputs.stdout.splitlines(), outputs.stdout
    validate((out / "junit.xml").read_bytes(), "wheel action outputs junit.xml")
    gate = run(fresh_venv, elsewhere, "bsdkm-ci", "action", "gate", "--out", str(out))
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert gate.stdout.startswith("bsdkm-ci: PASS"), gate.stdout

    version = run(fresh_venv, elsewhere, "bsdkm-ci", "--version")
    assert version.stdout.strip() == f"bsdkm-ci {built_wheel.name.split('-')[1]}", version.stdout

    helped = run(fresh_venv, elsewhere, "bsdkm-ci", "run", "--help")
    assert helped.returncode == 0 and "--variant" in helped.stdout
    assert not any(p.name in ("kmod", "policies") for p in elsewhere.iterdir())
    assert os.path.isdir(ROOT / "kmod")  # the checkout was never touched


def test_the_release_workflow_smoke_test_passes_on_the_wheel(fresh_venv: Path, built_wheel: Path,
                                                             elsewhere: Path) -> None:
    """scripts/wheel_smoke.sh, what .github/workflows/release.yml runs on the wheel it publishes."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(elsewhere), "LANG": "C.UTF-8"}
    smoke = ROOT / "scripts" / "wheel_smoke.sh"
    proc = subprocess.run(["bash", str(smoke), str(built_wheel), str(fresh_venv)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "action outputs and gate ran" in proc.stdout

