"""Each target's options are a dataclass read with the config: a bad one fails ``bsdkm-ci run`` before
anything is fetched, naming its file, line and key.

Before, targets read a free dict (``.get()``) when a stage needed a key: an unknown key was taken,
a wrong type failed at configure or load (``kernels:`` as a "load" failure), after the fetch, with no
line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.pipeline.targets import all_targets
from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import FreeBSDKmodOptions
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.options import FreeBSDQemuOptions
from buildbot_bsdkm.pipeline.targets.linux_kmod_qemu.options import LinuxQemuOptions

CONFIG = """\
source: {{local: {source}}}
cache_dir: {cache}
targets:
  {target}:
    flags: []
{options}variants:
  v: {{flags: [], targets: [{target}]}}
"""

# (target, its options as written on line 6 on, the key named, words of the problem)
BAD = [
    ("userspace", "    cpu: max\n", "targets.userspace.cpu", "unknown key (allowed: flags, make_args"),
    ("userspace", "    bench_cflags: {a: 1}\n", "targets.userspace.bench_cflags", "list of strings"),
    ("linux-kmod-qemu", "    kernel_version: 6\n", "targets.linux-kmod-qemu.kernel_version",
     "must be a non-empty string, not 6"),
    ("linux-kmod-qemu", "    kernels: [debug]\n", "targets.linux-kmod-qemu.kernels", "unknown key"),
    ("freebsd-kmod", "    kernel_source: src/sys\n", "targets.freebsd-kmod.kernel_source",
     "must be an absolute path"),
    ("freebsd-kmod", "    kmod_dir: [a, b]\n", "targets.freebsd-kmod.kmod_dir", "must be a single value"),
    ("freebsd-kmod", "    kernls: [debug]\n", "targets.freebsd-kmod.kernls", "unknown key"),
    ("freebsd-kmod-qemu", "    kernels: [debug, fast]\n", "targets.freebsd-kmod-qemu.kernels",
     "must be debug or release, or a list of them, not 'fast'"),
    ("freebsd-kmod-qemu", "    kernels: []\n", "targets.freebsd-kmod-qemu.kernels", "at least one kernel"),
    ("freebsd-kmod-qemu", "    memory_mb: lots\n", "targets.freebsd-kmod-qemu.memory_mb", "whole number"),
    ("freebsd-kmod-qemu", "    boot_timeout_s: 0\n", "targets.freebsd-kmod-qemu.boot_timeout_s",
     "greater than 0"),
    ("freebsd-kmod-qemu", "    kernls: [debug]\n", "targets.freebsd-kmod-qemu.kernls", "unknown key"),
]
# The section freebsd-kmod-qemu owns, after the variants (line 8 on).
BAD_SECTION = [
    ("freebsd:\n  release: '15.0'\n", 9, "freebsd.release", "not a FreeBSD release name"),
    ("freebsd:\n  kernel_kind: fast\n", 9, "freebsd.kernel_kind", "must be one of debug, release"),
    ("freebsd:\n  releases: 15.0-RELEASE\n", 9, "freebsd.releases", "unknown key"),
]


def _files(tmp_path: Path, target: str, options: str, after: str = "") -> tuple[Path, Path]:
    source = tmp_path / "wolfssl"
    source.mkdir(exist_ok=True)
    (source / "configure").write_text("#!/bin/sh\nexit 1\n")
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=source, cache=tmp_path / "cache", target=target, options=options)
                   + after)
    return cfg, tmp_path / "out"


def _refused_before_any_fetch(tmp_path: Path, cfg: Path, out: Path,
                              capsys: pytest.CaptureFixture[str]) -> str:
    status = main(["run", "--config", str(cfg), "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2, err
    # Nothing was fetched or run: the cache the fetch fills and the results directory are not there.
    assert not (tmp_path / "cache").exists() and not out.exists(), err
    return err


@pytest.mark.parametrize(("target", "options", "key", "words"), BAD,
                         ids=[f"{b[0]}:{b[1].strip()}" for b in BAD])
def test_a_bad_target_option_fails_run_before_any_fetch_naming_file_line_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, options: str, key: str,
        words: str) -> None:
    """Fails on the old code: the run fetched, then failed (or went on) at a stage, without a line."""
    cfg, out = _files(tmp_path, target, options)
    err = _refused_before_any_fetch(tmp_path, cfg, out, capsys)
    assert f"bad config: {cfg}:6: {key}: " in err and words in err, err


@pytest.mark.parametrize(("section", "line", "key", "words"), BAD_SECTION, ids=[b[2] for b in BAD_SECTION])
def test_a_bad_freebsd_section_fails_run_before_any_fetch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str, line: int, key: str,
        words: str) -> None:
    cfg, out = _files(tmp_path, "freebsd-kmod-qemu", "", section)
    err = _refused_before_any_fetch(tmp_path, cfg, out, capsys)
    assert f"bad config: {cfg}:{line}: {key}: " in err and words in err, err


def test_each_target_gets_its_options_as_its_dataclass(tmp_path: Path) -> None:
    (tmp_path / "kit").mkdir()
    cfg = parse_config("""\
