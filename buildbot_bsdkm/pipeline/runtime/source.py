"""Getting a wolfSSL source tree: Debian's archive, git (PR refs too), a tarball, or a local dir.

Everything downloaded lives in a cache (``$BSDKM_CACHE``, else ``$XDG_CACHE_HOME/bsdkm-ci``,
else ``~/.cache/bsdkm-ci``) and is checked by SHA-256 before use, so a second run
with a verified tarball and an autogen'd tree on disk does no network I/O at all.
Nothing is fetched at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import lzma
import os
import re
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from debian import deb822
from debian.debian_support import Version as DebianVersion

from ...config.bsdkm_yml import Config, DebianSource, GitSource, LocalSource, SourceSpec, TarballSource
from ...support.redact import redact_text, redact_url
from .locks import exclusive, private_part, write_atomic
from .stage_error import infra_error, real_error

Progress = Callable[[str], None]
READY_STAMP = ".bsdkm-ready.json"  # written last: a tree without it is half-made and is redone
HTTP_TIMEOUT_S = 60.0


def _quiet(_: str) -> None:
    pass


def cache_root(config: Config | None = None) -> Path:
    if config is not None and config.cache_dir is not None:
        return config.cache_dir
    if os.environ.get("BSDKM_CACHE"):
        return Path(os.environ["BSDKM_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "bsdkm-ci"


def _locked(cache: Path, name: str) -> contextlib.AbstractContextManager[None]:
    """Several engineers/builders share one cache: one writer per item at a time."""
    return exclusive(cache / "locks" / f"{name}.lock")


@dataclass
class SourceTree:
    path: Path  # the autogen'd tree (has ./configure)
    origin: str  # what was asked for: "debian:sid/wolfssl=5.9.2", "git:URL@REF", ...
    version: str | None = None  # wolfSSL version from configure.ac
    sha256: str | None = None  # of the tarball, when there was one
    commit: str | None = None  # git commit, when from git
    fetched: list[str] = field(default_factory=list)  # URLs actually downloaded this time
    # What was asked for, field by field, so a report can say "PR head abc123 of URL" without
    # parsing ``origin``: kind is debian|git|tarball|local; url/ref only for git.
    kind: str | None = None
    url: str | None = None
    ref: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {
            "path": str(self.path),
            "origin": self.origin,
            "kind": self.kind,
            "url": self.url,
            "ref": self.ref,
            "version": self.version,
            "sha256": self.sha256,
            "commit": self.commit,
        }


# --------------------------------------------------------------------------- HTTP


def _network_failure(url: str, err: BaseException) -> Exception:
    reason = getattr(err, "reason", err)
    url = redact_url(url)  # the messages end up in state.json, the step log and the PR comment
    host = urllib.request.urlparse(url).hostname or url
    if isinstance(reason, socket.gaierror):
        return infra_error("fetch", "network", f"fetch failed: could not resolve host {host} ({url})")
    if isinstance(err, urllib.error.HTTPError):
        return infra_error("fetch", "fetch", f"fetch failed: HTTP {err.code} {err.reason} for {url}")
    if isinstance(reason, TimeoutError | socket.timeout):
        return infra_error("fetch", "network", f"fetch failed: timed out talking to {host} ({url})")
    return infra_error("fetch", "network", f"fetch failed: {redact_text(str(reason))} ({url})")


def download(url: str, dest: Path, *, expect_sha256: str | None = None, progress: Progress = _quiet) -> str:
    """Stream ``url`` to ``dest`` (atomically) and return its SHA-256; mismatch → StageError."""
    shown = redact_url(url)
    part = private_part(dest)
    digest = hashlib.sha256()
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp, open(part, "wb") as out:
            total = int(resp.headers.get("Content-Length") or 0)
            got = 0
            while chunk := resp.read(1 << 20):
                out.write(chunk)
                digest.update(chunk)
                got += len(chunk)
        if total and got != total:
            raise infra_error("fetch", "fetch", f"fetch failed: {shown} ended after {got} of {total} bytes")
    except (urllib.error.URLError, OSError, ConnectionError) as e:
        part.unlink(missing_ok=True)
        raise _network_failure(url, e) from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    sha = digest.hexdigest()
    if expect_sha256 and sha != expect_sha256.lower():
        part.unlink(missing_ok=True)
        # Not a network hiccup: what arrived is not what was promised. Retrying would only
        # fetch (and possibly build) it again.
        raise real_error(
            "fetch",
            "integrity",
            f"checksum mismatch for {shown}: expected sha256 {expect_sha256.lower()}, got {sha}",
        )
    part.replace(dest)
    progress(f"fetch: {shown} ({got} bytes, {time.monotonic() - started:.1f} s)")
    return sha


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- Debian's index


@dataclass(frozen=True)
class ArchiveFile:
    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class SourcePackage:
    package: str
    version: str  # Debian version, e.g. 5.9.2-1.2
    directory: str  # pool/main/w/wolfssl
    files: tuple[ArchiveFile, ...]

    @property
    def upstream_version(self) -> str:
        """The version without epoch and Debian revision, by Debian's rules (python-debian)."""
        try:
            return DebianVersion(self.version).upstream_version or ""
        except ValueError:  # not a Debian version at all: nothing can match it
            return ""

    def orig_tarball(self) -> ArchiveFile | None:
        for f in self.files:
            if re.search(r"\.orig\.tar\.(gz|xz|bz2)$", f.name):
                return f
        return None


