"""Git histories on the real wolfSSL 5.9.2 tree, made at test time, with planted commits to bisect.

The base commit is Debian's 5.9.2 tarball as the pipeline unpacks and autogens it (``configure``
committed too: every step of a bisection would otherwise run autogen.sh again). Each later commit
is one small real change: a comment added to one of wolfCrypt's sources, or a line of
documentation. Planted on top, each at the position asked for:

* ``failure``: ``wolfcrypt/test/test.c`` expects a wrong SHA-256 digest of "abc" (the real
  self-test then fails: ``SHA-256 test failed!``);
* ``perf``: ``Sha256Update`` does extra work for every block it hashes (a volatile loop over the
  block's words, ``extra`` iterations: about 10 % slower SHA-256 in the portable C build);
* ``broken``: a syntax error in ``wolfcrypt/src/hash.c``, fixed by the next commit;
* ``oops``: the Linux module's init writes through a NULL pointer (a kernel oops on load).

Used by tests/integration/test_bisect_real.py and bench/bisect_bench.py; nothing binary is committed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

# Sources every userspace build compiles (comment edits in them are real recompiles).
SOURCES = ("wolfcrypt/src/aes.c", "wolfcrypt/src/sha.c", "wolfcrypt/src/sha512.c", "wolfcrypt/src/hmac.c",
           "wolfcrypt/src/random.c", "wolfcrypt/src/rsa.c", "wolfcrypt/src/memory.c",
           "wolfcrypt/src/logging.c", "wolfcrypt/src/error.c", "wolfcrypt/src/wc_port.c",
           "wolfcrypt/src/coding.c", "wolfcrypt/src/md5.c", "wolfcrypt/src/signature.c",
           "wolfcrypt/src/wc_encrypt.c", "wolfcrypt/src/kdf.c", "wolfcrypt/src/pwdbased.c")
DOCS = ("README.md", "ChangeLog.md", "INSTALL", "AUTHORS")
BROKEN_FILE = "wolfcrypt/src/hash.c"
BROKEN_LINE = "int bisect_history_broken(void) { return 0 }  /* missing ';' */\n"
SHA256_ABC = '"\\xBA\\x78\\x16\\xBF'  # the first bytes of SHA-256("abc") as test.c spells them
SHA256_ABC_WRONG = '"\\xBA\\x78\\x16\\xBE'
PERF_ANCHOR = "Intel transform function requires use of sha256->buffer"
PERF_AFTER = "len  -= WC_SHA256_BLOCK_SIZE;"
DEFAULT_EXTRA = 40
OOPS_AFTER = "static int wolfssl_init(void)\n#endif\n{\n    int ret;\n"
OOPS_LINE = ("\n    {   /* bisect history: a write through NULL on load */\n"
             "        volatile int *bisect_null = NULL;\n        *bisect_null = 1;\n    }\n")


@dataclass
class History:
    repo: Path
    branch: str
    good: str  # the base commit
    bad: str  # the branch's tip
    commits: list[str] = field(default_factory=list)  # oldest first, good end included
    planted: dict[str, str] = field(default_factory=dict)  # failure|perf|broken -> sha

    def index(self, sha: str) -> int:
        return self.commits.index(sha)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args[:2])} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


class _Committer:
    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.count = 0

    def commit(self, subject: str, author: str = "Bisect History <history@example.org>") -> str:
        self.count += 1
        name, _, mail = author.partition(" <")
        stamp = f"@{1796083200 + 60 * self.count} +0000"  # a minute apart from 2026-12-01: reproducible
        mail = mail.rstrip(">")
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail, "GIT_AUTHOR_DATE": stamp,
               "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": mail, "GIT_COMMITTER_DATE": stamp}
        _git(self.repo, "add", "-A", "-f", ".")
        _git(self.repo, "commit", "-q", "--no-verify", "-m", subject, env=env)
        return _git(self.repo, "rev-parse", "HEAD")


def base_repo(dest: Path, source: Path) -> tuple[Path, str]:
    """A repository whose first commit is the autogen'd tree ``source``: (repo, its sha)."""
    repo = dest / "wolfssl-history"
    if (repo / ".git").is_dir():
        return repo, _git(repo, "rev-list", "--max-parents=0", "HEAD")
    skip = shutil.ignore_patterns("autom4te.cache", "autogen.log", ".bsdkm-*")
    shutil.copytree(source, repo, symlinks=True, ignore=skip)
    _git(repo, "init", "-q", "-b", "base")
    _git(repo, "config", "core.autocrlf", "false")
    _git(repo, "config", "gc.auto", "0")
    sha = _Committer(repo).commit("wolfSSL 5.9.2 as released (Debian's orig tarball, autogen'd)",
                                  "wolfSSL Release <release@example.org>")
    return repo, sha


