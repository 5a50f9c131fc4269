"""The README's Buildbot quick start, line by line, in a fresh venv holding the built wheel (not the
checkout): the master listens where its bsdkm.yml says, a worker from another directory connects, the
quick start's last line forces a userspace/noasm build and prints its verdict (no GitHub involved);
then a signed PR webhook from the loopback GitHub builds the userspace target, and the statuses and
the one PR comment arrive through a GitHub App whose installation tokens expire, and are renewed,
mid-run.

The lines are read from README.md itself. Three things differ from a person following it: the pip
line installs the built wheel instead of the git URL; `$EDITOR` is this test writing the github:
section (the loopback GitHub, the App's key in M/secrets/) and free ports in master: (others share
this machine); the worker's `--master` names that port. `bsdkm-ci force` logs in as the admin
`init master` wrote into M/www.htpasswd, as it would for a person on the master's machine.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from conftest import ROOT
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github_fake import payloads
from github_fake.master import deliver
from github_fake.server import FakeApp, FakeGitHub
from test_gh_fullloop import PR, pr_repository

from buildbot_bsdkm.buildbot.control import Rest, free_port
from buildbot_bsdkm.github.publisher import REPORT_MARKER

pytestmark = pytest.mark.slow
WEBHOOK_SECRET = "loopback webhook secret"
# GitHub's installation tokens last an hour. Here a token is due for renewal 30 s after it was issued
# (the master renews one with a quarter of its life left), and the test holds the master until the
# token that sent the first report is past that point, so the later reports need another token
# however fast the build is.
TOKEN_TTL_S = 40.0
CONTEXT = "bsdkm/userspace/intelasm"


def hold_master_past_renewal(master: Path, github: FakeGitHub) -> None:
    """Stop the master (SIGSTOP) until every token issued so far is due for renewal, then go on.

    A report the master sends after this cannot go out under a token it already had: the run
    renews a token mid-build on any machine, not only on one slow enough to outlast a token.
    """
    pid = int((master / "twistd.pid").read_text().split()[0])
    due = max(github.installation_tokens.values()) - TOKEN_TTL_S / 4 + 1.0
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(max(0.0, due - time.time()))
    finally:
        os.kill(pid, signal.SIGCONT)


def readme_quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start: Buildbot", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no sh block under 'Quick start: Buildbot'"
    lines = []
    for line in block.group(1).splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            lines.append(command)
    return lines


def listening(port: int) -> set[str]:
    """The local addresses a TCP socket on ``port`` listens on (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            address, hexport = local.split(":")
            if state != "0A" or int(hexport, 16) != port:
                continue
            raw = bytes.fromhex(address)
            if width == 8:
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def edit_config(master: Path, github: FakeGitHub, clone_url: str, pem: bytes, www: int, workers: int) -> None:
    """What a person does in $EDITOR: GitHub (an App) and, here, free ports; one variant, to be quick."""
    path = master / "bsdkm.yml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    secrets = master / "secrets"
    for name, value in (("github-app-key", pem), ("webhook", WEBHOOK_SECRET.encode())):
        fd = os.open(secrets / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(value)
    doc["github"] = {
        "repo": "Codertocat/Hello-World",
        "api_url": github.url,
        "clone_url": clone_url,
        "app_id": 4242,
        "app_key": {"secret": "github-app-key"},  # through the master's SecretInAFile
        "webhook_secret_file": str(secrets / "webhook"),
        "resend_interval_s": 2,
    }
    doc["master"]["www_port"], doc["master"]["workers_port"] = www, workers
    for name, variant in doc["variants"].items():
        variant["enabled"] = name == "intelasm"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def only_the_generated_login_may_act(master: Path, www_port: int) -> None:
    """The web UI `init master` wrote: reading is open, acting needs the login it printed."""
    user, password = (master / "www.htpasswd").read_text(encoding="utf-8").strip().split(":", 1)
    # Cancelling a build request that does not exist: an action, which changes nothing here.
    cancel = f"http://127.0.0.1:{www_port}/api/v2/buildrequests/999999"
    body = {"jsonrpc": "2.0", "method": "cancel", "id": 1, "params": {"reason": "who may act"}}
    with requests.Session() as anonymous:
        assert anonymous.get(f"http://127.0.0.1:{www_port}/api/v2/builders", timeout=30).status_code == 200
        assert anonymous.post(cancel, json=body, timeout=30).status_code == 403
    with requests.Session() as session:
        login = f"http://127.0.0.1:{www_port}/auth/login"
        assert session.get(login, auth=(user, "wrong"), timeout=30).status_code == 401
        assert session.get(login, auth=(user, password), timeout=30).status_code == 200
        assert session.post(cancel, json=body, timeout=30).status_code == 200


def test_readme_buildbot_quick_start_from_the_wheel(built_wheel: Path, tmp_path: Path) -> None:
    lines = readme_quick_start()
    assert lines[0].startswith("pip install 'buildbot-bsdkm[buildbot]")
    home = tmp_path / "home"
    home.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)], check=True,
                   timeout=300)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CACHE_HOME": str(home / ".cache"), "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", "")}
    env = {k: v for k, v in env.items() if v}
    if not env.get("PIP_CACHE_DIR"):
        env["PIP_CACHE_DIR"] = str(Path.home() / ".cache" / "pip")  # the suite's downloads, shared

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    github = FakeGitHub(token="ghp_not_used_here").start()
    github.install_app(FakeApp(key.public_key(), slug="bsdkm-ci", token_ttl_s=TOKEN_TTL_S))
    bare, head = pr_repository(tmp_path)
    www_port, workers_port = free_port(), free_port()
    while workers_port == www_port:
        workers_port = free_port()
    master = home / "M"
    started: list[list[str]] = []
    printed: dict[str, str] = {}
    try:
        for line in lines:
            argv = shlex.split(line)
            if argv[0] == "pip":
                spec = next(a for a in argv if a.startswith("buildbot-bsdkm["))
                argv[argv.index(spec)] = f"{built_wheel}[buildbot]"
                argv = ["pip", "install", "--quiet", "--retries", "5", *argv[2:]]
            elif argv[0] == "$EDITOR":
                edit_config(master, github, bare.as_uri(), pem, www_port, workers_port)
                continue
            elif argv[:3] == ["bsdkm-ci", "init", "worker"]:
                argv[argv.index("--master") + 1] = f"127.0.0.1:{workers_port}"
            commands = [shlex.join(argv)] if "&&" not in argv else " ".join(argv).split(" && ")
            for command in commands:
                done = subprocess.run(command, shell=True, cwd=home, env=env, capture_output=True, text=True,
                                      timeout=900, check=False)
                # `buildbot start` stops watching after 10 s; a loaded machine starts slower than that.
                slow = " start " in f" {command} " and "took more than" in done.stdout + done.stderr
                said = f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                assert done.returncode == 0 or slow, said
                started.append(shlex.split(command))
                printed[command] = done.stdout
        # The quick start ends in a forced build's verdict, before any GitHub.
        (forced,) = [out for command, out in printed.items() if command.startswith("bsdkm-ci force ")]
        assert re.search(r"^userspace/noasm: SUCCESS \(verdict passed, 1 attempt\)", forced, re.M), forced
        installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                    "import buildbot_bsdkm; print(buildbot_bsdkm.__file__)"],
                                   capture_output=True, text=True, env=env, check=True, cwd=home).stdout
        assert installed.startswith(str(venv)) and not installed.startswith(str(ROOT))

        rest = Rest(f"http://127.0.0.1:{www_port}/")
        rest.wait(lambda: rest.get("builders"), "the master's web API", timeout=180)
        assert listening(www_port) == {"127.0.0.1"}  # master.listen.www
        assert listening(workers_port) == {"127.0.0.1"}  # master.listen.workers, as master.cfg's header says
        only_the_generated_login_may_act(master, www_port)
        rest.wait_workers(["linux"], timeout=120)
        names = set(rest.builder_names().values())
        assert "userspace/intelasm" in names and not any(n.startswith("linux-kmod") for n in names)

        payload = payloads.pull_request("opened", number=PR, association="MEMBER", head_sha=head)
        github.add_pull(payload)
        response, _ = deliver(None, f"http://127.0.0.1:{www_port}/change_hook/github", "pull_request",
                              payload)
        assert response.status_code in (200, 202), response.text
        rest.wait(lambda: github.latest_statuses(head).get(CONTEXT), "the pending status", timeout=600)
        hold_master_past_renewal(master, github)
        deadline = time.monotonic() + 3000
        while time.monotonic() < deadline:
            final = github.latest_statuses(head).get(CONTEXT, {}).get("state") not in (None, "pending")
            comment_done = any("Still running" not in c["body"] for c in github.comments_on(PR))
            if final and comment_done:
                break
            time.sleep(2)
        statuses = github.latest_statuses(head)
        assert statuses[CONTEXT]["state"] in ("success", "failure"), statuses
        assert set(statuses) == {CONTEXT}  # only the builders this master has
        (comment,) = github.comments_on(PR)
        assert comment["body"].startswith(REPORT_MARKER) and CONTEXT in comment["body"]
        assert len(github.calls("POST", f"/issues/{PR}/comments")) == 1

        # Everything reached GitHub through installation tokens, renewed before each expired.
        reports = [r for r in github.requests if "/statuses/" in r.path or "/comments" in r.path]
        used = {r.headers.get("Authorization", "").removeprefix("Bearer ") for r in reports}
        assert used <= set(github.installation_tokens), "a report went out with something else"
        assert len(github.installation_tokens) >= 2, "no token expired during the run"
        assert len(used) >= 2  # the reports themselves went out under more than one token
        assert github.expired_uses == [] and github.auth_refusals == []
        assert github.invalid == [] and github.invalid_responses == []
        log = (master / "twistd.log").read_text(encoding="utf-8", errors="replace")
        assert not any(t in log for t in github.installation_tokens)
        assert WEBHOOK_SECRET not in log
        print(f"tokens issued: {len(github.installation_tokens)} ({TOKEN_TTL_S:.0f} s each); "
              f"status {statuses[CONTEXT]['state']}: {statuses[CONTEXT]['description']}")
    finally:
        for argv in reversed(started):
            if argv[0] in ("buildbot", "buildbot-worker") and argv[1] == "start":
                subprocess.run([argv[0], "stop", argv[2]], cwd=home, env=env, capture_output=True,
                               timeout=120, check=False)
        github.stop()
