"""Known issues in bsdkm.yml: loading (file:line: key: problem), expiry, the default entry."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, load_config, parse_config
from buildbot_bsdkm.support.resources import default_config_path
from buildbot_bsdkm.triage.known import KnownIssue, KnownIssueError, KnownIssues, version_tuple

HEAD = """\
targets:
  userspace: {flags: []}
variants:
  asm: {flags: [], targets: [userspace]}
"""
ENTRY = """\
known_issues:
  - id: gcm
    signatures: ["selftest: AES-GCM (*)"]
    targets: [userspace]
    url: https://github.com/wolfSSL/wolfssl/issues/1
    reason: GCM fails under the emulator
    until: "5.9.3"
"""


def cfg(text: str, base: Path | None = None) -> object:
    return parse_config(HEAD + text, "bsdkm.yml", base)


def error(text: str, base: Path | None = None) -> str:
    with pytest.raises(ConfigError) as e:
        cfg(text, base)
    return str(e.value)


def test_an_entry_reads_back() -> None:
    known = cfg(ENTRY).known_issues  # type: ignore[attr-defined]
    (e,) = known.entries
    assert (e.id, e.signatures, e.targets, e.until, e.line) == (
        "gcm", ("selftest: AES-GCM (*)",), ("userspace",), "5.9.3", 6)
    assert e.matches("selftest: AES-GCM (-216)") and not e.matches("selftest: AES-CCM (-216)")
    assert e.covers("userspace", "asm") and not e.covers("linux-kmod-qemu", "asm")


@pytest.mark.parametrize(("change", "expected"), [
    ('    url: https://github.com/wolfSSL/wolfssl/issues/1\n',
     "bsdkm.yml:6: known_issues[0]: missing key 'url'"),
    ('    until: "5.9.3"\n', "bsdkm.yml:6: known_issues[0]: missing key 'until'"),
])
def test_missing_keys_name_the_entry_and_line(change: str, expected: str) -> None:
    assert error(ENTRY.replace(change, "")) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("until: \"5.9.3\"", "until: soon", "bsdkm.yml:11: known_issues[0].until: must be a wolfSSL version"),
    ("until: \"5.9.3\"", "until: 2020-01-01",
     "bsdkm.yml:6: known_issues.gcm.until: expired: its date 2020-01-01"),
    ("until: \"5.9.3\"", "until: 2026-02-30", "bsdkm.yml:11: known_issues[0].until: is no calendar date"),
    ("url: https://github.com/wolfSSL/wolfssl/issues/1", "url: issue 1",
     "bsdkm.yml:9: known_issues[0].url: must be an http(s) URL"),
    ("targets: [userspace]", "targets: [userspac]", "bsdkm.yml:8: known_issues[0].targets: unknown target"),
    ("    reason: GCM", "    colour: red\n    reason: GCM",
     "bsdkm.yml:10: known_issues[0].colour: unknown key"),
    ("signatures: [\"selftest: AES-GCM (*)\"]", "signatures: {a: 1}",
     "bsdkm.yml:7: known_issues[0].signatures: must be a list"),
])
def test_malformed_entries(old: str, new: str, expected: str) -> None:
    assert ENTRY.count(old) == 1
    assert error(ENTRY.replace(old, new)).startswith(expected)


def test_duplicate_ids_and_not_a_list() -> None:
    twice = ENTRY + ENTRY.split("\n", 1)[1]
    assert error(twice).startswith("bsdkm.yml:12: known_issues[1].id: id 'gcm' is given twice")
    assert error("known_issues: {id: x}\n").startswith("bsdkm.yml:5: known_issues: must be a list")


def test_a_file_it_names(tmp_path: Path) -> None:
    (tmp_path / "known.yml").write_text(ENTRY)
    known = cfg("known_issues: known.yml\n", tmp_path).known_issues  # type: ignore[attr-defined]
    assert [e.id for e in known.entries] == ["gcm"] and known.source == str(tmp_path / "known.yml")
    (tmp_path / "bad.yml").write_text(ENTRY.replace("until: \"5.9.3\"", "until: never"))
    assert error("known_issues: bad.yml\n", tmp_path).startswith(
        f"{tmp_path / 'bad.yml'}:7: known_issues[0].until: must be")
    assert "missing.yml: no such file" in error("known_issues: missing.yml\n", tmp_path)


def test_expiry_by_version_names_the_entry() -> None:
    e = KnownIssue("gcm", ("x",), "https://e/1", "r", "5.9.3", file="bsdkm.yml", line=6)
    known = KnownIssues((e,))
    known.check_expiry(("5.9.2",))
    with pytest.raises(KnownIssueError, match=r"bsdkm.yml:6: known_issues.gcm: expired: wolfSSL 5.10.0 is "
                                              r"tested, and the entry holds until 5.9.3"):
        known.check_expiry(("5.10.0",))
    dated = KnownIssue("d", ("x",), "https://e/1", "r", "2027-01-31")
    assert dated.expired((), date(2027, 1, 31)) is None and dated.expired((), date(2027, 2, 1))
    assert version_tuple("v5.9.2-stable") == (5, 9, 2) and version_tuple("nope") is None


def test_the_default_config_ships_the_aesni_debug_panic() -> None:
    known = load_config(default_config_path()).known_issues
    (e,) = [e for e in known.entries if "AES_set_decrypt_key_AESNI" in e.signatures[0]]
    sig = "panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"
    assert e.matches(sig) and e.covers("freebsd-kmod-qemu", "intelasm", "debug")
    assert not e.covers("freebsd-kmod-qemu", "intelasm", "release")
    assert not e.matches("panic: malloc: called with spinlock or critical section held | add_entry")
    assert e.until == "5.9.3" and e.url.startswith("https://")
