"""The README's Action example selects runs of the shipped ``bsdkm.yml``, and a selection that matches
nothing is an error (exit 2) before anything is fetched, naming the variants and their targets."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from buildbot_bsdkm.commands.action.config import cache_keys
from buildbot_bsdkm.config.bsdkm_yml import ConfigError, default_config_path, load_config

ROOT = Path(__file__).resolve().parents[4]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"


def readme_action_example() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start: GitHub Action", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "the README's Action quick start has no yaml block"
    return yaml.safe_load(block.group(1))


def matrix_entries(job: dict) -> list[dict[str, str]]:
    matrix = job.get("strategy", {}).get("matrix", {})
    keys = [k for k in matrix if k not in ("include", "exclude")]
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(matrix[k] for k in keys))]


def expand(text: str, entry: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*matrix\.(\w+)\s*\}\}", lambda m: entry[m.group(1)], str(text))


def names(text: str) -> list[str] | None:
    found = [n for n in text.replace(",", " ").split() if n]
    return found or None


def test_readme_example_selects_a_run_per_matrix_entry_of_the_shipped_config() -> None:
    workflow = readme_action_example()
    shipped = load_config(default_config_path())
    for job in workflow["jobs"].values():
        step = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("wolfSSL/bsdkm-ci/action@"))
        inputs = step.get("with", {})
        assert not inputs.get("config"), "the quick start uses the shipped config (no config: input)"
        entries = matrix_entries(job)
        assert entries
        for entry in entries:
            variants = names(expand(inputs.get("variants", ""), entry))
            targets = names(expand(inputs.get("targets", ""), entry))
            assert shipped.selected_pairs(variants, targets), (entry, variants, targets)


def test_an_empty_selection_is_a_config_error_naming_the_targets_of_each_variant() -> None:
    shipped = load_config(default_config_path())
    with pytest.raises(ConfigError) as e:
        shipped.selected_pairs(["intelasm", "noasm"], ["freebsd-kmod"])
    message = str(e.value)
    assert "the selection runs nothing: variant intelasm, noasm has no target freebsd-kmod" in message
    assert "intelasm: userspace, linux-kmod-qemu" in message and "noasm: userspace" in message
    with pytest.raises(ConfigError):
        cache_keys(shipped, ["intelasm"], ["freebsd-kmod"], None)  # the cache key step says it first


def test_run_with_an_empty_selection_exits_2_before_fetching(tmp_path: Path) -> None:
    # A source nobody can fetch: reaching the fetch would take the network's time and fail otherwise.
    config = tmp_path / "bsdkm.yml"
    config.write_text("source: {git: {url: 'https://bsdkm-ci.invalid/wolfssl.git', ref: master}}\n"
                      "targets: {userspace: {}, freebsd-kmod: {}}\n"
                      "variants:\n  intelasm: {flags: [--enable-intelasm], targets: [userspace]}\n")
    out = tmp_path / "out"
    started = time.monotonic()
    proc = subprocess.run([str(BSDKM_CI), "run", "--config", str(config), "--target", "freebsd-kmod",
                           "--variant", "intelasm", "--out", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the selection runs nothing: variant intelasm has no target freebsd-kmod" in proc.stderr
    assert "(targets per variant: intelasm: userspace)" in proc.stderr
    assert "run(s)" not in proc.stdout + proc.stderr  # the matrix never started
    assert not out.exists()  # nothing written, nothing fetched
    assert time.monotonic() - started < 60


def test_cache_key_follows_source_and_flags(tmp_path: Path) -> None:
    shipped = load_config(default_config_path())
    one = cache_keys(shipped, ["intelasm"], ["userspace"], tmp_path)
    other_flags = cache_keys(shipped, ["noasm"], ["userspace"], tmp_path)
    assert one["key"].startswith(one["restore"]) and one["restore"] != other_flags["restore"]
    (tmp_path / "configure.ac").write_text("AC_INIT([wolfssl], [5.9.2])\n")
    assert cache_keys(shipped, ["intelasm"], ["userspace"], tmp_path)["key"] != one["key"]
    assert cache_keys(shipped, ["intelasm"], ["userspace"], tmp_path)["restore"] == one["restore"]