def _of_package(lines: Iterable[str], package: str) -> Iterator[str]:
    """The lines of ``package``'s paragraphs only, each paragraph then a blank line.

    The sid index is ~70 MB of text in ~43,000 paragraphs: parsing each into a ``deb822`` object
    takes ten times as long as this scan, which keeps one paragraph's lines at a time.
    """
    wanted = f"Package: {package}"
    para: list[str] = []
    keep = False
    for line in lines:
        if line.strip():
            para.append(line)
            keep = keep or (line.startswith("Package:") and line.rstrip() == wanted)
            continue
        if keep:
            yield from para
            yield "\n"
        para, keep = [], False
    if keep:
        yield from para


def parse_sources(lines: Iterable[str], package: str) -> list[SourcePackage]:
    """Every entry for ``package`` in a ``Sources`` index, read by python-debian's ``deb822``."""
    out = []
    for para in deb822.Sources.iter_paragraphs(_of_package(lines, package), use_apt_pkg=False):
        # A row without all three of digest, size and name lists no file (deb822 leaves the rest out).
        files = tuple(ArchiveFile(name=f["name"], sha256=f["sha256"], size=int(f["size"]))
                      for f in para.get("Checksums-Sha256", [])
                      if re.fullmatch(r"[0-9a-f]{64}", f.get("sha256", "")) and f.get("size", "").isdigit()
                      and f.get("name"))
        out.append(SourcePackage(para.get("Package", ""), para.get("Version", ""), para.get("Directory", ""),
                                 files))
    return out


def _version_key(v: str) -> DebianVersion | None:
    """Debian's ordering (epoch, upstream, revision; ``~`` sorts before anything): ``1~bpo12+1 < 1``.

    None for a string that is not a Debian version: such an entry cannot be chosen.
    """
    try:
        return DebianVersion(v)
    except ValueError:
        return None


def pick_package(entries: list[SourcePackage], spec: DebianSource, where: str) -> SourcePackage:
    if not entries:
        raise real_error("fetch", "fetch", f"fetch failed: {spec.package} is not in {where}")
    entries = [e for e in entries if _version_key(e.version) is not None]
    if not entries:
        raise real_error("fetch", "fetch",
                         f"fetch failed: {where} has no valid Debian version of {spec.package}")
    if spec.version:
        matching = [e for e in entries if e.upstream_version == spec.version]
        if not matching:
            have = ", ".join(sorted({e.version for e in entries}))
            raise real_error(
                "fetch", "fetch", f"fetch failed: {where} has {spec.package} {have}, not {spec.version}"
            )
        entries = matching
    return max(entries, key=lambda e: DebianVersion(e.version))


def sources_index(spec: DebianSource, cache: Path, progress: Progress = _quiet) -> Path:
    """The suite's ``Sources.xz``, read again only when the cached one is older than allowed."""
    local = cache / "debian" / spec.suite / "Sources.xz"
    # Runs that start together find the index stale together: one downloads, the others wait
    # for it and then find it fresh.
    with _locked(cache, f"debian-{spec.suite}-Sources"):
        fresh = local.is_file() and time.time() - local.stat().st_mtime < spec.index_max_age_s
        if not fresh:
            download(f"{spec.mirror}/dists/{spec.suite}/main/source/Sources.xz", local, progress=progress)
    return local


def read_index(path: Path, package: str) -> list[SourcePackage]:
    try:
        with lzma.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            return parse_sources(fh, package)
    except (lzma.LZMAError, EOFError) as e:
        path.unlink(missing_ok=True)  # a broken index must not poison later runs
        raise infra_error("fetch", "fetch", f"fetch failed: {path} is not a valid xz index: {e}") from None


