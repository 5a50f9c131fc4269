"""The release-set path of freebsd-kmod-qemu against a fake local mirror built from the kit.

Same archive layout as a FreeBSD release (``<mirror>/amd64/15.0-RELEASE/{kernel,base,src}.txz``
with ``./boot/kernel/kernel``, ``./boot/loader_simp.efi``, ``./usr/src/...``) and the same
``MANIFEST`` format (set, sha256, file count, name, description, default; tab-separated).
"""

from __future__ import annotations

import hashlib
import io
import lzma
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import SHARED

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline import freebsd_qemu as fq
from buildbot_bsdkm.pipeline.errors import StageError
from buildbot_bsdkm.pipeline.freebsd_release_set import ReleaseSpec, parse_manifest, release_kit

KIT = SHARED / "freebsd"
RELEASE = "15.0-RELEASE"


def _txz(path: Path, members: dict[str, Path | bytes]) -> int:
    with tarfile.open(path, "w:xz", preset=0) as tar:
        for name, src in members.items():
            if isinstance(src, Path):
                tar.add(src, arcname=name)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(src)
                tar.addfile(info, io.BytesIO(src))
    with tarfile.open(path, "r:xz") as tar:
        return sum(1 for m in tar if m.isfile())


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mirror")
    rel = root / "amd64" / RELEASE
    rel.mkdir(parents=True)
    kernel = lzma.decompress((KIT / "boot" / "kernel-release-crypto.xz").read_bytes())
    sysroot = KIT / "sysroot"
    counts = {
        "kernel.txz": _txz(rel / "kernel.txz", {"./boot/kernel/kernel": kernel}),
        "base.txz": _txz(rel / "base.txz", {"./boot/loader_simp.efi": KIT / "boot" / "loader_simp.efi",
                                            "./etc/rc": b"#!/bin/sh\n", "../escape": b"not for the kit"}),
        "src.txz": _txz(rel / "src.txz", {"./usr/src/sys": sysroot / "sys",
                                          "./usr/src/share/mk": sysroot / "share" / "mk",
                                          "./usr/src/contrib": sysroot / "contrib"}),
    }
    desc = {"base.txz": "Base system (MANDATORY)", "kernel.txz": "Kernel (MANDATORY)",
            "src.txz": "System source tree"}
    lines = []
    for name in ("base.txz", "kernel.txz", "src.txz"):
        digest = hashlib.sha256((rel / name).read_bytes()).hexdigest()
        default = "off" if name == "src.txz" else "on"
        lines.append(f"{name}\t{digest}\t{counts[name]}\t{name[:-4]}\t\"{desc[name]}\"\t{default}")
    (rel / "MANIFEST").write_text("\n".join(lines) + "\n")
    return root


def test_release_sets_become_a_kit(mirror: Path, tmp_path: Path) -> None:
    kit_root = release_kit(ReleaseSpec(RELEASE, str(mirror)), tmp_path / "cache")
    kit = fq.Kit(kit_root)
    assert kit.missing() == []
    assert kit.kernel("release-crypto").read_bytes() == lzma.decompress(
        (KIT / "boot" / "kernel-release-crypto.xz").read_bytes())
    assert (kit.sys_dir / "conf" / "kmod.mk").is_file() and (kit.share_mk / "bsd.kmod.mk").is_file()
    assert (kit_root / "sysroot" / "contrib" / "llvm-project" / "clang" / "lib" / "Headers").is_dir()
    assert kit.xargs.name == "bsdxargs" and "kmod" in kit.xargs.parts  # ours: a release has none
    assert not (kit_root / "etc").exists() and not (kit_root.parent / "escape").exists()
    assert fq.cached_kernel(kit, "release-crypto", tmp_path / "cache") == kit.kernel("release-crypto")
    boots, notes = fq.boot_plan(kit, ("debug", "release"), crypto=False)
    assert [(b.kind, b.kernel, b.mode) for b in boots] == [("release", "release-crypto", "kldload")]
    assert notes == ["debug kernel: not covered (the kit has no kernel-debug.xz)"]


def test_release_kit_is_cached(mirror: Path, tmp_path: Path) -> None:
    copy = tmp_path / "mirror"
    shutil.copytree(mirror, copy)
    first = release_kit(ReleaseSpec(RELEASE, str(copy)), tmp_path / "cache")
    shutil.rmtree(copy)  # no mirror any more: the cache must do
    assert release_kit(ReleaseSpec(RELEASE, str(copy)), tmp_path / "cache") == first


def test_a_set_that_does_not_match_manifest_is_refused(mirror: Path, tmp_path: Path) -> None:
    bad = tmp_path / "mirror"
    shutil.copytree(mirror, bad)
    with open(bad / "amd64" / RELEASE / "kernel.txz", "ab") as fh:
        fh.write(b"tampered")
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(bad)), tmp_path / "cache")
    f = err.value.failure
    assert f.category is FailureCategory.REAL and f.reason == "integrity"
    assert "checksum mismatch for" in f.message
    assert "kernel.txz" in f.message
    assert not (tmp_path / "cache" / "freebsd-release" / f"{RELEASE}-amd64" / "kit").exists()


def test_unreachable_mirror_and_bad_manifest(tmp_path: Path) -> None:
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(tmp_path / "none")), tmp_path / "cache")
    assert err.value.failure.reason == "network" and "MANIFEST" in err.value.failure.message
    with pytest.raises(StageError, match="no checksum for src.txz"):
        parse_manifest(f"base.txz\t{'a' * 64}\t3\tbase\t\"x\"\ton\nkernel.txz\t{'b' * 64}\t1\tk\t\"\"\ton\n",
                       "MANIFEST")


def test_config_release_section(mirror: Path, tmp_path: Path) -> None:
    base = ("targets: {freebsd-kmod-qemu: null}\nvariants: {p: {targets: [freebsd-kmod-qemu]}}\n"
            f"cache_dir: {tmp_path / 'cache'}\n")
    cfg = parse_config(base + f"freebsd: {{release: {RELEASE}, mirror: {mirror}}}\n", "r.yml")
    assert (cfg.freebsd.release, cfg.freebsd.arch) == (RELEASE, "amd64")
    assert fq.find_kit(cfg).root == tmp_path / "cache" / "freebsd-release" / f"{RELEASE}-amd64" / "kit"
    with pytest.raises(ConfigError, match=r"^r\.yml:5: freebsd\.release: '15\.0' is not a FreeBSD release"):
        parse_config(base + "freebsd:\n  release: '15.0'\n", "r.yml")
    with pytest.raises(ConfigError, match="either kit or release"):
        parse_config(base + f"freebsd: {{kit: {KIT}, release: {RELEASE}}}\n", "r.yml")
