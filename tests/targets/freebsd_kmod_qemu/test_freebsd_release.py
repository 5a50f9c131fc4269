"""FreeBSD's distribution sets end to end up to the boot: fetched from a loopback https mirror or a
directory, checked against MANIFEST, unpacked once into the cache, and turned into the kits the
release and debug kernels boot from.

The sets are ``BSDKM_FREEBSD_SETS`` when given, else tiny ones made by ``tests/freebsd_sets.py`` in
FreeBSD's layout (``releases/amd64/15.0-RELEASE``, ``snapshots/amd64/16.0-CURRENT``).
"""

from __future__ import annotations

import hashlib
import http.server
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from freebsd_sets import (
    RELEASE,
    SNAPSHOT,
    make_mirror,
    make_set,
    sets_for_tests,
    src_members,
    txz,
    write_manifest,
)
from loopback_http import serving

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.contract import TARGET_UNAVAILABLE
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import kit as fkit
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.release_set import (
    ReleaseSpec,
    SetRetry,
    parse_manifest,
    release_kit,
)

BASE = "targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
NO_WAIT = SetRetry(2, (30.0, 120.0), pause=lambda s: None)


def _home(cache: Path, name: str) -> Path:
    tree = "releases" if name.endswith("-RELEASE") else "snapshots"
    return cache / "freebsd-sets" / f"{tree}-{name}-amd64"


def _no_half_kit(cache: Path, name: str) -> None:
    home = _home(cache, name)
    assert not (home / "kit").exists() and not (home / "kit.new").exists()
    assert not list(home.glob("*.part"))


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sets_for_tests(tmp_path_factory.mktemp("sets"))


# --------------------------------------------------------------------------- a loopback https mirror


class _Mirror(http.server.SimpleHTTPRequestHandler):
    truncate: set[str] = set()  # paths served with a Content-Length longer than what is sent

    def log_message(self, *args: object) -> None:  # the test's output stays the test's
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.translate_path(self.path)
        if self.path in self.truncate and Path(path).is_file():
            data = Path(path).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture()
def https_mirror(mirror: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, type]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this mirror like a real one
    handler = type("Handler", (_Mirror,), {"truncate": set()})

    def make(*args: object, **kwargs: object) -> _Mirror:
        return handler(*args, directory=str(mirror), **kwargs)  # type: ignore[arg-type]

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    with serving(make, tls=ctx) as url:
        yield url, handler


def test_a_release_and_a_snapshot_from_an_https_mirror_become_kits(https_mirror: tuple[str, type],
                                                                   tmp_path: Path) -> None:
    url, _ = https_mirror
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\nfreebsd:\n  release: {RELEASE}\n"
                       f"  snapshot: {SNAPSHOT}\n  mirror: {url}\n", "r.yml")
    chosen = fkit.kits(cfg, ("debug", "release"))
    found = chosen.found
    assert chosen.notes == [] and chosen.not_run == {} and set(found) == {"debug", "release"}
    release, debug = found["release"], found["debug"]
    assert release.missing() == [] and debug.missing() == []
    assert release.kernel("release-crypto").is_file() and debug.kernel("debug").is_file()
    # Each kernel is built for its own version: a CURRENT snapshot is the next major.
    assert release.triple.endswith("freebsd15.0") and debug.triple.endswith("freebsd16.0")
    assert (release.root / "sysroot" / "contrib" / "llvm-project" / "clang" / "lib" / "Headers").is_dir()
    assert not (release.root / "etc").exists() and not (release.root / "sysroot" / "bin").exists()
    boots, plan_notes = fboot.boot_plan(release, ["release"], crypto=False)
    assert [(b.kind, b.kernel, b.mode) for b in boots] == [("release", "release-crypto", "kldload")]
    boots, _ = fboot.boot_plan(debug, ["debug"], crypto=False)
    assert [(b.kind, b.kernel, b.mode) for b in boots] == [("debug", "debug", "preload")]
    # Up to the boot: the ESP the loader reads, with the set's loader and kernel.
    esp = fboot.make_esp(tmp_path / "esp", release, release.kernel("release-crypto"), None, "kldload", "ab12")
    assert (esp / "EFI" / "BOOT" / "BOOTX64.EFI").read_bytes() == release.loader.read_bytes()
    assert "set bsdkm_ci.nonce=ab12" in (esp / "boot" / "loader.rc").read_text()


