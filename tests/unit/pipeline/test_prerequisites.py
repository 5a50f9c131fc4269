"""A target's prerequisites: one line each (name, what was found, the fix), the configure stage failing on
the first missing required one as the infrastructure failure ``worker-setup`` with that line, and the
shared checks (a command on PATH, the C compiler, autotools by source, Valgrind by policy, a static
busybox) found where the stages look."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import Config, parse_config
from buildbot_bsdkm.model import FailureCategory
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets import all_targets
from buildbot_bsdkm.pipeline.targets import prerequisites as needs
from buildbot_bsdkm.pipeline.targets.base import Prerequisite, Target, require

CONFIG = "targets: {userspace: null}\nvariants: {v: {targets: [userspace]}}\n"


def path_of(tmp_path: Path, *tools: str) -> str:
    """A PATH holding only ``tools`` (links to this machine's own)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        found = shutil.which(tool)
        assert found, f"{tool} is needed on this machine for the test"
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def config(text: str = CONFIG, where: Path | None = None) -> Config:
    return parse_config(text, str(where / "bsdkm.yml") if where else "bsdkm.yml", where)


def test_a_line_is_name_found_and_fix() -> None:
    assert Prerequisite("make", False, "not found on PATH", "install make").line() == \
        "make: not found on PATH; fix: install make"
    assert Prerequisite("make", True, "/usr/bin/make").line() == "make: /usr/bin/make"


def test_require_fails_on_the_first_missing_required_one_only() -> None:
    here = Prerequisite("a", True, "here")
    optional = Prerequisite("b", False, "gone", "install b", required=False)
    require([here, optional])
    with pytest.raises(StageError) as err:
        require([here, optional, Prerequisite("c", False, "not found on PATH", "install c-tools"),
                 Prerequisite("d", False, "gone", "install d")])
    f = err.value.failure
    assert (f.stage, f.category, f.reason) == ("configure", FailureCategory.INFRASTRUCTURE, "worker-setup")
    assert f.message == "c: not found on PATH; fix: install c-tools"


def test_the_base_check_worker_is_require_over_the_targets_own_list() -> None:
    class Needy(Target):
        def prerequisites(self, config: Config) -> list[Prerequisite]:
            return [Prerequisite("gawk", False, "not found on PATH", "install gawk")]

    with pytest.raises(StageError, match=r"^gawk: not found on PATH; fix: install gawk$"):
        Needy().check_worker(config())


def test_a_command_is_looked_for_on_the_workers_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path_of(tmp_path, "cpio"))
    assert needs.command("cpio", "cpio", what="the initramfs") == \
        Prerequisite("cpio (the initramfs)", True, str(tmp_path / "bin" / "cpio"))
    missing = needs.command("bmake", "bmake")
    assert (missing.ok, missing.required) == (False, True)
    assert missing.line() == "bmake: not found on PATH; fix: install bmake"


def test_the_c_compiler_is_ccs_else_gcc_else_cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path_of(tmp_path, "gcc"))
    monkeypatch.setenv("CC", "ccache gcc -m64")
    assert needs.c_compiler().ok and "($CC)" in needs.c_compiler().detail
    monkeypatch.setenv("CC", "clang-77")
    assert needs.c_compiler().line() == "C compiler: $CC names clang-77, which is not on PATH; " \
                                        "fix: install clang-77 or unset CC"
    monkeypatch.delenv("CC")
    assert needs.c_compiler().ok
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert needs.c_compiler().line() == "C compiler: neither gcc nor cc on PATH; fix: install gcc"


def test_autotools_are_needed_by_a_source_without_configure(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", path_of(tmp_path, "autoconf"))
    debian = needs.autotools(config())  # the default source: Debian's tarball, no configure
    assert [(n.name, n.ok, n.required) for n in debian] == [
        ("autoconf (autogen.sh)", True, True), ("automake (autogen.sh)", False, True),
        ("libtoolize (autogen.sh)", False, True)]
    assert debian[2].fix == "install libtool"
    tarball = needs.autotools(config(CONFIG + "source: {tarball: {url: 'https://example.org/w.tar.gz'}}\n"))
    assert not any(n.required for n in tarball)
    tree = tmp_path / "wolfssl"
    tree.mkdir()
    local = CONFIG + "source: {local: wolfssl}\n"
    assert len(needs.autotools(config(local, tmp_path))) == 3
    (tree / "configure").write_text("#!/bin/sh\n")
    assert needs.autotools(config(local, tmp_path)) == []


def test_valgrind_only_where_the_policy_counts_and_never_required(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    policy = tmp_path / "counting.yml"
    policy.write_text("instructions:\n  items: {AES-128-GCM-enc: 1024}\n")
    counting = config(CONFIG + f"policy: {policy}\n")
    proxy = tmp_path / "proxy.yml"
    proxy.write_text("instructions:\n  items: {AES-128-GCM-enc: 1024}\n  kernel_proxy: true\n")
    quiet = tmp_path / "quiet.yml"
    quiet.write_text("instructions:\n  items: {}\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    [line] = needs.valgrind(counting, kernel=False)
    assert not line.ok and not line.required
    assert line.line() == ("valgrind (instruction counts): not found on PATH: every counted item is reported "
                           "not counted; fix: install valgrind")
    assert needs.valgrind(counting, kernel=True) == []  # a kernel target counts in user space only by proxy
    assert len(needs.valgrind(config(CONFIG + f"policy: {proxy}\n"), kernel=True)) == 1
    assert needs.valgrind(config(CONFIG + f"policy: {quiet}\n"), kernel=False) == []


def test_a_busybox_for_the_initramfs_must_be_static(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dynamic = Path("/bin/sh").resolve()  # Debian's dash, linked against libc
    assert needs.dynamic_loader(dynamic) is True
    monkeypatch.setenv("BUSYBOX", str(dynamic))
    line = needs.static_busybox()
    assert not line.ok and line.line() == (f"static busybox: {dynamic} is dynamically linked; "
                                           "fix: install busybox-static (or set BUSYBOX to a static busybox)")
    script = tmp_path / "busybox"
    script.write_text("#!/bin/sh\n")
    monkeypatch.setenv("BUSYBOX", str(script))
    assert needs.static_busybox().detail == f"{script} is no 64-bit ELF program"
    monkeypatch.setenv("BUSYBOX", str(tmp_path / "none"))
    assert needs.static_busybox().line() == f"static busybox: {tmp_path / 'none'} not found; " \
                                            "fix: install busybox-static"


def test_debians_busybox_static_is_static() -> None:
    busybox = Path("/bin/busybox")
    if not busybox.is_file():
        pytest.skip("needs Debian's busybox-static at /bin/busybox")
    assert needs.dynamic_loader(busybox) is False


def test_every_line_of_every_target_names_a_fix_when_missing(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker with nothing on PATH: every missing line still says what to install or set.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("BSDKM_LLVM_BIN", str(tmp_path / "no-llvm"))
    cfg = config("targets: {userspace: null, linux-kmod-qemu: null, freebsd-kmod-qemu: null}\n"
                 "variants: {v: {targets: [userspace]}}\n"
                 f"cache_dir: {tmp_path / 'cache'}\n"
                 f"freebsd: {{release: 15.0-RELEASE, mirror: {tmp_path / 'no-mirror'}}}\n")
    for name in ("userspace", "linux-kmod-qemu", "freebsd-kmod-qemu"):
        lines = all_targets()[name].prerequisites(cfg)
        assert lines, name
        for line in lines:
            assert line.ok or line.fix.startswith(("install ", "set ")), (name, line)
