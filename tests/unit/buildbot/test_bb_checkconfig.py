"""A master made the Buildbot way: `buildbot checkconfig` names the worker secret it lacks, and passes
with it (it said "Config file is good!" before, and `buildbot start` then failed on the secret)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from buildbot_bsdkm.support import resources

BUILDBOT = Path(sys.executable).parent / "buildbot"


def test_create_master_copy_master_cfg_and_bsdkm_yml_checkconfig(tmp_path: Path) -> None:
    master = tmp_path / "master"
    made = subprocess.run([str(BUILDBOT), "create-master", str(master)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    shutil.copy(resources.master_cfg_path(), master / "master.cfg")
    shutil.copy(resources.default_config_path(), master / "bsdkm.yml")
    assert not (master / "bsdkm-master.json").exists()  # no settings file, no local worker
    env = {"PATH": f"{BUILDBOT.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    checked = subprocess.run([str(BUILDBOT), "checkconfig", str(master)], capture_output=True, text=True,
                             timeout=120, check=False, env=env, cwd=tmp_path)
    assert checked.returncode != 0, checked.stdout + checked.stderr
    assert "workers.bsdkm-worker.password: secret 'bsdkm-worker' not found" in checked.stdout + checked.stderr
    (master / "secrets").mkdir(mode=0o700)
    (master / "secrets" / "bsdkm-worker").write_text("a password\n")
    (master / "secrets" / "bsdkm-worker").chmod(0o600)
    checked = subprocess.run([str(BUILDBOT), "checkconfig", str(master)], capture_output=True, text=True,
                             timeout=120, check=False, env=env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Config file is good!" in checked.stdout