def test_a_download_cut_off_is_a_clear_error_and_leaves_nothing(https_mirror: tuple[str, type],
                                                                tmp_path: Path) -> None:
    url, handler = https_mirror
    handler.truncate.add(f"/releases/amd64/{RELEASE}/src.txz")
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, url), tmp_path / "cache")
    f = err.value.failure
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "network"
    assert "src.txz was cut off" in f.message
    _no_half_kit(tmp_path / "cache", RELEASE)


def test_an_unreachable_mirror_is_target_unavailable_and_the_cache_serves_without_it(tmp_path: Path) -> None:
    copy = make_mirror(tmp_path / "mirror")
    cache = tmp_path / "cache"
    first = {s: release_kit(ReleaseSpec(s, str(copy)), cache) for s in (RELEASE, SNAPSHOT)}
    shutil.rmtree(copy)  # no mirror any more: the cache must do, the snapshot's too
    assert {s: release_kit(ReleaseSpec(s, str(copy)), cache) for s in (RELEASE, SNAPSHOT)} == first
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(copy)), tmp_path / "empty-cache")
    f = err.value.failure
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == TARGET_UNAVAILABLE
    assert "MANIFEST" in f.message


def test_a_release_set_that_does_not_match_manifest_is_refused(tmp_path: Path) -> None:
    bad = make_mirror(tmp_path / "mirror")
    with open(bad / "releases" / "amd64" / RELEASE / "kernel.txz", "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(bad)), tmp_path / "cache", retry=NO_WAIT)
    f = err.value.failure
    # A release's sets never change: never fetched again, never the code's fault either.
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "integrity"
    assert "checksum mismatch for" in f.message and "kernel.txz" in f.message
    _no_half_kit(tmp_path / "cache", RELEASE)


def test_a_missing_set_is_named(tmp_path: Path) -> None:
    bad = make_mirror(tmp_path / "mirror")
    (bad / "releases" / "amd64" / RELEASE / "base.txz").unlink()
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(bad)), tmp_path / "cache")
    assert "base.txz" in err.value.failure.message and "cannot fetch" in err.value.failure.message
    _no_half_kit(tmp_path / "cache", RELEASE)


def test_a_failed_unpack_leaves_no_kit_without_its_stamp(tmp_path: Path) -> None:
    mirror = tmp_path / "m"
    where = make_set(mirror, RELEASE)
    # src.txz is listed in MANIFEST with its right digest, but is no archive at all.
    (where / "src.txz").write_bytes(b"not an xz archive")
    write_manifest(where, {})
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(mirror)), tmp_path / "cache")
    assert err.value.failure.reason == "integrity" and "src.txz" in err.value.failure.message
    _no_half_kit(tmp_path / "cache", RELEASE)


def test_members_outside_the_allowed_prefixes(tmp_path: Path) -> None:
    mirror = tmp_path / "m"
    make_set(mirror, RELEASE, base=[("./boot/loader_simp.efi", b"MZ"), ("./etc/passwd", b"root")],
             src=[*src_members("15.0"), ("./usr/src/sys/../../../escape", b"out")])
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(mirror)), tmp_path / "cache")
    assert err.value.failure.reason == "integrity" and "lies outside the set" in err.value.failure.message
    _no_half_kit(tmp_path / "cache", RELEASE)
    assert not (tmp_path / "escape").exists() and not (tmp_path / "cache" / "escape").exists()
    # Members outside the prefixes the kit takes are left in the archive, not unpacked.
    make_set(tmp_path / "m2", RELEASE, base=[("./boot/loader_simp.efi", b"MZ"), ("./etc/passwd", b"root")])
    kit = release_kit(ReleaseSpec(RELEASE, str(tmp_path / "m2")), tmp_path / "cache")
    # The kernel's other modules stay in the archive: only the kernel and its cryptodev.ko are taken.
    assert sorted(p.name for p in (kit / "boot").iterdir()) == ["cryptodev-release-crypto.ko",
                                                                "kernel-release-crypto", "loader_simp.efi"]
    assert not (kit / "etc").exists()