def _edit(path: Path, old: str, new: str, after: str | None = None) -> None:
    text = path.read_text()
    start = text.index(after) if after else 0
    at = text.index(old, start)
    path.write_text(text[:at] + new + text[at + len(old):])


def make_history(repo: Path, base: str, branch: str, n: int, *, failure_at: int | None = None,
                 perf_at: int | None = None, broken_at: int | None = None,
                 extra: int = DEFAULT_EXTRA, oops_at: int | None = None) -> History:
    """``n`` commits after ``base`` on ``branch`` (1-based positions of the planted ones)."""
    _git(repo, "checkout", "-q", "-f", "-B", branch, base)
    c = _Committer(repo)
    c.count = 100 * (1 + sum(map(ord, branch)) % 50)
    hist = History(repo, branch, base, base, [base])
    for i in range(1, n + 1):
        if i == failure_at:
            _edit(repo / "wolfcrypt/test/test.c", SHA256_ABC, SHA256_ABC_WRONG, after="sha256_kat_test")
            sha = c.commit('test: sha256 KAT vector for "abc" updated',
                           "Careless Committer <oops@example.org>")
            hist.planted["failure"] = sha
        elif i == perf_at:
            loop = ("\n                {   /* bisect history: re-read the block (extra work per block) */\n"
                    "                    volatile word32 bisect_sum = 0;\n"
                    "                    int bisect_i;\n"
                    f"                    for (bisect_i = 0; bisect_i < {extra}; bisect_i++)\n"
                    "                        bisect_sum += local32[bisect_i & 15];\n"
                    "                }\n")
            _edit(repo / "wolfcrypt/src/sha256.c", PERF_AFTER, PERF_AFTER + loop, after=PERF_ANCHOR)
            sha = c.commit("sha256: re-read each block once more in Sha256Update",
                           "Slow Committer <slow@example.org>")
            hist.planted["perf"] = sha
        elif i == oops_at:
            _edit(repo / "linuxkm/module_hooks.c", OOPS_AFTER, OOPS_AFTER + OOPS_LINE)
            sha = c.commit("linuxkm: touch a pointer at init", "Kernel Committer <kernel@example.org>")
            hist.planted["oops"] = sha
        elif i == broken_at:
            with open(repo / BROKEN_FILE, "a") as fh:
                fh.write(BROKEN_LINE)
            sha = c.commit("hash: add a helper (does not compile)", "Hasty Committer <hasty@example.org>")
            hist.planted["broken"] = sha
        elif broken_at is not None and i == broken_at + 1:
            path = repo / BROKEN_FILE
            path.write_text(path.read_text().replace(BROKEN_LINE, ""))
            sha = c.commit("hash: drop the helper again")
        elif i % 2:
            path = repo / SOURCES[(i // 2) % len(SOURCES)]
            with open(path, "a") as fh:
                fh.write(f"/* {branch}: note {i} on this file */\n")
            sha = c.commit(f"{path.name}: a note at the end (change {i})")
        else:
            path = repo / DOCS[(i // 2) % len(DOCS)]
            with open(path, "a") as fh:
                fh.write(f"\n{branch} change {i}.\n")
            sha = c.commit(f"docs: {path.name} line (change {i})")
        hist.commits.append(sha)
    hist.bad = hist.commits[-1]
    _git(repo, "checkout", "-q", "-f", "base")
    return hist


# The lean userspace build a bisection's steps use in the suite and bench/bisect_bench.py: the
# portable C code, the self-test and the SHA-256 benchmark, no ECC or DH (fewer sources to build);
# one configure cache for every step (the same configure script and compiler each time).
LEAN_POLICY = """\
version: 1
selftests: true
complete: true
regressions:
  - {pattern: "*", max_pct: 2, limit: learned, detect_pct: 25}
instructions:
  items: {SHA-256: 262144}
"""
LEAN_CONFIG = """\
source: {{local: {repo}}}
targets:
  userspace: {{flags: [--enable-cryptonly, --enable-crypttests, --disable-ecc, --disable-dh,
                      "--cache-file={where}/config.cache"]}}
variants:
  noasm: {{flags: [--disable-asm], targets: [userspace]}}
benchmark: {{min_runtime_s: 0.05, embedded: false, ntimes: 1, agreetimes: 1, userspace_args: [-sha256],
            repeats: 5, max_repeats: 10}}
timeouts: {{selftest: 300, benchmark: 300}}
retry: {{max_infra_retries: 1, backoff_s: [1]}}
policy: {policy}
"""


def lean_config(where: Path, repo: Path) -> Path:
    """bsdkm.yml (and its policy) for bisecting ``repo`` on userspace/noasm, written in ``where``."""
    (where / "policy.yml").write_text(LEAN_POLICY)
    config = where / "bsdkm.yml"
    config.write_text(LEAN_CONFIG.format(repo=repo, policy=where / "policy.yml", where=where))
    return config