def debian_tarball(
    spec: DebianSource, cache: Path, progress: Progress = _quiet
) -> tuple[Path, str, list[str]]:
    """The verified ``.orig`` tarball: (path, sha256, URLs downloaded)."""
    record = cache / "debian" / spec.suite / f"{spec.package}_{spec.version or 'latest'}.json"
    fetched: list[str] = []
    if spec.version and record.is_file():
        known = json.loads(record.read_text())
        tarball = cache / "downloads" / known["name"]
        if tarball.is_file() and sha256_of(tarball) == known["sha256"]:
            return tarball, known["sha256"], fetched
    index = sources_index(spec, cache, progress)
    pkg = pick_package(read_index(index, spec.package), spec, f"{spec.mirror} {spec.suite}")
    orig = pkg.orig_tarball()
    if orig is None:
        raise real_error(
            "fetch", "fetch", f"fetch failed: {spec.package} {pkg.version} lists no .orig tarball"
        )
    tarball = cache / "downloads" / orig.name
    with _locked(cache, f"download-{orig.name}"):
        if not (tarball.is_file() and sha256_of(tarball) == orig.sha256):
            url = f"{spec.mirror}/{pkg.directory}/{orig.name}"
            download(url, tarball, expect_sha256=orig.sha256, progress=progress)
            fetched.append(url)
    write_atomic(record, json.dumps(
        {"name": orig.name, "sha256": orig.sha256, "size": orig.size, "debian_version": pkg.version}
    ))
    return tarball, orig.sha256, fetched


# --------------------------------------------------------------------------- trees


def wolfssl_version(tree: Path) -> str | None:
    try:
        text = (tree / "configure.ac").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"AC_INIT\(\s*\[wolfssl\]\s*,\s*\[([^\]]+)\]", text)
    return m.group(1) if m else None


def autogen(tree: Path, timeout_s: float, progress: Progress = _quiet) -> None:
    """Run ``./autogen.sh`` when there is no ``configure`` yet; output kept in ``autogen.log``."""
    if (tree / "configure").is_file():
        return
    if not (tree / "autogen.sh").is_file():
        raise real_error("fetch", "fetch", f"fetch failed: {tree} is not a wolfSSL tree (no autogen.sh)")
    started = time.monotonic()
    log = tree / "autogen.log"
    try:
        with open(log, "wb") as out:
            rc = subprocess.run(
                ["./autogen.sh"],
                cwd=tree,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                check=False,
            ).returncode
    except subprocess.TimeoutExpired:
        raise infra_error(
            "fetch", "fetch", f"autogen.sh timed out after {timeout_s:g} s", [str(log)]
        ) from None
    except OSError as e:
        raise infra_error("fetch", "fetch", f"autogen.sh could not run: {e}", [str(log)]) from None
    if rc != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise real_error("configure", "configure", f"autogen.sh failed: {tail[0]}", [str(log)])
    progress(f"fetch: autogen.sh in {tree} ({time.monotonic() - started:.1f} s)")


