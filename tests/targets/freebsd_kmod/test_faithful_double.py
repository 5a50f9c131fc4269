"""freebsd-kmod in the faithful FreeBSD double: FreeBSD's paths, setup.sh's worker, real sudo, the wheel.

``tests/freebsd_double/chroot.py`` lays out a root as FreeBSD does (the kernel double at
``/sbin/kldload`` & co., nothing of it on a PATH), and every command here runs in a private mount
namespace chrooted there. ``workers/freebsd/setup.sh`` makes it a worker, with stand-ins for pkg,
pw, su, crontab, fetch and freebsd-version at their FreeBSD paths, root's shell csh as on 13.x,
bsdkm-ci from the built wheel, and Debian's sudo reading FreeBSD's ``/usr/local/etc/sudoers``.
Then the worker user runs the target's own ``run_freebsd_module`` from its venv, through sudo.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from freebsd_double import load_scenario
from freebsd_double.chroot import DoubleUnavailable, FreeBSDRoot
from freebsd_double.make_offload_scenario import OFFLOAD_SCENARIO

from buildbot_bsdkm.pipeline.targets.freebsd_kmod.worker import INSTALLED_FILES, LIBEXEC_DIR

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
VENV = "/home/buildbot/venv"
WORKER_DIR = "/home/buildbot/worker"
SUDOERS_RULE = """\
# bsdkm-ci: the worker user runs the module's root scripts, and only those (workers/freebsd/README.md).
Defaults:buildbot !requiretty
buildbot ALL=(root) NOPASSWD: /bin/sh /usr/local/libexec/bsdkm-ci/load.sh *, \\
    /bin/sh /usr/local/libexec/bsdkm-ci/unload.sh *, \\
    /bin/sh /usr/local/libexec/bsdkm-ci/collect.sh *, \\
    /bin/sh /usr/local/libexec/bsdkm-ci/offload.sh *
