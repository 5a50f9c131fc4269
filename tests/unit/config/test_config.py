"""bsdkm.yml loading: the repository's default, and every bad input named by file, line and key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import (
    ConfigError,
    DebianSource,
    GitSource,
    LocalSource,
    TarballSource,
    default_config_path,
    load_config,
    parse_config,
)

MINIMAL = """\
targets:
  userspace:
    flags: [--enable-cryptonly]
variants:
  noasm:
    flags: [--disable-asm]
    targets: [userspace]
"""


def parse(text: str, base: Path | None = None):
    return parse_config(textwrap.dedent(text), "test.yml", base or Path("/cfg"))


def error_of(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse(text)
    return info.value


def test_repository_default_is_the_main_job() -> None:
    cfg = load_config(default_config_path())
    assert cfg.source == DebianSource(suite="sid", package="wolfssl", version="5.9.2")
    assert cfg.pairs() == [
        ("userspace", "intelasm"), ("linux-kmod-qemu", "intelasm"), ("freebsd-kmod-qemu", "intelasm"),
        ("userspace", "noasm"), ("linux-kmod-qemu", "noasm"), ("freebsd-kmod-qemu", "noasm"),
    ]
    # Variants switched off by default still run when asked for by name.
    assert cfg.pairs(["aesni-avx"]) == [("userspace", "aesni-avx")]
    assert cfg.configure_flags("userspace", "noasm") == [
        "--enable-cryptonly", "--enable-crypttests", "--enable-all-crypto", "--disable-asm", "--disable-ecc",
    ]
    assert cfg.cflags("userspace", "noasm") == [
        "-DBENCH_EMBEDDED", "-DBENCH_MIN_RUNTIME_SEC=0.1", "-DBENCH_NTIMES=1", "-DBENCH_AGREETIMES=1",
    ]
    assert cfg.policy is not None and cfg.policy.is_file()
    assert cfg.retry.max_infra_retries == 2 and cfg.retry.backoff_s == (30, 120)


def test_sources_of_every_kind_and_relative_paths() -> None:
    base = Path("/cfg")
    git = parse(MINIMAL + "source: {git: {url: /srv/wolfssl.git, ref: refs/pull/12/merge}}\n")
    assert git.source == GitSource("/srv/wolfssl.git", "refs/pull/12/merge")
    tar = parse(MINIMAL + "source: {tarball: {path: w.tar.gz, sha256: " + "A" * 64 + "}}\n")
    assert tar.source == TarballSource(str(base / "w.tar.gz"), "a" * 64)
    assert parse(MINIMAL + "source: {local: ../wolfssl}\n").source == LocalSource(base / "../wolfssl")
    url = parse(MINIMAL + "source: {tarball: {url: 'https://example.org/w.tgz'}}\n").source
    assert isinstance(url, TarballSource) and url.is_url


def test_target_flags_come_first_and_a_variant_flag_overrides_the_same_option() -> None:
    cfg = parse("""\
        targets:
          userspace: {flags: [--enable-cryptonly, --enable-asm]}
        variants:
          noasm: {flags: [--disable-asm, --enable-asm=no], targets: [userspace]}
        """)
    expected = ["--enable-cryptonly", "--disable-asm", "--enable-asm=no"]
    assert cfg.configure_flags("userspace", "noasm") == expected


def test_retry_block_is_parsed_and_patterns_kept_whole() -> None:
    cfg = parse(MINIMAL + """\
retry:
  max_infra_retries: 3
  backoff_s: [5, 10, 20]
  infra_patterns: "Connection reset by peer"
  real_patterns: ["Segmentation fault", "error: .* undeclared"]
