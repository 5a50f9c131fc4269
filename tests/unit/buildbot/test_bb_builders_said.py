"""A master has the builders its workers can run: `init master` and `buildbot checkconfig` say which,
and the flag that adds the others; docs/buildbot.md's table of builders and schedulers is what masters
with each kind of worker really have."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from buildbot_bsdkm.buildbot.master_config import MasterSettings, buildmaster_config
from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config import builders as plan
from buildbot_bsdkm.config.bsdkm_yml import Config, load_config, parse_config
from buildbot_bsdkm.config.worker_kinds import KINDS
from buildbot_bsdkm.config.workers import parse_workers
from buildbot_bsdkm.targets import os_release_tag

BIN = Path(sys.executable).parent
FREEBSD = ("  freebsd-kmod/crypto-register: --worker NAME:freebsd "
           "(tags [freebsd-amd64], targets [freebsd-kmod])")
DEFAULT_SAID = [
    "builders: userspace/{intelasm,noasm,aesni-avx}, bisect (workers: linux)",
    "not on this master, for want of a worker that runs them:",
    "  linux-kmod-qemu/{intelasm,noasm,lkcapi,lkcapi-portable}: --worker NAME:linux-qemu (tags [linux-qemu])",
    "  freebsd-kmod-qemu/{intelasm,noasm,crypto-register}: --worker NAME:linux-qemu (tags [linux-qemu])",
    "  release/linux: --worker NAME:linux-qemu (tags [linux-qemu])",
    FREEBSD,
    "  release/freebsd-13.5: a worker tagged freebsd-13.5-amd64",
    "  release/freebsd-14.3: a worker tagged freebsd-14.3-amd64",
    "  release/freebsd-15.0: a worker tagged freebsd-15.0-amd64",
]


def checkconfig(master: Path) -> str:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(master.parent)}
    done = subprocess.run([str(BIN / "buildbot"), "checkconfig", str(master)], capture_output=True, text=True,
                          timeout=120, check=False, env=env, cwd=master.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def said(text: str, prefix: str) -> list[str]:
    return [line.removeprefix(prefix) for line in text.splitlines() if line.startswith(prefix)]


def test_the_default_master_says_it_builds_userspace_and_how_to_add_the_rest(tmp_path: Path, capsys) -> None:
    master = tmp_path / "M"
    assert main(["init", "master", str(master)]) == 0
    out = said(capsys.readouterr().out, "bsdkm-ci: ")
    assert out[out.index(DEFAULT_SAID[0]):][:len(DEFAULT_SAID)] == DEFAULT_SAID
    checked = said(checkconfig(master), "bsdkm: ")
    assert checked[:len(DEFAULT_SAID)] == DEFAULT_SAID


def test_a_master_with_a_linux_qemu_worker_says_what_it_builds(tmp_path: Path, capsys) -> None:
    master = tmp_path / "M"
    workers = ["--worker", "linux:userspace", "--worker", "q1:linux-qemu"]
    assert main(["init", "master", str(master), *workers]) == 0
    out = said(capsys.readouterr().out, "bsdkm-ci: ")
    expected = [
        "builders: userspace/{intelasm,noasm,aesni-avx}, "
        "linux-kmod-qemu/{intelasm,noasm,lkcapi,lkcapi-portable}, "
        "freebsd-kmod-qemu/{intelasm,noasm,crypto-register}, release/linux, bisect (workers: linux, q1)",
        "not on this master, for want of a worker that runs them:",
        FREEBSD,
        "  release/freebsd-13.5: a worker tagged freebsd-13.5-amd64",
    ]
    assert out[out.index(expected[0]):][:len(expected)] == expected
    assert not any("NAME:linux-qemu" in line for line in out)
    checked = said(checkconfig(master), "bsdkm: ")
    assert checked[:len(expected)] == expected


def with_workers(block: str) -> Config:
    text = (ROOT / "bsdkm.yml").read_text(encoding="utf-8").replace("workers: {}", block)
    return parse_config(text, str(ROOT / "bsdkm.yml"), ROOT)


def master_of(config: Config, secrets: Path) -> dict:
    """The BuildmasterConfig of a master with ``config``'s workers, their passwords in ``secrets``."""
    secrets.mkdir(exist_ok=True)
    for spec in parse_workers(config.workers):
        (secrets / spec.name).write_text("pw\n")
        (secrets / spec.name).chmod(0o600)
    return buildmaster_config(config, MasterSettings(www_port=1, pb_port=2, secrets_dir=str(secrets)))


