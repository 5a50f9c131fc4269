"""FreeBSD release sets from a mirror that may lie: exact member names, https or a local directory
only, and a MANIFEST pinned in the config."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import kit as fkit
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.options import freebsd_options
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.release_set import ReleaseSpec, release_kit

RELEASE = "15.0-RELEASE"
KERNEL = b"\x7fELF the GENERIC kernel"


def _txz(path: Path, members: list[tuple[str, bytes]]) -> None:
    with tarfile.open(path, "w:xz", preset=0) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def make_mirror(root: Path, kernel_members: list[tuple[str, bytes]]) -> Path:
    rel = root / "releases" / "amd64" / RELEASE
    rel.mkdir(parents=True)
    _txz(rel / "kernel.txz", kernel_members)
    _txz(rel / "base.txz", [("./boot/loader_simp.efi", b"MZ loader")])
    _txz(rel / "src.txz", [("./usr/src/sys/conf/kmod.mk", b"# kmod.mk"),
                           ("./usr/src/share/mk/bsd.kmod.mk", b"# bsd.kmod.mk")])
    (rel / "SYNTHETIC").write_text("not bootable\n")
    lines = [f"{n}\t{hashlib.sha256((rel / n).read_bytes()).hexdigest()}\t1\t{n[:-4]}\t\"x\"\ton"
             for n in ("base.txz", "kernel.txz", "src.txz")]
    (rel / "MANIFEST").write_text("\n".join(lines) + "\n")
    return root


def manifest_sha(mirror: Path) -> str:
    return hashlib.sha256((mirror / "releases" / "amd64" / RELEASE / "MANIFEST").read_bytes()).hexdigest()


def test_a_member_whose_name_only_begins_with_the_kernels_does_not_replace_it(tmp_path: Path) -> None:
    mirror = make_mirror(tmp_path / "m", [("./boot/kernel/kernel", KERNEL),
                                          ("./boot/kernel/kernel.symbols", b"not the kernel")])
    kit = release_kit(ReleaseSpec(RELEASE, str(mirror)), tmp_path / "cache")
    assert (kit / "boot" / "kernel-release-crypto").read_bytes() == KERNEL


def test_a_second_member_of_the_kernels_name_is_refused(tmp_path: Path) -> None:
    mirror = make_mirror(tmp_path / "m", [("./boot/kernel/kernel", KERNEL), ("boot/kernel/kernel", b"evil")])
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(mirror)), tmp_path / "cache")
    f = err.value.failure
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "integrity"
    assert "appears twice" in f.message


@pytest.mark.parametrize("mirror", ["http://mirror.example/releases", "ftp://ftp.freebsd.org/pub"])
def test_a_mirror_that_is_not_https_or_local_is_refused(tmp_path: Path, mirror: str) -> None:
    with pytest.raises(StageError, match="not an https:// URL or a local directory") as err:
        release_kit(ReleaseSpec(RELEASE, mirror), tmp_path / "cache")
    assert err.value.failure.category is FailureCategory.REAL
    base = ("targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
            f"freebsd:\n  release: {RELEASE}\n")
    with pytest.raises(ConfigError, match=r"^r\.yml:5: freebsd\.mirror: .*not an https:// URL"):
        parse_config(base + f"  mirror: {mirror}\n", "r.yml")
    assert parse_config(base + "  mirror: https://download.freebsd.org/releases\n", "r.yml")


def test_a_pinned_manifest_is_insisted_on(tmp_path: Path) -> None:
    mirror = make_mirror(tmp_path / "m", [("./boot/kernel/kernel", KERNEL)])
    good = manifest_sha(mirror)
    base = ("targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
            f"cache_dir: {tmp_path / 'cache'}\nfreebsd:\n  release: {RELEASE}\n  mirror: {mirror}\n")
    cfg = parse_config(base + f"  manifest_sha256: {good}\n", "r.yml")
    assert freebsd_options(cfg).freebsd.manifest_sha256 == good
    assert fkit.find_kit(cfg).root.is_dir()
    # The mirror now serves other sets with a MANIFEST that agrees with them: the pin does not.
    lying = make_mirror(tmp_path / "lying", [("./boot/kernel/kernel", b"\x7fELF another kernel")])
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(lying), manifest_sha256=good), tmp_path / "cache2")
    f = err.value.failure
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "integrity"
    assert good in f.message and manifest_sha(lying) in f.message
    # A cached kit from another MANIFEST is not taken for the pinned one either.
    release_kit(ReleaseSpec(RELEASE, str(lying)), tmp_path / "cache3")
    with pytest.raises(StageError, match="freebsd.manifest_sha256 pins"):
        release_kit(ReleaseSpec(RELEASE, str(lying), manifest_sha256=good), tmp_path / "cache3")
    with pytest.raises(ConfigError, match=r"^r\.yml:7: freebsd\.manifest_sha256: must be the MANIFEST"):
        parse_config(base + "  manifest_sha256: abc\n", "r.yml")
