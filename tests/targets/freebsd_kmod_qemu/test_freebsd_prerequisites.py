"""The freebsd-kmod-qemu target's prerequisites: where each configured kernel comes from (a set in the
cache or its mirror answering a short request, a kit, a source tree), the cross toolchain, bmake,
gawk, QEMU with OVMF and the FAT tools, one line each with the package or key that fixes it.

The configure stage fetches the kernels first, so a machine that can have none reports the runs not
run, as before; then it fails on the first missing tool with that tool's line."""

from __future__ import annotations

import http.server
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from freebsd_sets import RELEASE, SNAPSHOT, make_kit, make_set, sets_for_tests
from loopback_http import serving

from buildbot_bsdkm.config.bsdkm_yml import Config, parse_config
from buildbot_bsdkm.contract import TARGET_UNAVAILABLE
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import worker as fworker
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.release_set import ReleaseSpec, release_kit

BASE = "targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"


def config(tmp_path: Path, freebsd: str) -> Config:
    return parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\nfreebsd: {freebsd}\n", "r.yml")


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sets_for_tests(tmp_path_factory.mktemp("sets"))


def test_nothing_configured_names_the_keys(tmp_path: Path) -> None:
    cfg = parse_config(BASE + f"cache_dir: {tmp_path / 'cache'}\n", "r.yml")
    [line] = fworker.kernel_prerequisites(cfg)
    assert line.line() == ("FreeBSD kernels: none configured; fix: set freebsd.release and freebsd.snapshot "
                           "(or freebsd.src and freebsd.kernel, or freebsd.kit) in bsdkm.yml")
    assert line.required


def test_sets_on_a_local_mirror_answer(mirror: Path, tmp_path: Path) -> None:
    cfg = config(tmp_path, f"{{release: {RELEASE}, snapshot: {SNAPSHOT}, mirror: {mirror}}}")
    debug, release = fworker.kernel_prerequisites(cfg)
    assert debug.ok and debug.name == f"debug kernel (freebsd.snapshot: {SNAPSHOT})"
    assert debug.detail == f"{(mirror / 'snapshots/amd64' / SNAPSHOT / 'MANIFEST').as_uri()} answers"
    assert release.ok and release.name == f"release kernel (freebsd.release: {RELEASE})"


def test_a_set_the_mirror_lacks_names_its_directory_and_key(tmp_path: Path) -> None:
    only_release = tmp_path / "mirror"
    make_set(only_release, RELEASE)
    cfg = config(tmp_path, f"{{release: {RELEASE}, snapshot: {SNAPSHOT}, mirror: {only_release}}}")
    debug, release = fworker.kernel_prerequisites(cfg)
    assert release.ok and debug.required and not debug.ok
    manifest = only_release / "snapshots/amd64" / SNAPSHOT / "MANIFEST"
    assert debug.line() == (f"debug kernel (freebsd.snapshot: {SNAPSHOT}): no {manifest}; fix: set "
                            "freebsd.mirror to a mirror this worker reaches or a directory holding "
                            f"snapshots/amd64/{SNAPSHOT}/ (its MANIFEST and sets); or check freebsd.snapshot")


def test_a_kernel_left_unconfigured_is_an_optional_line(mirror: Path, tmp_path: Path) -> None:
    cfg = config(tmp_path, f"{{release: {RELEASE}, mirror: {mirror}}}")
    debug, release = fworker.kernel_prerequisites(cfg)
    assert release.ok
    assert (debug.ok, debug.required, debug.line()) == (
        False, False, "debug kernel (freebsd.snapshot): not configured: not run; fix: set freebsd.snapshot")


def test_cached_sets_need_no_mirror(mirror: Path, tmp_path: Path) -> None:
    copy = tmp_path / "mirror"
    shutil.copytree(mirror, copy)
    release_kit(ReleaseSpec(RELEASE, str(copy)), tmp_path / "cache")
    shutil.rmtree(copy)
    cfg = config(tmp_path, f"{{release: {RELEASE}, mirror: {copy}}}")
    release = fworker.kernel_prerequisites(cfg)[-1]
    assert release.ok and release.detail.startswith("sets cached in ")


def test_a_plain_http_mirror_is_refused_by_its_key(tmp_path: Path) -> None:
    line = fworker.set_prerequisite("release", "freebsd.release", ReleaseSpec(RELEASE, "http://mirror.example"),
                                    tmp_path, 1.0)
    assert not line.ok and line.detail.startswith("freebsd.mirror: 'http://mirror.example' is not an https://")