def workers_block(kinds: list[tuple[str, str, tuple[str, ...]]]) -> str:
    """``workers:`` with one worker per (name, kind, extra tags), as `init master` writes them."""
    lines = ["workers:"]
    for name, kind, extra in kinds:
        k = KINDS[kind]
        entry = f"  {name}: {{password: {{secret: {name}}}, tags: [{', '.join(k.tags + extra)}]"
        if k.targets:
            entry += f", targets: [{', '.join(k.targets)}]"
        lines.append(entry + "}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kinds", [
    [("linux", "userspace", ())],
    [("linux", "userspace", ()), ("q1", "linux-qemu", ())],
    [("f1", "freebsd", ())],
    [("q1", "linux-qemu", ()), ("f1", "freebsd", ("freebsd-14.3-amd64",))],
])
def test_what_is_said_is_what_the_master_builds(kinds: list, tmp_path: Path) -> None:
    config = with_workers(workers_block(kinds))
    c = master_of(config, tmp_path / "secrets")
    assert plan.builder_names(config, parse_workers(config.workers)) == [b.name for b in c["builders"]]


# ----------------------------------------------------------------------------- docs/buildbot.md

DOCS = ROOT / "docs" / "buildbot.md"


def docs_table() -> dict[str, tuple[list[str], list[str]]]:
    """The rows of the table of builders and schedulers: worker -> (builders, schedulers)."""
    section = DOCS.read_text(encoding="utf-8").split("## Builders and schedulers", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or cells[0] in ("worker", "---"):
            continue
        rows[cells[0]] = (re.findall(r"`([^`]+)`", cells[1]), re.findall(r"`([^`]+)`", cells[2]))
    return rows


def expand(names: list[str], config: Config, releases: tuple[str, ...]) -> set[str]:
    """The table's ``<variant>`` and ``<X.Y>`` as this configuration has them."""
    out = set()
    for name in names:
        if name.endswith("/<variant>"):
            target = name.removesuffix("/<variant>")
            out |= {f"{target}/{v}" for v, var in config.variants.items() if target in var.targets}
        elif "<X.Y>" in name:
            out |= {name.replace("<X.Y>", rel) for rel in releases}
        else:
            out.add(name)
    return out


def test_the_docs_table_is_what_a_master_with_each_kind_of_worker_has(tmp_path: Path) -> None:
    rows = docs_table()
    packaged = load_config(ROOT / "bsdkm.yml")
    releases = packaged.release.freebsd_releases
    tagged = tuple(os_release_tag(r, packaged.release.arch) for r in releases)
    kinds = {"`userspace`": ("userspace", ()), "`linux-qemu`": ("linux-qemu", ()),
             "`freebsd`": ("freebsd", ()),
             "`freebsd`, also tagged `freebsd-<X.Y>-amd64`": ("freebsd", tagged)}
    assert set(rows) == {"any", *kinds}
    any_builders, any_schedulers = rows["any"]
    for row, (kind, extra) in kinds.items():
        config = with_workers(workers_block([("w1", kind, extra)]))
        c = master_of(config, tmp_path / kind)
        builders, schedulers = rows[row]
        assert {b.name for b in c["builders"]} == expand(any_builders + builders, config, releases), row
        assert {s.name for s in c["schedulers"]} == set(any_schedulers + schedulers), row


def test_the_docs_show_what_init_master_says() -> None:
    section = DOCS.read_text(encoding="utf-8").split("## Builders and schedulers", 1)[1]
    block = section.split("```text\n", 1)[1].split("```", 1)[0]
    assert said(block, "bsdkm: ") == DEFAULT_SAID
    specs = [KINDS["userspace"].spec("linux")]
    assert plan.coverage_lines(load_config(ROOT / "bsdkm.yml"), specs) == DEFAULT_SAID
