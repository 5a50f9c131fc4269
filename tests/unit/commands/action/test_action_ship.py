"""The Action as shipped: third-party actions pinned by commit, the FreeBSD VM's
prepare step, no deprecated inputs, log folds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[4]
ACTION = ROOT / "action" / "action.yml"
STEPS = yaml.safe_load(ACTION.read_text())["runs"]["steps"]


def uses_lines() -> list[str]:
    return [m.group(1).strip() for line in ACTION.read_text().splitlines()
            if (m := re.match(r"\s*(?:-\s*)?uses:(.*)", line))]


def test_third_party_actions_are_pinned_by_commit_with_the_version_in_a_comment() -> None:
    third_party = [u for u in uses_lines() if not u.startswith("actions/")]
    owners = {u.split("@")[0] for u in third_party}
    assert owners == {"dawidd6/action-download-artifact", "vmactions/freebsd-vm"}
    for use in third_party:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+(\.\d+)*", use), use


def vm_steps() -> list[dict]:
    return [s for s in STEPS if str(s.get("uses", "")).startswith("vmactions/freebsd-vm@")]


def test_vm_steps_drop_usesh_and_provide_kernel_sources() -> None:
    assert len(vm_steps()) == 2
    for step in vm_steps():
        assert "usesh" not in step["with"]  # deprecated and ignored by vmactions/freebsd-vm
        prepare = step["with"]["prepare"]
        assert "/usr/src/sys/conf/kmod.mk" in prepare and "src.txz" in prepare
        assert "download.freebsd.org/releases/" in prepare


@pytest.mark.parametrize("shell", ["dash", "sh"])
def test_prepare_is_posix_sh(shell: str, tmp_path: Path) -> None:
    """vmactions runs prepare with FreeBSD's sh; dash (POSIX, no bashisms) must at least parse it."""
    script = tmp_path / "prepare.sh"
    script.write_text(vm_steps()[0]["with"]["prepare"])
    proc = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    lint = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True,
                          check=False)
    assert lint.returncode == 0, lint.stdout


def test_long_phases_are_folded() -> None:
    texts = [str(s.get("run", "")) for s in STEPS] + [(ROOT / "action" / "run-bsdkm-ci.sh").read_text()]
    for text in texts:
        # the VM script closes its install fold on the error path too
        assert text.count("::group::") <= text.count("::endgroup::") <= 2 * text.count("::group::"), text
    names = {s.get("name") for s in STEPS if "::group::" in str(s.get("run", ""))}
    assert {"Install bsdkm-ci", "Install build packages", "Stage bsdkm-ci for the FreeBSD VM"} <= names
    # `bsdkm-ci run` folds each of its stages itself (commands/log_groups.py)
    assert "bsdkm-ci run --log-groups" in (ROOT / "action" / "run-bsdkm-ci.sh").read_text()


def test_the_vm_installs_the_wheel_with_the_dependencies_it_declares() -> None:
    """No dependency list of its own in the VM: the wheel goes in with its base dependencies."""
    script = (ROOT / "action" / "run-bsdkm-ci.sh").read_text()
    installs = [line for line in script.splitlines() if "pip install" in line]
    assert len(installs) == 1, installs
    assert "--no-deps" not in installs[0] and ".bsdkm-ci/*.whl" in installs[0]
    assert not re.search(r"[\w-]+[<>=]=", installs[0]), installs[0]  # no requirement written here


def test_the_vm_install_runs_without_twisted_treq_or_buildbot(tmp_path: Path) -> None:
    """In the FreeBSD VM only the base install is there (run-bsdkm-ci.sh): `run` and `junit` must not
    need the GitHub client ([github]: Twisted, treq) or Buildbot."""
    import sys

    from conftest import FIXTURES

    code = ("import sys\n"
            "for m in ('twisted', 'treq', 'buildbot', 'autobahn'): sys.modules[m] = None\n"
            "from buildbot_bsdkm.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    for args in (["run", "--help"], ["junit", str(FIXTURES / "noise/accel_r01.txt"), "-o", "j.xml"]):
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False)
        assert proc.returncode in (0, 1), (args, proc.stderr[-2000:])
    assert (tmp_path / "j.xml").is_file()
