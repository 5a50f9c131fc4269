"""The linux-kmod-qemu target's prerequisites: the kernel image and its headers (Debian's package
names, or the ``kernel_version`` key), QEMU, a static busybox, cpio, the compiler with a static libc
and make, each one line; the configure stage fails on the first missing one with that line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import harness as linuxkm
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu import target as linux_target

CONFIG = ("targets: {{linux-kmod-qemu: {{kernel_version: {version}}}}}\n"
          "variants: {{v: {{targets: [linux-kmod-qemu]}}}}\n")
TARGET = linux_target.TARGET


def _boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, images: list[str], headers: list[str]) -> Path:
    boot, src = tmp_path / "boot", tmp_path / "src"
    boot.mkdir()
    for version in images:
        (boot / f"vmlinuz-{version}").write_bytes(b"kernel")
    for version in headers:
        (src / f"linux-headers-{version}").mkdir(parents=True)
        (src / f"linux-headers-{version}" / "Makefile").write_text("# kbuild\n")
    monkeypatch.setattr(linuxkm, "HEADER_DIRS", (src,))
    return boot


def test_no_kernel_at_all_names_debians_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boot = _boot(tmp_path, monkeypatch, [], [])
    image, headers = linuxkm.kernel_prerequisites(None, boot)
    assert image.line() == f"Linux kernel image: no {boot}/vmlinuz-*; fix: install linux-image-amd64"
    assert headers.line() == "Linux kernel headers: no kernel installed; fix: install linux-headers-amd64"


def test_the_newest_kernel_without_headers_names_its_own_headers_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    boot = _boot(tmp_path, monkeypatch, ["6.1.0-9-amd64", "6.1.0-10-amd64"], [])
    image, headers = linuxkm.kernel_prerequisites(None, boot)
    assert image.ok and image.detail == str(boot / "vmlinuz-6.1.0-10-amd64")
    assert headers.line() == ("Linux kernel headers: no /usr/src/linux-headers-6.1.0-10-amd64; "
                              "fix: install linux-headers-6.1.0-10-amd64")


def test_without_a_version_the_kernel_is_the_newest_with_headers(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    boot = _boot(tmp_path, monkeypatch, ["6.1.0-9-amd64", "6.1.0-10-amd64"], ["6.1.0-9-amd64"])
    image, headers = linuxkm.kernel_prerequisites(None, boot)
    assert image.ok and headers.ok and headers.detail.endswith("linux-headers-6.1.0-9-amd64")


def test_a_configured_version_that_is_not_installed_names_the_key(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    boot = _boot(tmp_path, monkeypatch, ["6.1.0-10-amd64"], ["6.1.0-10-amd64"])
    image, headers = linuxkm.kernel_prerequisites("6.12.0-1-amd64", boot)
    assert image.line() == (f"Linux kernel image: no {boot}/vmlinuz-6.12.0-1-amd64 "
                            "(installed: 6.1.0-10-amd64); fix: install linux-image-6.12.0-1-amd64, or set "
                            "targets.linux-kmod-qemu.kernel_version to an installed one")
    assert headers.fix == "install linux-headers-6.12.0-1-amd64"


def test_this_workers_list() -> None:
    cfg = parse_config(CONFIG.format(version="null"))
    names = [p.name for p in TARGET.prerequisites(cfg)]
    assert names[:7] == ["Linux kernel image", "Linux kernel headers", "qemu-system-x86_64", "static busybox",
                         "cpio (the initramfs)", "C compiler", "static libc"]
    assert "make" in names


def test_configure_on_a_worker_with_a_dynamic_busybox_names_busybox_static(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel and its headers are this machine's; the busybox is one that cannot run as /init.
    cfg = parse_config(CONFIG.format(version="null"))
    dynamic = Path("/bin/sh").resolve()
    monkeypatch.setenv("BUSYBOX", str(dynamic))
    with pytest.raises(StageError) as err:
        TARGET.check_worker(cfg)
    f = err.value.failure
    assert (f.stage, f.category, f.reason) == ("configure", FailureCategory.INFRASTRUCTURE, "worker-setup")
    assert f.message == (f"static busybox: {dynamic} is dynamically linked; "
                         "fix: install busybox-static (or set BUSYBOX to a static busybox)")


def test_configure_on_a_worker_without_qemu_names_the_package(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcc", "make", "cpio"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(StageError) as err:
        TARGET.check_worker(parse_config(CONFIG.format(version="null")))
    assert err.value.failure.message == "qemu-system-x86_64: not found on PATH; fix: install qemu-system-x86"
    assert err.value.failure.reason == "worker-setup"
