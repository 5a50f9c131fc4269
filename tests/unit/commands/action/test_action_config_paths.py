"""``action config`` writes its copy elsewhere: every path the configuration names still resolves."""

from __future__ import annotations

from pathlib import Path

import yaml

from buildbot_bsdkm.commands.action.config import config_with_source
from buildbot_bsdkm.config.bsdkm_yml import parse_config

ROOT = Path(__file__).resolve().parents[4]
KNOWN = """\
- id: aesni-panic
  signatures: ["panic: malloc: called with spinlock or critical section held | AES_set_decrypt_key_AESNI"]
  url: https://github.com/wolfSSL/wolfssl/issues/1
  reason: AES-NI key setup panics the debug kernel
  until: "99.0"
"""


def test_a_known_issues_file_is_found_from_the_copy(tmp_path: Path) -> None:
    conf_dir = tmp_path / "repo" / ".github"
    conf_dir.mkdir(parents=True)
    (conf_dir / "known-issues.yml").write_text(KNOWN)
    (conf_dir / "kit").mkdir()
    doc = yaml.safe_load((ROOT / "bsdkm.yml").read_text())
    doc["known_issues"] = "known-issues.yml"  # relative to the config's directory
    (conf_dir / "bsdkm.yml").write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    out.mkdir()
    derived = config_with_source(conf_dir / "bsdkm.yml", tmp_path / "repo")
    config = parse_config(derived, str(out / "bsdkm.yml"), out)  # read where the Action writes it
    assert config.known_issues.source == str((conf_dir / "known-issues.yml").resolve())
    assert [e.id for e in config.known_issues.entries] == ["aesni-panic"]


def test_a_local_freebsd_mirror_is_found_from_the_copy(tmp_path: Path) -> None:
    conf_dir = tmp_path / "repo" / ".github"
    (conf_dir / "mirror").mkdir(parents=True)
    doc = yaml.safe_load((ROOT / "bsdkm.yml").read_text())
    doc["freebsd"] = {"release": "15.0-RELEASE", "mirror": "mirror"}
    (conf_dir / "bsdkm.yml").write_text(yaml.safe_dump(doc))
    derived = yaml.safe_load(config_with_source(conf_dir / "bsdkm.yml", tmp_path / "repo"))
    assert derived["freebsd"]["mirror"] == str((conf_dir / "mirror").resolve())
