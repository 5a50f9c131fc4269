"""The JSON Schema of bsdkm.yml editors check it with: made from the loader's own tables, shipped in
the package, and in agreement with the loader on every config this project shows people.

- the shipped file is what ``scripts/config_schema.py`` makes (the loader's tables, the shells' keys,
  the reference's words), and ``bsdkm-ci schema`` writes it;
- the repository's bsdkm.yml, the config ``bsdkm-ci init master`` writes, the Action examples' config
  (the act tests') and every bsdkm.yml part on a docs page are valid;
- what the loader refuses for a key's value or a key's name, the schema refuses too, and the other
  way round for what it accepts.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from act.harness import CONFIG as ACT_CONFIG
from conftest import ROOT

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config, top_keys
from buildbot_bsdkm.config.json_schema import SCHEMA_FILE, fragment_schema
from buildbot_bsdkm.support.resources import config_schema_path

SHIPPED = ROOT / SCHEMA_FILE


def schema() -> dict[str, Any]:
    return json.loads(SHIPPED.read_text(encoding="utf-8"))


def problems(doc: Any, against: dict[str, Any] | None = None) -> list[str]:
    validator = jsonschema.Draft7Validator(against or schema())
    return [f"{'.'.join(map(str, e.absolute_path)) or '<top>'}: {e.message[:300]}"
            for e in validator.iter_errors(doc)]


def test_the_shipped_schema_is_what_the_loader_tables_make() -> None:
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_schema.py")], capture_output=True,
                          text=True, timeout=120, check=True).stdout
    assert SHIPPED.read_text(encoding="utf-8") == made, "run: python scripts/config_schema.py --write"
    jsonschema.Draft7Validator.check_schema(schema())
    assert config_schema_path().read_text(encoding="utf-8") == made  # the package's data file
    # each key carries the reference's words, which editors show
    variants = schema()["properties"]["variants"]["additionalProperties"]["properties"]
    assert variants["targets"]["description"].startswith("Where the variant runs")


def test_bsdkm_ci_schema_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == SHIPPED.read_text(encoding="utf-8")
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema()


def test_the_repositorys_bsdkm_yml_is_valid() -> None:
    assert problems(yaml.safe_load((ROOT / "bsdkm.yml").read_text(encoding="utf-8"))) == []


def test_the_config_init_master_writes_is_valid(tmp_path: Path) -> None:
    assert main(["init", "master", str(tmp_path / "m")]) == 0
    written = yaml.safe_load((tmp_path / "m" / "bsdkm.yml").read_text(encoding="utf-8"))
    assert problems(written) == []


def test_the_action_examples_config_is_valid() -> None:
    assert problems(yaml.safe_load(ACT_CONFIG.replace("{cache}", "/tmp/cache"))) == []


def docs_config_parts() -> list[tuple[str, dict[str, Any]]]:
    """Every YAML block on a docs page (and the README) that is a part of a bsdkm.yml: one whose
    top-level keys include a bsdkm.yml section, and that is no workflow (whose ``jobs:`` run steps)."""
    parts = []
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for i, block in enumerate(re.findall(r"^```ya?ml\n(.*?)^```", page.read_text(encoding="utf-8"),
                                             re.M | re.S)):
            doc = yaml.safe_load(block)
            if isinstance(doc, dict) and set(doc) & set(top_keys()) and not workflow(doc):
                parts.append((f"{page.name}[{i}]", doc))
    return parts


def workflow(doc: dict[Any, Any]) -> bool:
    jobs = doc.get("jobs")
    return isinstance(jobs, dict) and any(isinstance(j, dict) and "runs-on" in j for j in jobs.values())


def test_every_config_part_on_a_docs_page_is_valid() -> None:
    parts = docs_config_parts()
    names = {name.split("[")[0] for name, _ in parts}
    assert {"configuration.md", "buildbot.md", "freebsd-qemu.md", "triage.md"} <= names, names
    part_schema = fragment_schema(schema())
    bad = {name: problems(doc, part_schema) for name, doc in parts}
    assert {k: v for k, v in bad.items() if v} == {}


# --------------------------------------------------------------------------- loader and schema agree

MINIMAL: dict[str, Any] = {"targets": {"userspace": {"flags": ["--enable-cryptonly"]}},
                           "variants": {"noasm": {"flags": ["--disable-asm"], "targets": ["userspace"]}}}


def with_(**changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(MINIMAL)), **changes}


ACCEPTED = [
    with_(jobs=4, parallel=1, console_cap_mib=0.5, policy="p.yml", cache_dir=None),
    with_(source={"git": {"url": "https://example.org/w.git", "ref": "refs/pull/9/head"}}),
    with_(source={"tarball": {"url": "https://example.org/w.tgz", "sha256": "a" * 64}}),
    with_(source={"local": "../wolfssl"}),
    with_(source={"debian": {"suite": "trixie", "version": 5.7}}),
    with_(benchmark={"min_runtime_s": None, "repeats": 3, "round_order": "alternate",
                     "userspace_args": "-sha256"}),
    with_(timeouts={"load": 60, "benchmark": 30.5}),
    with_(retry={"backoff_s": 5, "infra_patterns": "connection reset by (peer|host)"}),
    with_(release={"freebsd_releases": [14.3, "15.0"], "repeats": 2}),
    with_(master={"www_port": 8011, "listen": {"www": "0.0.0.0"}}),
    with_(targets={"userspace": None, "linux-kmod-qemu": {"flags": [], "cpu": "max", "kernel_version": None}},
          variants={"v.1": {"targets": "userspace linux-kmod-qemu", "enabled": False}}),
    with_(freebsd={"release": "15.0-RELEASE", "snapshot": "16.0-CURRENT", "mirror": "https://download.freebsd.org"}),
    with_(targets={"userspace": {"bench_cflags": "-DX", "bench_skipped": "x"},
                   "freebsd-kmod": {"kernel_source": "/usr/src/sys", "kmod_dir": "k"},
                   "freebsd-kmod-qemu": {"kernels": "debug", "memory_mb": 512, "boot_timeout_s": 600}}),
    with_(known_issues=[{"id": "x", "signatures": "panic: *", "url": "https://example.org/1", "reason": "r",
                         "until": "5.9.3"}]),
    with_(known_issues="known-issues.yml"),
]

REFUSED = [
    with_(jobs=0),
    with_(jobs="two"),
    with_(warp_speed=9),
    with_(benchmark={"repeats": 0}),
    with_(benchmark={"round_order": "random"}),
    with_(benchmark={"repeat": 3}),
    with_(timeouts={"load": 0.5}),
    with_(timeouts={"compile": 60}),
    with_(source={"git": {"ref": "main"}}),
    with_(source={"debian": {}, "local": "x"}),
    with_(source={"debian": {"mirror": "ftp://deb.example.org"}}),
    with_(source={"tarball": {"url": "https://example.org/w.tgz", "sha256": "abc"}}),
    with_(variants={"noasm": {"flags": ["disable-asm"], "targets": ["userspace"]}}),
    with_(variants={"no asm": {"targets": ["userspace"]}}),
    with_(variants={"noasm": {"flags": ["--disable-asm"]}}),
    with_(variants={"noasm": {"targets": ["userspace"], "enabled": "yes please"}}),
    with_(targets={"windows": None}),
    with_(targets={"userspace": {"cpu": "max"}}),
    with_(targets={"userspace": None, "freebsd-kmod-qemu": {"kernels": ["debug", "fast"]}}),
    with_(targets={"userspace": None, "freebsd-kmod-qemu": {"kernels": []}}),
    with_(targets={"userspace": None, "freebsd-kmod-qemu": {"memory_mb": "lots"}}),
    with_(targets={"userspace": None, "linux-kmod-qemu": {"kernel_version": 6}}),
    with_(targets={"userspace": None, "freebsd-kmod": {"kernel_source": "src/sys"}}),
    with_(master={"www_port": 70000}),
    with_(master={"listen": {"www": "localhost"}}),
    with_(freebsd={"release": "15.0"}),
    with_(freebsd={"kernel_kind": "fast"}),
    with_(console_cap_mib=0),
    with_(retry={"max_infra_retries": -1}),
    with_(known_issues=[{"id": "x", "signatures": "panic", "url": "https://e.org/1", "reason": "r"}]),
    with_(known_issues=[{"id": "x", "signatures": "panic", "url": "not a url", "reason": "r",
                         "until": "5.9"}]),
    with_(workers={"w1": {"password": "hunter2"}}),
    with_(workers={"w1": {"password": {"env": "PW"}, "max_builds": 0}}),
    with_(workers={"w1": {"password": {"env": "PW"}, "colour": "red"}}),
    with_(github={"repo": "o/r", "tokn_env": "T"}),
    with_(www={"urll": "https://ci.example.org/"}),
    {"variants": MINIMAL["variants"]},
]


def loader_accepts(doc: dict[str, Any], tmp_path: Path) -> bool:
    """Whether bsdkm-ci reads it: the loader, then the shells' own sections (workers, github, www)."""
    from buildbot_bsdkm.buildbot.www_security import WwwConfigError, apply_www_security
    from buildbot_bsdkm.config.workers import WorkerConfigError, parse_workers
    from buildbot_bsdkm.github.settings import GitHubConfigError, parse_settings

    (tmp_path / "known-issues.yml").write_text("[]\n")
    try:
        config = parse_config(yaml.safe_dump(doc), "t.yml", tmp_path)
        parse_workers(config.workers)
        if config.github:
            parse_settings(config.github, env={"GITHUB_TOKEN": "t", "BSDKM_WEBHOOK_SECRET": "s"})
        apply_www_security({"buildbotURL": "http://127.0.0.1:8010/", "www": {}}, config, env={})
    except (ConfigError, WorkerConfigError, GitHubConfigError, WwwConfigError):
        return False
    return True


@pytest.mark.parametrize("doc", ACCEPTED, ids=lambda d: json.dumps({k: v for k, v in d.items() if k not in
                                                                    ("targets", "variants")})[:60])
def test_what_the_loader_accepts_the_schema_accepts(doc: dict[str, Any], tmp_path: Path) -> None:
    assert loader_accepts(doc, tmp_path)
    assert problems(doc) == []


@pytest.mark.parametrize("doc", REFUSED, ids=lambda d: json.dumps(d)[-70:])
def test_what_the_loader_refuses_the_schema_refuses(doc: dict[str, Any], tmp_path: Path) -> None:
    assert not loader_accepts(doc, tmp_path)
    assert problems(doc) != []
