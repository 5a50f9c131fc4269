"""The base-branch automation through a real master: a base build shows a new failure signature, the
master starts its ``bisect`` builder, which bisects with real builds and comments on the culprit at
the loopback GitHub (every request checked against GitHub's OpenAPI description).

The base branch is a history made on the real wolfSSL 5.9.2 tree (tests/bisect_history.py): 8
commits, the 5th a wrong SHA-256 expected value in test.c. The last good base build's outcome is
recorded in the master's database as the Gate step records one; the failing one is a real forced
build of ``userspace/noasm`` of the configured source (the branch's tip), whose Gate step records it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests
import yaml
from bisect_history import LEAN_POLICY, base_repo, make_history
from github_fake.master import SECRET_ENV, TOKEN_ENV, Master
from github_fake.server import FakeGitHub

from buildbot_bsdkm.buildbot.bisect_builder import BUILDER
from buildbot_bsdkm.contract import BISECT_RESULT_PROPERTY
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source
from buildbot_bsdkm.triage.outcome_store import OutcomeSqlStore

pytestmark = pytest.mark.slow
REPO = "Codertocat/Hello-World"


def config(tmp: Path, repo: Path, github_url: str) -> Path:
    (tmp / "policy.yml").write_text(LEAN_POLICY)
    doc = {
        "source": {"git": {"url": str(repo), "ref": "main"}},
        "targets": {"userspace": {"flags": ["--enable-cryptonly", "--enable-crypttests", "--disable-ecc",
                                            "--disable-dh"]}},
        "variants": {"noasm": {"flags": ["--disable-asm"], "targets": ["userspace"]}},
        "benchmark": {"min_runtime_s": 0.05, "embedded": False, "ntimes": 1, "agreetimes": 1,
                      "userspace_args": ["-sha256"], "repeats": 3, "max_repeats": 3},
        "timeouts": {"selftest": 300, "benchmark": 300},
        "retry": {"max_infra_retries": 1, "backoff_s": [1]},
        "policy": str(tmp / "policy.yml"),
        "github": {"repo": REPO, "api_url": github_url, "token_env": TOKEN_ENV,
                   "webhook_secret_env": SECRET_ENV, "resend_interval_s": 2},
        "www": {"auth": {"type": "htpasswd", "file": str(tmp / "www.htpasswd")}, "admins": ["alice"]},
    }
    (tmp / "www.htpasswd").write_text("alice:alice-pw\n")  # who may force the base build
    path = tmp / "bsdkm.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def force(master: Master, builder: str) -> int:
    """A build of the configured source (the base branch's tip), as a push or the nightly starts one."""
    body = {"jsonrpc": "2.0", "method": "force", "id": 1,
            "params": {"builderNames": [builder], "reason": "base branch build"}}
    with requests.Session() as session:
        session.get(f"{master.url}auth/login", auth=("alice", "alice-pw"), timeout=30)
        r = session.post(f"{master.url}api/v2/forceschedulers/force", json=body, timeout=30)
    assert r.status_code == 200 and "error" not in r.json(), r.text
    return int(r.json()["result"][0])


def test_a_new_failure_on_the_base_branch_is_bisected_and_the_culprit_commented(tmp_path: Path) -> None:
    repo, base = base_repo(tmp_path, wolfssl_source())
    hist = make_history(repo, base, "main", 8, failure_at=5)
    github = FakeGitHub().start()
    github.histories[REPO] = hist.commits  # the commit comment checks the culprit is in the range
    master = Master(tmp_path / "master", github)
    try:
        master.start(config(tmp_path, repo, github.url), with_worker=True)
        # The last good base build, recorded as the Gate step records one.
        store = OutcomeSqlStore(f"sqlite:///{master.layout.master / 'state.sqlite'}")
        store.add({"target": "userspace", "variant": "noasm", "kernel": "", "verdict": "pass",
                   "signatures": [], "commit": hist.good, "fingerprint": "base-build", "kinds": ["selftest"]})
        bsid = force(master, "userspace/noasm")
        master.rest.wait_buildset(bsid, timeout=1800)

        def done() -> list[dict]:
            return [b for b in master.rest.get("builds", builderid=_builder_id(master)) if b.get("complete")]

        bisects = master.rest.wait(done, "the bisect build", timeout=2400, interval=5)
        props = master.rest.properties(bisects[0]["buildid"])
        result = props[BISECT_RESULT_PROPERTY]
        assert result["decided"], result
        assert result["culprit"]["sha"] == hist.planted["failure"]
        deadline = time.monotonic() + 120
        while not github.commit_comments and time.monotonic() < deadline:
            time.sleep(1)
        [comment] = github.commit_comments
        assert comment["commit_id"] == hist.planted["failure"]
        assert "bsdkm-ci bisect" in comment["body"] and "SHA-256" in comment["body"]
        assert github.invalid == [] and github.invalid_responses == []
        assert github.token not in master.log()
    finally:
        master.stop()
        github.stop()


def _builder_id(master: Master) -> int:
    return next(i for i, name in master.rest.builder_names().items() if name == BUILDER)
