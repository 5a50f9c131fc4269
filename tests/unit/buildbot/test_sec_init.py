"""`bsdkm-ci init` under an attacker's and a careless admin's eye: what a master written by it runs
on, who may use its web UI, where its workers port listens, and bad input named instead of a
traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from buildbot_bsdkm.cli import main

BIN = Path(sys.executable).parent
# An EC key on secp112r1: PEM that parses, of a kind OpenSSL here does not offer (a throwaway).
UNSUPPORTED_CURVE_PEM = b"""-----BEGIN EC PRIVATE KEY-----
MD4CAQEEDivg0pOOCUzE+Exp0/SLoAcGBSuBBAAGoSADHgAEriZm+BaX28gVwDY0
las/nLOkY/alh5kfAAqIQQ==
-----END EC PRIVATE KEY-----
"""


def checkconfig(master: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(master.parent), **env}
    return subprocess.run([str(BIN / "buildbot"), "checkconfig", str(master)], capture_output=True, text=True,
                          timeout=120, check=False, env=environ, cwd=master.parent)


def edit_yml(master: Path, **sections: object) -> None:
    path = master / "bsdkm.yml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc.update(sections)
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


# --- tracebacks on bad input ----------------------------------------------------------------------


def test_a_password_file_that_is_not_text_is_named(tmp_path: Path, capsys) -> None:
    """Fails on the old code: UnicodeDecodeError, a traceback."""
    pw = tmp_path / "pw"
    pw.write_bytes(b"\xff\xfe\x00binary")
    argv = ["init", "worker", str(tmp_path / "W"), "--master", "h:9989", "--name", "w",
            "--password-file", str(pw)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--password-file {pw}: not UTF-8 text" in err and "Traceback" not in err
    assert not (tmp_path / "W").exists()


def test_checkconfig_names_an_app_key_on_an_unsupported_curve(tmp_path: Path) -> None:
    """Fails on the old code: UnsupportedAlgorithm escaped app_auth.py and master.cfg (a traceback)."""
    master = tmp_path / "M"
    assert main(["init", "master", str(master)]) == 0
    key = master / "app.pem"
    key.write_bytes(UNSUPPORTED_CURVE_PEM)
    key.chmod(0o600)
    edit_yml(master, github={"repo": "wolfSSL/wolfssl", "app_id": 4242, "app_key_file": str(key),
                             "webhook_secret_env": "HOOK"})
    checked = checkconfig(master, HOOK="s")
    text = checked.stdout + checked.stderr
    assert checked.returncode != 0
    assert "github.app_key_file" in text and "is RSA" in text
    assert "Traceback" not in text and "UnsupportedAlgorithm" not in text