def test_a_manifest_that_differs_from_its_pin(mirror: Path, tmp_path: Path) -> None:
    manifest = mirror / "releases" / "amd64" / RELEASE / "MANIFEST"
    good = hashlib.sha256(manifest.read_bytes()).hexdigest()
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\nfreebsd:\n  release: {RELEASE}\n"
                       f"  mirror: {mirror}\n  manifest_sha256: {good}\n", "r.yml")
    chosen = fkit.kits(cfg, ("debug", "release"))
    assert set(chosen.found) == {"release"} and chosen.not_run == {}
    assert chosen.notes == ["debug kernel: not covered (no freebsd.snapshot configured)"]
    lying = tmp_path / "lying"
    make_set(lying, RELEASE, kernel=[("./boot/kernel/kernel", b"\x7fELF another kernel")])
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(lying), manifest_sha256=good), tmp_path / "cache2")
    f = err.value.failure
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "integrity" and good in f.message
    _no_half_kit(tmp_path / "cache2", RELEASE)
    with pytest.raises(ConfigError, match=r"freebsd\.manifest_sha256: pins a release's MANIFEST"):
        parse_config(BASE + f"freebsd:\n  snapshot: {SNAPSHOT}\n  manifest_sha256: {good}\n", "r.yml")


def test_no_inputs_is_target_unavailable_naming_the_key(tmp_path: Path) -> None:
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\n", "r.yml")
    with pytest.raises(StageError) as err:
        fq.check_worker(cfg)
    f = err.value.failure
    assert f.reason == TARGET_UNAVAILABLE and f.category is FailureCategory.INFRASTRUCTURE
    assert "freebsd.release" in f.message
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\nfreebsd:\n  release: {RELEASE}\n"
                       f"  snapshot: {SNAPSHOT}\n  mirror: {tmp_path / 'nowhere'}\n", "r.yml")
    with pytest.raises(StageError) as err:
        fq.check_worker(cfg)
    assert err.value.failure.message == "no FreeBSD release set reachable (freebsd.mirror)"
    assert err.value.failure.reason == TARGET_UNAVAILABLE


def test_a_source_tree_with_a_kernel_is_a_kit(tmp_path: Path) -> None:
    src = tmp_path / "usr-src"
    for name, data in src_members("14.3"):
        path = src / name.removeprefix("./usr/src/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    kernel, loader = tmp_path / "kernel", tmp_path / "loader_simp.efi"
    kernel.write_bytes(b"\x7fELF built kernel")
    loader.write_bytes(b"MZ")
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\nfreebsd: {{src: {src}, kernel: {kernel}, "
                       f"loader: {loader}}}\n", "r.yml")
    chosen = fkit.kits(cfg, ("debug", "release"))
    kit = chosen.found["release"]
    assert kit.missing() == [] and kit.triple.endswith("freebsd14.3")
    assert kit.kernel("release-crypto").read_bytes() == kernel.read_bytes()
    assert chosen.notes == ["debug kernel: not covered (freebsd.src gives the release kernel only)"]
    with pytest.raises(ConfigError, match="needs the kernel built from it"):
        parse_config(BASE + f"freebsd: {{src: {src}}}\n", "r.yml")


def test_bad_manifest_and_config(tmp_path: Path) -> None:
    with pytest.raises(StageError, match="no checksum for src.txz"):
        parse_manifest(f"base.txz\t{'a' * 64}\t3\tbase\t\"x\"\ton\nkernel.txz\t{'b' * 64}\t1\tk\t\"\"\ton\n",
                       "MANIFEST")
    with pytest.raises(ConfigError, match=r"^r\.yml:4: freebsd\.release: '15\.0' is not a FreeBSD release"):
        parse_config(BASE + "freebsd:\n  release: '15.0'\n", "r.yml")
    with pytest.raises(ConfigError, match=r"freebsd\.snapshot: '16\.0-RELEASE' is not a FreeBSD snapshot"):
        parse_config(BASE + "freebsd:\n  snapshot: 16.0-RELEASE\n", "r.yml")
    kit = tmp_path / "kit"
    kit.mkdir()
    with pytest.raises(ConfigError, match="give one of kit, src, or release/snapshot"):
        parse_config(BASE + f"freebsd: {{kit: {kit}, release: {RELEASE}}}\n", "r.yml")


def test_the_synthetic_sets_are_what_their_manifest_says(tmp_path: Path) -> None:
    where = make_set(tmp_path, RELEASE)
    sums = parse_manifest((where / "MANIFEST").read_text(), "MANIFEST")
    assert all(hashlib.sha256((where / n).read_bytes()).hexdigest() == d for n, d in sums.items())
    assert txz(tmp_path / "one.txz", [("a", b"b")]) == 1
