"""The userspace target's prerequisites: the configure stage, run as Buildbot and the Action run it
(``bsdkm-ci stage``), fails on a worker without ``make`` as the infrastructure failure that names the
package, before ``configure`` runs, instead of a failure blamed on the code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from buildbot_bsdkm.config.bsdkm_yml import parse_config
from buildbot_bsdkm.pipeline.targets import all_targets

CONFIG = """\
source: {{local: {source}}}
targets: {{userspace: {{flags: [--enable-cryptonly]}}}}
variants: {{noasm: {{flags: [--disable-asm], targets: [userspace]}}}}
cache_dir: {cache}
"""


def _tree(tmp_path: Path) -> Path:
    """Enough of a wolfSSL tree to fetch; its configure would say it ran."""
    source = tmp_path / "wolfssl"
    source.mkdir()
    (source / "autogen.sh").write_text("#!/bin/sh\nexit 1\n")
    (source / "configure").write_text("#!/bin/sh\necho 'configure ran' >&2\nexit 1\n")
    for name in ("autogen.sh", "configure"):
        (source / name).chmod(0o755)
    return source


def test_a_tree_with_its_configure_needs_a_compiler_and_make_not_autotools(tmp_path: Path) -> None:
    text = CONFIG.format(source=_tree(tmp_path), cache=tmp_path / "cache")
    cfg = parse_config(text, str(tmp_path / "b.yml"))
    names = [p.name for p in all_targets()["userspace"].prerequisites(cfg)]
    assert names[:2] == ["C compiler", "make"]
    assert not any("autoconf" in n for n in names)  # the tree has its configure


def test_configure_on_a_worker_without_make_names_the_package(tmp_path: Path) -> None:
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(CONFIG.format(source=_tree(tmp_path), cache=tmp_path / "cache"))
    common = ["--config", str(cfg), "--variant", "noasm", "--target", "userspace",
              "--out", str(tmp_path / "out")]
    cli = [sys.executable, "-m", "buildbot_bsdkm.cli", "stage"]
    subprocess.run([*cli, "fetch", *common], capture_output=True, text=True, timeout=300, check=True)
    bin_dir = tmp_path / "bin"  # the worker's PATH: a compiler, no make
    bin_dir.mkdir()
    for tool in ("gcc", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    env = {**os.environ, "PATH": str(bin_dir)}
    env.pop("CC", None)
    proc = subprocess.run([*cli, "configure", *common], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    state = json.loads((tmp_path / "out" / "userspace" / "noasm" / "state.json").read_text())
    failure = state["failure"]
    assert (failure["stage"], failure["category"], failure["reason"]) == \
        ("configure", "infrastructure", "worker-setup")
    assert failure["message"] == "make: not found on PATH; fix: install make"
    # configure itself never ran: its words are nowhere in the run's directory
    run_dir = tmp_path / "out" / "userspace" / "noasm"
    written = [f.read_text(errors="replace") for f in run_dir.rglob("*") if f.is_file()]
    assert written and not any("configure ran" in text for text in written)
