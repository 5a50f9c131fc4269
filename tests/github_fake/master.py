"""A real Buildbot master (scripts/master.sh's code) wired to the loopback GitHub, for tests and bench."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from buildbot_bsdkm.buildbot import control

from .server import FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
TOKEN_ENV = "BSDKM_TEST_GITHUB_TOKEN"
SECRET_ENV = "BSDKM_TEST_WEBHOOK_SECRET"
WEBHOOK_SECRET = "loopback webhook secret"


def write_config(
    path: Path, github_url: str, *, variants: tuple[str, ...] = ("intelasm", "noasm"), **github: Any
) -> Path:
    """The repository's bsdkm.yml, userspace only, with a github section pointing at the fake."""
    doc = yaml.safe_load((ROOT / "bsdkm.yml").read_text(encoding="utf-8"))
    doc["policy"] = str(ROOT / "policies" / "default.yml")
    doc["variants"] = {
        name: dict(spec, targets=["userspace"], enabled=True)
        for name, spec in doc["variants"].items()
        if name in variants
    }
    doc["github"] = {
        "repo": "Codertocat/Hello-World",
        "api_url": github_url,
        "token_env": TOKEN_ENV,
        "webhook_secret_env": SECRET_ENV,
        "resend_interval_s": 2,
        # Tests read the buildsets right after the answer: an event is acted on before it (the
        # load bench and test set the default back).
        "answer_within_s": 60,
        # Writes a second apart (the default) would queue the many tests' statuses behind each other;
        # the spacing itself is checked on an injected clock and, once, at its default.
        "write_interval_s": 0.05,
        **github,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Master:
    base: Path
    github: FakeGitHub
    layout: control.Layout = field(init=False)
    workers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.layout = control.Layout(self.base)

    def start(self, config: Path, *, with_worker: bool, db_url: str = "sqlite:///state.sqlite",
              secrets: dict[str, str] | None = None) -> Master:
        """``secrets``: files of the master's ``SecretInAFile`` provider (name -> value), for
        ``{secret: NAME}`` in the configuration."""
        os.environ[TOKEN_ENV] = self.github.token
        os.environ[SECRET_ENV] = WEBHOOK_SECRET
        control.create(self.layout, config_path=config, db_url=db_url)
        if secrets:
            self._provide(secrets)
        try:
            control.start_master(self.layout)
        except control.ControlError as e:
            # `buildbot start` gives up watching after 10 s; on a busy machine the master is slower.
            if "took more than" not in str(e):
                raise
        self._wait_running(timeout=180)
        if with_worker:
            for name in self.layout.worker_names():
                control.start_worker(self.layout, name)
            self.rest.wait_workers(self.layout.worker_names(), timeout=60)
            self.workers = tuple(self.layout.worker_names())
        return self

    def _provide(self, secrets: dict[str, str]) -> None:
        folder = self.layout.master / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        for name, value in secrets.items():
            fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(value + "\n")
        settings = json.loads(self.layout.settings_file.read_text(encoding="utf-8"))
        settings["secrets_dir"] = str(folder)
        self.layout.settings_file.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")

    def _wait_running(self, timeout: float) -> None:
        log = self.layout.master / "twistd.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            if "BuildMaster is running" in text:
                return
            if "BuildMaster startup failed" in text or "Configuration Errors" in text:
                raise RuntimeError(f"master did not start:\n{text[-3000:]}")
            time.sleep(0.5)
        raise RuntimeError(f"master not running after {timeout:.0f} s (see {log})")

    def stop(self) -> None:
        for name in self.workers:
            control.stop_worker(self.layout, name)
        try:
            control.stop_master(self.layout)
        except control.ControlError:
            # A master still draining a load run may miss buildbot's stop deadline: end it by its pid.
            pid_file = self.layout.master / "twistd.pid"
            if pid_file.exists():
                pid = int(pid_file.read_text().strip())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the master, as a crash or a power cut would."""
        pid = int((self.layout.master / "twistd.pid").read_text().strip())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        log = self.layout.master / "twistd.log"
        if log.exists():
            log.rename(log.with_name(f"twistd.log.killed-{int(time.time() * 1000)}"))

    def restart(self) -> Master:
        """Start the killed master again on the same directory, database and outbox."""
        try:
            control.start_master(self.layout)
        except control.ControlError as e:
            if "took more than" not in str(e):
                raise
        self._wait_running(timeout=180)
        return self

    @property
    def url(self) -> str:
        return self.layout.www_url()

    @property
    def hook_url(self) -> str:
        return self.url + "change_hook/github"

    @property
    def rest(self) -> control.Rest:
        return control.Rest(self.url)

    def log(self) -> str:
        return (self.layout.master / "twistd.log").read_text(encoding="utf-8", errors="replace")

    def acted_on_everything(self) -> bool:
        """Every event the hook answered for has been acted on (the inbox journal has its done mark)."""
        inbox = self.layout.master / "github-inbox.jsonl"
        if not inbox.exists():
            return True
        seqs, done = set(), set()
        for line in inbox.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                (done.add(doc["done"]) if "done" in doc else seqs.add(doc.get("seq")))
        return seqs <= done

    def wait_acted(self, timeout: float = 30.0) -> None:
        """Until the master has acted on what it answered: the hook answers first, then acts."""
        deadline = time.monotonic() + timeout
        while not self.acted_on_everything():
            if time.monotonic() > deadline:
                raise AssertionError("the master has not acted on every answered event")
            time.sleep(0.1)

    def buildsets_for(self, number: int) -> list[dict[str, Any]]:
        out = []
        for bs in self.rest.get("buildsets"):
            stamps = bs.get("sourcestamps") or []
            if any(s.get("branch") == f"refs/pull/{number}/head" for s in stamps):
                out.append(bs)
        return out

    def requests_of(self, bsid: int) -> list[dict[str, Any]]:
        return self.rest.get("buildrequests", buildsetid=bsid)


def sign(body: bytes, secret: str = WEBHOOK_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    session: requests.Session | None,
    hook_url: str,
    event: str,
    payload: dict[str, Any] | bytes,
    *,
    signature: str | None = "auto",
    content_type: str = "application/json",
    timeout: float = 30.0,
    delivery: str | None = None,
) -> tuple[requests.Response, float]:
    """POST one webhook like GitHub does; returns the response and its round-trip seconds."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {
        "Content-Type": content_type,
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "User-Agent": "GitHub-Hookshot/loopback",
    }
    if signature == "auto":
        headers["X-Hub-Signature-256"] = sign(body)
    elif signature is not None:
        headers["X-Hub-Signature-256"] = signature
    poster = session or requests
    started = time.monotonic()
    response = poster.post(hook_url, data=body, headers=headers, timeout=timeout)
    return response, time.monotonic() - started