def test_a_kit_or_a_source_tree_says_what_it_lacks(tmp_path: Path) -> None:
    kit = make_kit(tmp_path / "kit")
    cfg = config(tmp_path, f"{{kit: {kit}}}")
    assert [p.ok for p in fworker.kernel_prerequisites(cfg)] == [True]
    (kit / "boot" / "loader_simp.efi").unlink()
    [line] = fworker.kernel_prerequisites(cfg)
    assert not line.ok and line.detail == f"missing {kit / 'boot' / 'loader_simp.efi'}"
    assert line.fix.startswith("set freebsd.kit")
    src, kernel = tmp_path / "src", tmp_path / "kernel"
    (src / "sys" / "conf").mkdir(parents=True)
    (src / "sys" / "conf" / "kmod.mk").write_text("# kmod.mk\n")
    kernel.write_bytes(b"\x7fELF")
    efi = tmp_path / "loader_simp.efi"
    efi.write_bytes(b"MZ")
    cfg = config(tmp_path, f"{{src: {src}, kernel: {kernel}, loader: {efi}}}")
    efi.unlink()  # gone since the config was read
    tree, built, loader = fworker.kernel_prerequisites(cfg)
    assert not tree.ok and tree.detail == f"no {src / 'share/mk/bsd.kmod.mk'}"
    assert built.ok
    assert loader.line() == f"FreeBSD freebsd.loader: no {efi}; fix: set freebsd.loader"


# --------------------------------------------------------------------------- the mirror, asked briefly


class _Answers(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        found = self.path.endswith(f"/{RELEASE}/MANIFEST") or self.path.endswith("/amd64/")
        body = b"kernel.txz\t0123\t1\tkernel\t\"Kernel\"\ton\n" if found else b"not here\n"
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def http_mirror() -> Iterator[str]:
    with serving(_Answers) as url:
        yield url


def test_the_mirror_is_asked_for_the_sets_manifest(http_mirror: str) -> None:
    url, why = fworker.mirror_answer(ReleaseSpec(RELEASE, http_mirror), 10.0)
    assert (url, why) == (f"{http_mirror}/releases/amd64/{RELEASE}/MANIFEST", None)
    url, why = fworker.mirror_answer(ReleaseSpec("17.0-CURRENT", http_mirror), 10.0)
    assert why == f"HTTP 404 from {http_mirror}/snapshots/amd64/17.0-CURRENT/MANIFEST"
    # A snapshot named without its version is looked up in the snapshots' directory.
    url, why = fworker.mirror_answer(ReleaseSpec("CURRENT", http_mirror), 10.0)
    assert (url, why) == (f"{http_mirror}/snapshots/amd64/", None)


def test_a_mirror_that_never_answers_is_given_up_on_after_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        _, why = fworker.mirror_answer(ReleaseSpec(RELEASE, url), 0.5)
    assert why is not None and why.startswith(f"cannot reach {url}/releases/amd64/{RELEASE}/MANIFEST "
                                              "(within 0.5 s): ")


# --------------------------------------------------------------------------- the configure stage


def test_configure_without_bmake_names_the_package(mirror: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gawk", "qemu-system-x86_64", "mkfs.vfat", "mcopy"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"needs {tool} on this machine (scripts/bootstrap.sh installs it)")
        (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    cfg = config(tmp_path, f"{{release: {RELEASE}, snapshot: {SNAPSHOT}, mirror: {mirror}}}")
    try:
        fworker.find_toolchain()
    except StageError:
        pytest.skip("needs Debian's clang-19 lld-19 llvm-19 (scripts/bootstrap.sh installs them)")
    if not fboot.OVMF_CODE.is_file():
        pytest.skip("needs Debian's ovmf")
    with pytest.raises(StageError) as err:
        fq.TARGET.check_worker(cfg)
    f = err.value.failure
    assert (f.stage, f.category, f.reason) == ("configure", FailureCategory.INFRASTRUCTURE, "worker-setup")
    assert f.message == "bmake: not found on PATH; fix: install bmake"


def test_no_kernel_to_be_had_is_still_not_run_whatever_else_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    cfg = config(tmp_path, f"{{release: {RELEASE}, snapshot: {SNAPSHOT}, mirror: {tmp_path / 'nowhere'}}}")
    with pytest.raises(StageError) as err:
        fq.TARGET.check_worker(cfg)
    assert err.value.failure.reason == TARGET_UNAVAILABLE
    assert err.value.failure.message == "no FreeBSD release set reachable (freebsd.mirror)"


def test_a_cached_current_snapshot_serves_while_the_mirror_cannot_list(mirror: Path, tmp_path: Path) -> None:
    """``snapshot: CURRENT`` with the mirror gone: the run takes the newest cached CURRENT, and so
    does the check-up, rather than calling the kernel missing."""
    copy = tmp_path / "mirror"
    shutil.copytree(mirror, copy)
    release_kit(ReleaseSpec(SNAPSHOT, str(copy)), tmp_path / "cache")
    shutil.rmtree(copy)
    cfg = config(tmp_path, f"{{snapshot: CURRENT, mirror: {copy}}}")
    (debug,) = [p for p in fworker.kernel_prerequisites(cfg) if p.name.startswith("debug kernel")]
    assert debug.ok and debug.detail.startswith("sets cached in "), debug