"""
# What setup.sh may touch, for "a second run changes nothing".
WATCHED = ("etc", "usr/local/etc", "usr/local/libexec", "boot", "var/cron/tabs",
           "home/buildbot/worker/buildbot.tac")


@dataclass
class Worker:
    root: FreeBSDRoot
    master: tuple[str, int]
    setups: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    snapshots: list[dict[str, str]] = field(default_factory=list)

    def worker_path(self) -> str:
        """The PATH setup.sh gives the worker: its @reboot line in the worker user's crontab."""
        tab = self.root.p("/var/cron/tabs/buildbot").read_text()
        line = next(x for x in tab.splitlines() if x.startswith("@reboot "))
        return line.split("PATH=", 1)[1].split()[0]

    def as_worker(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        env = {"PATH": self.worker_path(), "HOME": "/home/buildbot", "USER": "buildbot"}
        return self.root.run(argv, user="buildbot", env=env, **kw)  # type: ignore[arg-type]

    def module(self, name: str = "libwolfssl.ko") -> str:
        ko = self.root.p(f"/home/buildbot/build/{name}")
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_bytes(b"\x7fELF not really a module")
        shutil.chown(ko.parent, 1001, 1001)
        return f"/home/buildbot/build/{name}"

    def load_cycle(self, work: str, *, offload: bool = True) -> dict:
        """The target's run_freebsd_module, as the worker user, from the worker's venv (the wheel)."""
        probe = ("import json, sys\n"
                 "from buildbot_bsdkm.pipeline.runtime.stage_error import StageError\n"
                 "from buildbot_bsdkm.pipeline.targets.freebsd_kmod import target\n"
                 "try:\n"
                 f"    o = target.run_freebsd_module({self.module()!r}, {work!r}, timeout_s=20,\n"
                 f"                                  offload={offload})\n"
                 "except StageError as e:\n"
                 "    print(json.dumps({'error': e.failure.message, 'category': str(e.failure.category)}))\n"
                 "    sys.exit(0)\n"
                 "print(json.dumps({'load_rc': o.load_rc, 'unload_rc': o.unload_rc,\n"
                 "                  'loaded_seen': o.loaded_seen,\n"
                 "                  'stages': o.stages, 'notes': o.notes, 'module': target.__file__}))\n")
        res = self.as_worker([f"{VENV}/bin/python", "-c", probe])
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    def status(self, work: str, name: str) -> dict[str, str]:
        text = self.root.p(f"{work}/{name}").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _snapshot(root: FreeBSDRoot) -> dict[str, str]:
    found = {}
    for rel in WATCHED:
        base = root.root / rel
        paths = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for p in paths:
            st = p.stat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            found[str(p.relative_to(root.root))] = f"{digest} {oct(st.st_mode)} {st.st_uid} {st.st_mtime_ns}"
    return found


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What pip may fetch for bsdkm-ci beside FreeBSD's packages: pure-Python wheels (from PyPI's cache)."""
    out = tmp_path_factory.mktemp("wheelhouse")
    wanted = [f"{d}=={importlib.metadata.version(d)}" for d in ("junit-xml", "python-debian", "six")]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(out),
           *wanted]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def fbsd(built_wheel: Path, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """The double, made a worker by setup.sh twice; the worker it started is stopped at the end."""
    try:
        root = FreeBSDRoot.build(tmp_path_factory.mktemp("fbsd") / "root", wheelhouse)
    except DoubleUnavailable as e:
        pytest.skip(str(e))
    root.kernel_sources()
    shutil.copy2(built_wheel, root.p(f"/.double/wheels/{built_wheel.name}"))
    shutil.copy2(ROOT / "workers" / "freebsd" / "setup.sh", root.p("/root/setup.sh"))
    root.p("/root/worker-password").write_text("s3cret-worker-pw\n")
    root.p("/root/worker-password").chmod(0o600)
    root.boot(load_scenario("success"))
    master = socket.socket()
    master.bind(("127.0.0.1", 0))
    master.listen(8)
    worker = Worker(root, master.getsockname())
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/.double/wheels", "HOME": "/root",
           "BSDKM_CI_SPEC": f"/.double/wheels/{built_wheel.name}"}
    try:
        for _ in range(2):
            worker.setups.append(root.run(["/bin/sh", "/root/setup.sh", f"127.0.0.1:{worker.master[1]}",
                                           "fbsd14", "/root/worker-password"], env=env, timeout=600))
            worker.snapshots.append(_snapshot(root))
        yield worker
    finally:
        master.close()
        pid = root.p(f"{WORKER_DIR}/twistd.pid")
        if pid.is_file():
            subprocess.run(["kill", pid.read_text().strip()], check=False)


# --------------------------------------------------------------------------- setup.sh


def test_setup_makes_the_worker_and_a_second_run_changes_nothing(fbsd: Worker) -> None:
    first, second = fbsd.setups
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert second.returncode == 0, second.stderr[-4000:]
    assert "bsdkm-ci doctor: every required prerequisite of freebsd-kmod holds" in first.stderr
    assert "s3cret" not in first.stdout + first.stderr
    r = fbsd.root
    rule = r.p("/usr/local/etc/sudoers.d/bsdkm-ci")
    assert rule.read_text() == SUDOERS_RULE
    assert oct(rule.stat().st_mode & 0o777) == "0o440"
    tab = r.p("/var/cron/tabs/buildbot").read_text().splitlines()
    assert tab[:2] == ["# the user's own job, which setup.sh must keep",
                       "0 3 * * * /home/buildbot/cleanup.sh"]
    assert tab[2] == "# bsdkm-ci worker (workers/freebsd/setup.sh)"
    assert tab[3] == (f"@reboot PATH={VENV}/bin:/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin "
                      f"/usr/local/bin/buildbot-worker start --quiet {WORKER_DIR}")
    assert len(tab) == 4
    assert r.p("/boot/loader.conf").read_text() == 'autoboot_delay="3"\nkern.msgbufsize="524288"\n'
    sysctl_conf = r.p("/etc/sysctl.conf").read_text()
    assert sysctl_conf.endswith("security.bsd.see_other_uids=0\nkern.log_console_output=1\n")
    for name in INSTALLED_FILES:
        installed = r.p(f"{LIBEXEC_DIR}/{name}")
        st = installed.stat()
        assert (st.st_uid, oct(st.st_mode & 0o777)) == (0, "0o555"), name
        assert installed.read_bytes() == (ROOT / "kmod" / "freebsd" / name).read_bytes(), name
    tac = r.p(f"{WORKER_DIR}/buildbot.tac").read_text()
    assert "buildmaster_host = '127.0.0.1'" in tac and "workername = 'fbsd14'" in tac
    # FreeBSD's packages brought the compiled modules; pip built nothing
    pkg = [c for c in r.standin_calls() if c[:2] == ["pkg", "install"]]
    assert "py311-cryptography" in pkg[0] and "py311-buildbot-worker" in pkg[0]
    assert first.stdout.count("Building wheel") == 0
    # the second run: same files, same modes, not even rewritten
    before, after = fbsd.snapshots
    assert before == after


def test_the_worker_user_runs_in_sh_not_root_s_csh(fbsd: Worker) -> None:
    """Root's shell is csh here (13.x): `su -m` would run the worker's commands in it."""
    assert fbsd.root.p("/etc/passwd").read_text().startswith("root:*:0:0:Charlie &:/root:/bin/csh\n")
    su = [c for c in fbsd.root.standin_calls() if c[:1] == ["su"]]
    assert su and not [c for c in su if c[1:2] == ["-m"]]
    assert "Command not found" not in fbsd.setups[0].stderr


def test_doctor_names_an_installed_script_that_differs_from_the_package(fbsd: Worker) -> None:
    common = fbsd.root.p(f"{LIBEXEC_DIR}/_common.sh")
    kept = common.read_bytes()
    try:
        common.write_bytes(kept + b"# changed by hand\n")
        res = fbsd.as_worker([f"{VENV}/bin/bsdkm-ci", "doctor", "--target", "freebsd-kmod"])
        assert res.returncode == 1
        assert "differ from the installed package's" in res.stdout and "_common.sh" in res.stdout
        assert "run workers/freebsd/setup.sh again as root" in res.stdout
    finally:
        common.write_bytes(kept)
    res = fbsd.as_worker([f"{VENV}/bin/bsdkm-ci", "doctor", "--target", "freebsd-kmod"])
    assert res.returncode == 0, res.stdout
    allowed = "sudo -n for the privileged scripts: allowed: load.sh, unload.sh, collect.sh, offload.sh"
    assert allowed in res.stdout
    denied = fbsd.as_worker(["/bin/sh", "-c", f"echo x >> {LIBEXEC_DIR}/load.sh"])
    assert denied.returncode != 0 and "Permission denied" in denied.stderr


# --------------------------------------------------------------------------- the target through sudo


def test_the_worker_s_path_finds_kldload_in_sbin(fbsd: Worker) -> None:
    """As root with the worker's PATH exactly as setup.sh writes it, the package's load.sh loads."""
    fbsd.root.boot(load_scenario("success"))
    kmod = next(fbsd.root.p(VENV).rglob("_data/kmod/freebsd/load.sh"))
    script = "/" + str(kmod.relative_to(fbsd.root.root))
    res = fbsd.root.run(["/bin/sh", script, fbsd.module(), "5", "/tmp/item1"],
                        env={"PATH": fbsd.worker_path()})
    assert res.returncode == 0, res.stderr
    assert ["kldload", "/home/buildbot/build/libwolfssl.ko"] in fbsd.root.calls()
    assert "/sbin" in fbsd.worker_path().split(":")
    # and the scripts themselves: a caller's PATH without /sbin (the worker's PATH before) still loads
    fbsd.root.boot(load_scenario("success"))
    old_path = f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin"
    res = fbsd.root.run(["/bin/sh", script, fbsd.module(), "5", "/tmp/item1b"], env={"PATH": old_path})
    assert res.returncode == 0, res.stderr


def test_the_worker_user_loads_through_sudo_from_libexec(fbsd: Worker) -> None:
    fbsd.root.boot(load_scenario("success"))
    got = fbsd.load_cycle("/home/buildbot/run-sudo")
    assert "error" not in got, got
    assert (got["load_rc"], got["loaded_seen"], got["unload_rc"]) == (0, True, 0)
    assert got["module"].startswith(f"{VENV}/lib/python3.11/site-packages/")  # the wheel, not the checkout
    kernel = fbsd.root.p("/home/buildbot/run-sudo/kernel.log").read_text()
    assert "info: libwolfssl loaded" in kernel and "info: libwolfssl unloaded" in kernel
    assert [c[0] for c in fbsd.root.calls() if c[0] in ("kldload", "kldunload")] == ["kldload", "kldunload"]


def test_a_refused_sudo_is_an_infrastructure_failure_with_sudo_s_words(fbsd: Worker) -> None:
    rule = fbsd.root.p("/usr/local/etc/sudoers.d/bsdkm-ci")
    aside = rule.with_name("bsdkm-ci.aside")
    fbsd.root.boot(load_scenario("success"))
    rule.rename(aside)
    try:
        got = fbsd.load_cycle("/home/buildbot/run-refused")
    finally:
        aside.rename(rule)
    assert got.get("category") == "infrastructure", got
    assert "sudo: a password is required" in got["error"]
    assert f"/usr/local/bin/sudo -n /bin/sh {LIBEXEC_DIR}/load.sh did not run load.sh" in got["error"]
    assert "run workers/freebsd/setup.sh again as root" in got["error"]
    assert fbsd.root.calls() == []  # nothing reached the kernel


def test_offload_through_sudo_loads_cryptodev_and_records_wolfssl_s_driver(fbsd: Worker) -> None:
    fbsd.root.boot(json.loads(OFFLOAD_SCENARIO.read_text()))
    got = fbsd.load_cycle("/home/buildbot/run-offload")
    assert "error" not in got, got
    assert got["load_rc"] == 0 and "offload" in got["stages"], got
    status = fbsd.status("/home/buildbot/run-offload", "offload.status")
    assert (status["cryptodev"], status["allow_soft"], status["driver"], status["result"]) == (
        "loaded", "0", "libwolf0", "measured")
    calls = fbsd.root.calls()
    assert ["kldload", "cryptodev"] in calls
    assert ["openssl", "engine", "-pre", "DUMP_INFO", "devcrypto"] in calls