def unpacked_tree(
    tarball: Path, sha256: str, cache: Path, timeout_s: float, progress: Progress = _quiet
) -> Path:
    """Unpack once per tarball checksum and autogen; later calls return the ready tree."""
    home = cache / "src" / f"{tarball.name.split('.tar')[0]}-{sha256[:12]}"
    with _locked(cache, home.name):
        if (home / READY_STAMP).is_file():
            return Path(json.loads((home / READY_STAMP).read_text())["tree"])
        if home.exists():
            shutil.rmtree(home)
        tmp = home.with_name(home.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            with tarfile.open(tarball) as tf:
                for member in tf.getmembers():
                    problem = _unsafe_member(member)
                    if problem:
                        raise tarfile.FilterError(f"{member.name!r} {problem}")
                tf.extractall(tmp, filter="data")
        except tarfile.FilterError as e:  # absolute paths, "..", links out of the tree, devices
            shutil.rmtree(tmp, ignore_errors=True)
            raise real_error("fetch", "integrity", f"unsafe tarball member in {tarball}: {e}") from None
        except (tarfile.TarError, OSError, EOFError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise infra_error("fetch", "fetch", f"cannot unpack {tarball}: {e}") from None
        tops = [p for p in tmp.iterdir() if p.is_dir()]
        inner = tops[0] if len(tops) == 1 else tmp
        autogen(inner, timeout_s, progress)
        tmp.rename(home)
        tree = home / inner.relative_to(tmp)
        (home / READY_STAMP).write_text(json.dumps({"tree": str(tree), "sha256": sha256}))
        return tree


def _git(args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except subprocess.TimeoutExpired:
        raise infra_error("fetch", "network", f"git {args[0]} timed out after {timeout_s:g} s") from None


def _git_failure(what: str, proc: subprocess.CompletedProcess[str]) -> Exception:
    err = (proc.stderr or proc.stdout).strip()
    first = next(
        (ln for ln in err.splitlines() if ln.startswith("fatal:")), err.splitlines()[-1] if err else ""
    )
    transient = re.search(
        r"Could not resolve host|Connection (reset|refused|timed out)|unable to access|"
        r"early EOF|The remote end hung up",
        err,
    )
    first = redact_text(first)  # git may quote the URL it was given, credentials and all
    if transient:
        return infra_error("fetch", "network", f"{what} failed: {first}")
    return real_error("fetch", "fetch", f"{what} failed: {first}")


def _unsafe_member(member: tarfile.TarInfo) -> str | None:
    """Why a tarball member must not be unpacked (even if the data filter would rewrite it), or None."""
    name = member.name
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "has an absolute path"
    if ".." in Path(name).parts:
        return "climbs out with '..'"
    if member.issym() or member.islnk():
        target = member.linkname
        if target.startswith("/") or ".." in Path(target).parts:
            return f"links outside the tree ({target!r})"
    if member.isdev() or member.isfifo():
        return "is a device or FIFO"
    return None


def _git_dirs(cache: Path, url: str, slot: str = "") -> tuple[Path, Path, Path]:
    """(work tree, its git directory, bookkeeping file) for one repository URL.

    The git directory and the bookkeeping live beside the work tree, not in it: a build runs
    the checked-out code, which can write anything inside its tree (a ``.git/`` stamp, hooks,
    config) and so must not decide what the next fetch trusts.
    """
    key = hashlib.sha256(url.encode()).hexdigest()[:16]
    if slot:  # a second tree of the same repository (the perf gate's base next to the head)
        key = f"{key}-{re.sub(r'[^a-z0-9]', '_', slot.lower())}"
    base = cache / "git"
    return base / key, base / f"{key}.git", base / f"{key}.json"


def _tree_git(
    git_dir: Path, tree: Path, args: list[str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    # No hooks and no fsmonitor: nothing in a directory a build could touch gets to run.
    return _git(
        [f"--git-dir={git_dir}", f"--work-tree={tree}", "-c", "core.hooksPath=/dev/null",
         "-c", "core.fsmonitor=false", *args],
        tree,
        timeout_s,
    )


def git_tree(spec: GitSource, cache: Path, timeout_s: float, progress: Progress = _quiet) -> tuple[Path, str]:
    """Check out ``spec.ref`` (refs/pull/N/merge works) in a cached work tree; (tree, commit).

    Every fetch forces the checkout, removes every untracked and ignored file, and checks that
    ``HEAD`` is the commit and ``git status`` is clean before autogen runs, so what an earlier
    build (say a PR's) left in the tree can never pass for another commit.
    """
    tree, git_dir, book = _git_dirs(cache, spec.url, spec.slot)
    key = tree.name
    with _locked(cache, f"git-{key}"):
        if (tree / ".git").exists():  # the old layout kept its git directory inside the tree
            shutil.rmtree(tree)
        tree.mkdir(parents=True, exist_ok=True)
        if not (git_dir / "HEAD").is_file():
            shutil.rmtree(git_dir, ignore_errors=True)
            proc = _git(["init", "-q", "--bare", str(git_dir)], tree, 60)
            if proc.returncode:
                raise _git_failure("git init", proc)
        fetch = ["fetch", "-q", "--no-tags", "--depth=1", spec.url, spec.ref]
        proc = _tree_git(git_dir, tree, fetch, timeout_s)
        if proc.returncode:
            raise _git_failure(f"git fetch {spec.ref}", proc)
        commit = _tree_git(git_dir, tree, ["rev-parse", "FETCH_HEAD"], 60).stdout.strip()
        if spec.commit and not commit.startswith(spec.commit.lower()):
            raise real_error(
                "fetch",
                "fetch",
                f"fetch failed: {spec.ref} of {redact_url(spec.url)} is now {commit[:12]}, "
                f"not {spec.commit[:12]} "
                "this build is for (pushed to since it was queued?)",
            )
        book.unlink(missing_ok=True)
        for args in (["checkout", "-q", "--force", "--detach", commit], ["clean", "-q", "-ffdx"]):
            proc = _tree_git(git_dir, tree, args, 300)
            if proc.returncode:
                raise _git_failure(f"git {args[0]}", proc)
        _verify_checkout(git_dir, tree, commit)
        progress(f"fetch: {redact_url(spec.url)} {spec.ref} -> {commit[:12]}")
        autogen(tree, timeout_s, progress)
        book.write_text(json.dumps({"url": redact_url(spec.url), "ref": spec.ref, "commit": commit}))
        return tree, commit


def _verify_checkout(git_dir: Path, tree: Path, commit: str) -> None:
    head = _tree_git(git_dir, tree, ["rev-parse", "HEAD"], 60).stdout.strip()
    status = _tree_git(git_dir, tree, ["status", "--porcelain", "--ignored", "--untracked-files=all"], 300)
    dirty = status.stdout.strip().splitlines() if status.returncode == 0 else ["(git status failed)"]
    if head != commit or dirty:
        raise real_error(
            "fetch",
            "integrity",
            f"fetch failed: the checkout of {commit[:12]} is not clean (HEAD {head[:12] or '?'}, "
            f"{len(dirty)} changed path(s), first: {dirty[0] if dirty else '-'})",
        )


def tarball_tree(
    spec: TarballSource, cache: Path, timeout_s: float, progress: Progress = _quiet
) -> tuple[Path, str, list[str]]:
    fetched: list[str] = []
    if spec.is_url:
        name = re.sub(r"[^\w.+-]", "_", spec.location.rstrip("/").rsplit("/", 1)[-1]) or "source.tar.gz"
        local = cache / "downloads" / name
        with _locked(cache, f"download-{name}"):
            if not (local.is_file() and spec.sha256 and sha256_of(local) == spec.sha256):
                download(spec.location, local, expect_sha256=spec.sha256, progress=progress)
                fetched.append(redact_url(spec.location))
            sha = sha256_of(local)  # before another run may fetch the URL again over it
    else:
        local = Path(spec.location)
        if not local.is_file():
            raise real_error("fetch", "fetch", f"fetch failed: tarball {local} does not exist")
        sha = sha256_of(local)
    if spec.sha256 and sha != spec.sha256:
        raise real_error(
            "fetch", "integrity", f"checksum mismatch for {local}: expected sha256 {spec.sha256}, got {sha}"
        )
    return unpacked_tree(local, sha, cache, timeout_s, progress), sha, fetched


def _local_commit(path: Path) -> str | None:
    """HEAD of a local checkout (``--source-dir``), so its report still names the commit built.

    Only a checkout's own top level counts: a plain directory inside some other repository
    must not be reported as that repository's HEAD.
    """
    if not (path / ".git").exists():
        return None
    proc = _git(["rev-parse", "--verify", "HEAD"], path, 60)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def fetch_source(
    spec: SourceSpec, *, cache: Path | None = None, timeout_s: float = 900.0, progress: Progress = _quiet
) -> SourceTree:
    """A ready (autogen'd) wolfSSL tree for ``spec``; failures raise ``StageError``."""
    cache = cache or cache_root()
    if isinstance(spec, DebianSource):
        tarball, sha, fetched = debian_tarball(spec, cache, progress)
        tree = unpacked_tree(tarball, sha, cache, timeout_s, progress)
        return SourceTree(
            tree, spec.describe(), wolfssl_version(tree), sha256=sha, fetched=fetched, kind="debian"
        )
    if isinstance(spec, TarballSource):
        tree, sha, fetched = tarball_tree(spec, cache, timeout_s, progress)
        return SourceTree(
            tree, spec.describe(), wolfssl_version(tree), sha256=sha, fetched=fetched, kind="tarball"
        )
    if isinstance(spec, GitSource):
        tree, commit = git_tree(spec, cache, timeout_s, progress)
        return SourceTree(
            tree,
            spec.describe(),
            wolfssl_version(tree),
            commit=commit,
            kind="git",
            url=redact_url(spec.url),  # what is written and shown; git had the URL as given
            ref=spec.ref,
        )
    if isinstance(spec, LocalSource):
        if not spec.path.is_dir():
            raise real_error("fetch", "fetch", f"fetch failed: source directory {spec.path} does not exist")
        autogen(spec.path, timeout_s, progress)
        return SourceTree(
            spec.path,
            spec.describe(),
            wolfssl_version(spec.path),
            commit=_local_commit(spec.path),
            kind="local",
        )
    raise TypeError(f"unknown source spec {spec!r}")


def wolfssl_source(config: Config | None = None) -> Path:
    """The autogen'd wolfSSL tree (Debian sid 5.9.2 unless ``config`` says otherwise), cached."""
    if config is None:
        return fetch_source(DebianSource(), cache=cache_root()).path
    return fetch_source(config.source, cache=cache_root(config), timeout_s=config.timeout("fetch")).path