""")
    assert cfg.retry.max_infra_retries == 3
    assert cfg.retry.backoff_s == (5, 10, 20)
    assert cfg.retry.infra_patterns == ("Connection reset by peer",)
    assert cfg.retry.real_patterns == ("Segmentation fault", "error: .* undeclared")


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        (MINIMAL + "jobs: two\n", 8, "jobs", "must be a whole number"),
        (MINIMAL + "jobs: 0\n", 8, "jobs", "at least 1"),
        (MINIMAL + "colour: red\n", 8, "colour", "unknown key"),
        (MINIMAL.replace("[--disable-asm]", "[disable-asm]"), 6, "variants.noasm.flags", "start with '--'"),
        (MINIMAL.replace("targets: [userspace]", "targets: [userspaec]"), 7, "variants.noasm.targets",
         "'userspaec' is not in 'targets'"),
        (MINIMAL.replace("  userspace:\n", "  windows:\n"), 2, "targets.windows", "unknown target"),
        (MINIMAL + "timeouts: {load: -5}\n", 8, "timeouts.load", "at least 1"),
        (MINIMAL + "timeouts: {boot: 5}\n", 8, "timeouts.boot", "unknown key"),
        (MINIMAL + "retry: {infra_patterns: ['(unclosed']}\n", 8, "retry.infra_patterns",
         "not a regular expression"),
        (MINIMAL + "retry: {max_infra_retries: 1.5}\n", 8, "retry.max_infra_retries",
         "must be a whole number"),
        (MINIMAL + "source: {git: {ref: main}}\n", 8, "source.git", "missing key 'url'"),
        (MINIMAL + "source: {git: {url: x, ref: 'a..b'}}\n", 8, "source.git.ref", "not a usable git ref"),
        (MINIMAL + "source: {tarball: {path: a.tgz, sha256: abc}}\n", 8, "source.tarball.sha256",
         "64 hex digits"),
        (MINIMAL + "source: {debian: {suite: sid}, local: /x}\n", 8, "source", "exactly one"),
        (MINIMAL + "source: {debian: {mirror: 'ftp.debian.org'}}\n", 8, "source.debian.mirror",
         "not an http"),
        (MINIMAL + "benchmark: {userspace_args: {a: 1}}\n", 8, "benchmark.userspace_args", "list of strings"),
        (MINIMAL + "workers: [a, b]\n", 8, "workers", "must be a mapping"),
        (MINIMAL + "jobs: 1\njobs: 2\n", 9, "jobs", "given twice"),
        ("variants: {}\n", 1, "", "missing key 'targets'"),
    ],
)
def test_each_bad_value_names_line_and_key(text: str, line: int, key: str, words: str) -> None:
    err = error_of(text)
    assert err.file == "test.yml"
    assert err.line == line, str(err)
    assert err.key == key, str(err)
    assert words in str(err)
    assert str(err).startswith(f"test.yml:{line}: ")


def test_crypto_register_is_refused_outside_freebsd() -> None:
    err = error_of("""\
        targets: {userspace: {flags: []}, freebsd-kmod: {flags: []}}
        variants:
          crypto-register:
            flags: [--enable-freebsdkm-crypto-register]
            targets: [freebsd-kmod, userspace]
        """)
    assert err.key == "variants.crypto-register.targets" and err.line == 5
    assert "freebsd-kmod" in err.problem


def test_broken_yaml_empty_file_and_missing_file(tmp_path: Path) -> None:
    err = error_of("targets: [a\nvariants: {}\n")
    assert "not valid YAML" in str(err) and err.line is not None
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    with pytest.raises(ConfigError, match="empty.yml: the file is empty"):
        load_config(empty)
    with pytest.raises(ConfigError, match="nope.yml: no such file"):
        load_config(tmp_path / "nope.yml")
    binary = tmp_path / "bin.yml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(binary)


def test_unknown_names_in_a_selection_are_errors() -> None:
    cfg = parse(MINIMAL)
    with pytest.raises(ConfigError, match="no variant 'fast'.*have: noasm"):
        cfg.pairs(["fast"])
    with pytest.raises(ConfigError, match="no target 'linux-kmod-qemu'"):
        cfg.pairs(None, ["linux-kmod-qemu"])


@pytest.mark.parametrize(
    ("block", "line", "message"),
    [
        ("workers:\n  w1:\n    tags: [x]\n", 10, "workers.w1: missing key 'password'"),
        ("workers:\n  w1:\n    password: hunter2\n", 11, "workers.w1.password: expected {secret: NAME}"),
        ("workers:\n  w1:\n    password: {env: X}\n    colour: red\n", 12,
         "workers.w1: unknown key(s) colour"),
        ("workers:\n  w1:\n    password: {env: X}\n    max_builds: 0\n", 12,
         "workers.w1.max_builds: expected a positive"),
    ],
)
def test_workers_block_errors_name_the_line_of_the_key(block: str, line: int, message: str) -> None:
    # workers: is checked when the master reads it (worker_config.parse_workers), not when bsdkm-ci
    # loads the file; the check still names where in bsdkm.yml the problem is.
    from buildbot_bsdkm.config.workers import WorkerConfigError, parse_workers

    cfg = parse(MINIMAL + "jobs: 1\n" + block)
    with pytest.raises(WorkerConfigError) as e:
        parse_workers(cfg.workers)
    assert str(e.value).startswith(f"test.yml:{line}: {message}")
    assert (e.value.file, e.value.line) == ("test.yml", line)


def test_workers_and_github_sections_stay_plain_data() -> None:
    cfg = parse(MINIMAL + "workers:\n  w1: {password: {env: X}, tags: [a]}\ngithub: {repo: a/b}\n")
    assert cfg.workers == {"w1": {"password": {"env": "X"}, "tags": ["a"]}}
    assert cfg.github == {"repo": "a/b"}
    assert parse(MINIMAL).workers == {} and parse(MINIMAL).github == {}


def test_a_name_is_read_as_written() -> None:
    # YAML would make 2024 an int and no a bool; a variant or target name is the text in the file
    cfg = parse(MINIMAL.replace("  noasm:\n", "  2024:\n"))
    assert list(cfg.variants) == ["2024"]