targets:
  userspace: {bench_cflags: -DX, bench_skipped: X left out}
  linux-kmod-qemu: {kernel_version: 6.12.0-1-amd64, cpu: max}
  freebsd-kmod: {kernel_source: /usr/src/sys, kmod_dir: kmod}
  freebsd-kmod-qemu: {kernels: debug, memory_mb: 512, boot_timeout_s: null}
variants:
  v: {targets: [userspace]}
freebsd: {kit: kit}
""", str(tmp_path / "bsdkm.yml"), tmp_path)
    targets = all_targets()
    assert cfg.targets["userspace"].bench_cflags == ("-DX",)
    assert cfg.targets["userspace"].bench_skipped == "X left out"
    assert targets["linux-kmod-qemu"].options(cfg) == LinuxQemuOptions("6.12.0-1-amd64", "max")
    assert targets["freebsd-kmod"].options(cfg) == FreeBSDKmodOptions("kmod", "/usr/src/sys")
    qemu = targets["freebsd-kmod-qemu"].options(cfg)
    assert isinstance(qemu, FreeBSDQemuOptions)
    assert (qemu.kernels, qemu.cpu, qemu.memory_mb, qemu.boot_timeout_s) == (("debug",), "max", 512, None)
    assert qemu.freebsd.kit == tmp_path / "kit"  # relative to the file's directory


def test_a_target_not_listed_still_has_its_defaults_and_its_section() -> None:
    cfg = parse_config("targets: {userspace: null}\nvariants: {v: {targets: [userspace]}}\n"
                       "freebsd: {release: 15.0-RELEASE}\n", "t.yml")
    qemu = all_targets()["freebsd-kmod-qemu"].options(cfg)
    assert qemu.kernels == ("debug", "release") and qemu.freebsd.release == "15.0-RELEASE"
    with pytest.raises(ConfigError, match=r"^t\.yml:3: freebsd\.snapshot: "):
        parse_config("targets: {userspace: null}\nvariants: {v: {targets: [userspace]}}\n"
                     "freebsd: {snapshot: 16.0-RELEASE}\n", "t.yml")


@pytest.mark.parametrize("argv", [
    ["stage", "fetch", "--variant", "v", "--target", "freebsd-kmod-qemu", "--out", "{out}"],
    ["release", "--candidate", "debian:sid/5.9.2", "--previous", "debian:trixie/5.7.2", "--out", "{out}"],
    ["doctor"],
], ids=lambda a: a[0])
def test_the_other_drivers_refuse_it_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         argv: list[str]) -> None:
    cfg, out = _files(tmp_path, "freebsd-kmod-qemu", "    kernels: [debug, fast]\n")
    status = main([a.format(out=out) for a in argv] + ["--config", str(cfg)])
    err = capsys.readouterr().err
    assert status == 2 and f"{cfg}:6: targets.freebsd-kmod-qemu.kernels: " in err, err
    assert not (tmp_path / "cache").exists() and not out.exists(), err
