"""Two runs on one cache at once: each gets what it asked for, downloads happen once, and the
programs of a shared build never write into it.

A release builder and another run on one worker, or two files of the suite on two xdist workers,
start together on an empty cache. The mirror here holds the first request for a file until the
second arrives (``tests/held_mirror.py``), so the two downloads overlap on any machine.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import tarfile
import threading
from pathlib import Path

import pytest
from held_mirror import HeldMirror

from buildbot_bsdkm.config.bsdkm_yml import DebianSource, TarballSource
from buildbot_bsdkm.pipeline.runtime.source import SourceTree, download, fetch_source
from buildbot_bsdkm.pipeline.targets.userspace import run_programs

VERSION = "9.9.9"
TARBALL = f"wolfssl_{VERSION}.orig.tar.gz"


def _tarball() -> bytes:
    """A small autogen'd-looking wolfSSL tree (``configure`` present: nothing to autogen),
    padded so that its download takes a few chunks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=0) as tf:
        for name, text in (("configure", "#!/bin/sh\nexit 0\n"),
                           ("configure.ac", f"AC_INIT([wolfssl],[{VERSION}])\n"),
                           ("padding.bin", "x" * (4 << 20))):
            data = text.encode()
            info = tarfile.TarInfo(f"wolfssl-{VERSION}/{name}")
            info.size, info.mode = len(data), 0o755
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture()
def mirror(tmp_path: Path) -> HeldMirror:
    root = tmp_path / "mirror"
    pool = root / "pool" / "main" / "w" / "wolfssl"
    pool.mkdir(parents=True)
    data = _tarball()
    (pool / TARBALL).write_bytes(data)
    paragraph = (f"Package: wolfssl\nVersion: {VERSION}-1\nDirectory: pool/main/w/wolfssl\n"
                 f"Checksums-Sha256:\n {hashlib.sha256(data).hexdigest()} {len(data)} {TARBALL}\n\n")
    index = root / "dists" / "sid" / "main" / "source"
    index.mkdir(parents=True)
    # Large enough that both answers are still being written when the first one is whole.
    padding = "".join(f"Package: other{i}\nVersion: 1.0-1\nDirectory: pool/main/o/other{i}\n\n"
                      for i in range(60000))
    (index / "Sources.xz").write_bytes(lzma.compress((padding + paragraph).encode(), preset=0))
    return HeldMirror(root, hold_s=2.0, chunk=64 << 10, pause_s=0.005)


def _at_once(*calls) -> list[object]:  # type: ignore[no-untyped-def]
    """Each call in a thread of its own, started together; what each returned or raised."""
    results: list[object] = [None] * len(calls)

    def one(i: int) -> None:
        try:
            results[i] = calls[i]()
        except BaseException as e:  # noqa: BLE001 - the test reports what each run met
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def test_two_runs_fetching_one_debian_source_at_once_both_get_it_downloaded_once(
        mirror: HeldMirror, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with mirror.serving() as url:
        spec = DebianSource(suite="sid", version=VERSION, mirror=url)
        results = _at_once(lambda: fetch_source(spec, cache=cache), lambda: fetch_source(spec, cache=cache))
    # The old code downloaded twice into one `.part`: the second rename found nothing to move
    # (FileNotFoundError, which the release command reported as "cannot write results").
    assert all(isinstance(r, SourceTree) for r in results), results
    first, second = results
    assert first.path == second.path and first.version == second.version == VERSION  # type: ignore[union-attr]
    assert mirror.requests["/dists/sid/main/source/Sources.xz"] == 1
    assert mirror.requests[f"/pool/main/w/wolfssl/{TARBALL}"] == 1
    assert not list(cache.rglob("*.part"))


def test_two_runs_fetching_one_tarball_url_at_once(mirror: HeldMirror, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    data = (mirror.root / "pool" / "main" / "w" / "wolfssl" / TARBALL).read_bytes()
    sha = hashlib.sha256(data).hexdigest()
    with mirror.serving() as url:
        spec = TarballSource(location=f"{url}/pool/main/w/wolfssl/{TARBALL}", sha256=sha)
        results = _at_once(lambda: fetch_source(spec, cache=cache), lambda: fetch_source(spec, cache=cache))
    assert all(isinstance(r, SourceTree) for r in results), results
    assert mirror.requests[f"/pool/main/w/wolfssl/{TARBALL}"] == 1


def test_two_downloads_to_one_file_at_once_leave_it_whole(mirror: HeldMirror, tmp_path: Path) -> None:
    """Without a lock around it (a caller's own), each download still writes a file of its own."""
    path = f"/pool/main/w/wolfssl/{TARBALL}"
    data = (mirror.root / path.lstrip("/")).read_bytes()
    dest = tmp_path / "dl" / TARBALL
    with mirror.serving() as url:
        results = _at_once(lambda: download(url + path, dest), lambda: download(url + path, dest))
    assert results == [hashlib.sha256(data).hexdigest()] * 2
    assert dest.read_bytes() == data and not list(dest.parent.glob("*.part"))


def _fake_build(build_dir: Path) -> dict[str, Path]:
    """testwolfcrypt's habit in a script: read ./certs/, write a key into ./ (the run's name in it)."""
    (build_dir / "certs").mkdir(parents=True)
    (build_dir / "certs" / "ca.pem").write_text("a certificate\n")
    programs = {}
    for name, sub in (("testwolfcrypt", "test"), ("benchmark", "benchmark")):
        prog = build_dir / "wolfcrypt" / sub / name
        prog.parent.mkdir(parents=True)
        prog.write_text("#!/bin/sh\nset -e\ncat certs/ca.pem\necho \"$RUN\" > key.der\nsleep 0.3\n"
                        "test \"$(cat key.der)\" = \"$RUN\" || { echo 'key.der is not mine' >&2; exit 1; }\n")
        prog.chmod(0o755)
        programs[name] = prog
    return programs


def test_the_programs_of_a_shared_build_write_into_a_directory_of_their_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_dir = tmp_path / "cache" / "build" / "userspace-k"
    programs = _fake_build(build_dir)
    monkeypatch.setenv("RUN", "one")
    outcome = run_programs(programs, tmp_path / "run", bench_args=[], timeouts={"testwolfcrypt": 60,
                                                                               "benchmark": 60})
    assert [r.exit_code for r in outcome.runs] == [0, 0]
    assert "a certificate" in (tmp_path / "run" / "test.log").read_text()  # ./certs/ was there
    # The old code ran the programs in the build directory: their files landed there.
    assert not (build_dir / "key.der").exists()
    assert not (tmp_path / "run" / "key.der").exists()  # nor in the run's folder, which is uploaded
