"""`bsdkm-ci init` under an attacker's and a careless admin's eye: what a master written by it runs
on, who may use its web UI, where its workers port listens, and bad input named instead of a
traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

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


# --- what the written master runs on ---------------------------------------------------------------


def loaded(master: Path) -> Any:
    """The configuration the master itself loads at start: Buildbot's loader over master.cfg."""
    from buildbot.config.master import FileLoader

    return FileLoader(str(master), "master.cfg").loadConfig()


def test_init_master_db_url_is_the_database_the_master_runs_on(tmp_path: Path, monkeypatch) -> None:
    """Fails on the old code: --db-url reached `buildbot create-master` only, and the master then ran
    on sqlite:///state.sqlite."""
    monkeypatch.delenv("BSDKM_DB_URL", raising=False)
    master = tmp_path / "M"
    url = f"sqlite:///{tmp_path / 'elsewhere.sqlite'}"
    assert main(["init", "master", str(master), "--db-url", url]) == 0
    kept = master / "secrets" / "db-url"
    assert kept.read_text().strip() == url and kept.stat().st_mode & 0o777 == 0o600
    assert loaded(master).db.db_url == url
    # $BSDKM_DB_URL at init is kept the same way; without either, the master's own sqlite.
    other = tmp_path / "M2"
    monkeypatch.setenv("BSDKM_DB_URL", url)
    assert main(["init", "master", str(other)]) == 0
    monkeypatch.delenv("BSDKM_DB_URL")
    assert loaded(other).db.db_url == url
    plain = tmp_path / "M3"
    assert main(["init", "master", str(plain)]) == 0
    assert not (plain / "secrets" / "db-url").exists()
    assert loaded(plain).db.db_url == "sqlite:///state.sqlite"


def test_init_master_writes_an_authenticated_web_ui(tmp_path: Path, capsys, monkeypatch) -> None:
    """Fails on the old code: a fresh master had no www auth, so any local user could force builds."""
    monkeypatch.delenv("BSDKM_DB_URL", raising=False)
    from buildbot.www.auth import HTPasswdAuth

    master = tmp_path / "M"
    assert main(["init", "master", str(master)]) == 0
    out = capsys.readouterr().out
    passwords = master / "www.htpasswd"
    assert passwords.stat().st_mode & 0o777 == 0o600
    (line,) = passwords.read_text().splitlines()
    user, password = line.split(":", 1)
    assert user == "admin" and len(password) >= 24
    assert password not in out
    assert f"log in (top right) as admin, with the password after 'admin:' in {passwords}" in out
    www = yaml.safe_load((master / "bsdkm.yml").read_text())["www"]
    assert www["auth"] == {"type": "htpasswd", "file": "www.htpasswd"}  # beside bsdkm.yml
    config = loaded(master)
    assert isinstance(config.www["auth"], HTPasswdAuth)
    assert config.www["auth"].checkers[0].filename == str(passwords)
    assert config.www["authz"].allowRules  # forcing, stopping, cancelling: admins only
    checked = checkconfig(master)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_workers_port_listens_where_the_master_cfg_header_says(tmp_path: Path, capsys,
                                                                  monkeypatch) -> None:
    """Fails on the old code: the header said loopback, the workers port listened on 0.0.0.0."""
    monkeypatch.delenv("BSDKM_DB_URL", raising=False)
    master = tmp_path / "M"
    assert main(["init", "master", str(master)]) == 0
    assert loaded(master).protocols["pb"]["port"] == "tcp:9989:interface=127.0.0.1"
    assert "workers' port on 127.0.0.1:9989" in (master / "master.cfg").read_text()
    out = capsys.readouterr().out
    assert "workers on 127.0.0.1:9989" in out and "cannot reach" not in out
    # A FreeBSD worker is a machine of its own: told how to let it in.
    assert main(["init", "master", str(tmp_path / "bsd"), "--worker", "fbsd:freebsd"]) == 0
    assert "fbsd run on other machines, which cannot reach 127.0.0.1:9989: set master.listen.workers" in (
        capsys.readouterr().out)
    # Opening it is the admin's decision, said when the master is made (or in bsdkm.yml).
    opened = tmp_path / "open"
    assert main(["init", "master", str(opened), "--workers-listen", "0.0.0.0"]) == 0
    assert loaded(opened).protocols["pb"]["port"] == "tcp:9989:interface=0.0.0.0"
    assert main(["init", "master", str(tmp_path / "bad"), "--workers-listen", "everywhere"]) == 2
    assert "--workers-listen everywhere: must be an IP address" in capsys.readouterr().err


def test_init_master_into_a_directory_whose_parents_do_not_exist_yet(tmp_path: Path, monkeypatch) -> None:
    """Fails on the old code: `buildbot create-master` makes the last directory only, says so on
    stderr with exit status 0, and init then failed on master.cfg with a traceback."""
    monkeypatch.delenv("BSDKM_DB_URL", raising=False)
    master = tmp_path / "srv" / "ci" / "M"
    assert main(["init", "master", str(master)]) == 0
    assert (master / "buildbot.tac").is_file() and (master / "master.cfg").is_file()
