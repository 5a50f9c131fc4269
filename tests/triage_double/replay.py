"""``bsdkm-ci`` for a real Buildbot worker, with the FreeBSD QEMU boot replayed from a console.

SIMULATED: the fetch, the cross-build and QEMU. Everything else is the real command: ``bsdkm-ci
stage`` with its state files, the real judging of each boot (``fconsole.outcome_from_boot``,
``combine``, the target's ``logs`` and ``judge_boot``), collect, unload and the gate with its triage.
A boot's console is a file chosen by the commit the stage fetched: a real recording from the kit
(``../shared/freebsd/logs``) or one made from it. A real ``freebsd-kmod-qemu`` boot of the debug
kernel takes 20-30 s and its build minutes; the replay takes none, so a test can run several builds
of a PR and its base through a real master and worker.

    python replay.py SCENARIO.json stage <stage> ...   # SCENARIO: {"base_commit": SHA,
                                                       #  "consoles": {SHA: {"debug": PATH}},
                                                       #  "sources": {SHA: DIR}, "name_selftests": true}
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from buildbot_bsdkm import cli
from buildbot_bsdkm.config.bsdkm_yml import GitSource
from buildbot_bsdkm.pipeline import stages
from buildbot_bsdkm.pipeline.runtime.proc import Watched
from buildbot_bsdkm.pipeline.runtime.source import SourceTree
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import console as fconsole
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as freebsd_qemu


def install(scenario: dict[str, Any]) -> None:
    consoles: dict[str, dict[str, str]] = scenario["consoles"]

    def fetch_source(spec: Any, *, cache: Path | None = None, **_: Any) -> SourceTree:
        if isinstance(spec, GitSource):
            commit = spec.commit or spec.ref
            tree = SourceTree(Path(cache or ".") / "replay-src" / commit, f"git:{spec.url}@{spec.ref}",
                              version="5.9.2", commit=commit, kind="git", url=spec.url, ref=spec.ref)
        else:  # a build of the base branch: the config's source
            commit = scenario["base_commit"]
            tree = SourceTree(Path(cache or ".") / "replay-src" / commit, "debian:sid/wolfssl=5.9.2",
                              version="5.9.2", commit=commit, kind="debian")
        tree.path.mkdir(parents=True, exist_ok=True)
        (tree.path / "COMMIT").write_text(commit)
        source = scenario.get("sources", {}).get(commit)
        if source:  # the commit's wolfcrypt/test sources, which name a failure the console only numbers
            shutil.copytree(source, tree.path, dirs_exist_ok=True)
        return tree

    def build_module(config: Any, variant: str, source: Path, cache: Path, jobs: int, log: Path,
                     patterns: Any = None) -> Path:
        commit = (source / "COMMIT").read_text()
        ko = cache / "replay-ko" / commit / variant / "libwolfssl.ko"
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_text(commit)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as fh:
            fh.write(f"# replayed build of {commit} ({variant})\n")
        return ko

    def run_boot(boot: Any, kit: Any, ko: Path, work: Path, cache: Path, *, symbols: set[str],
                 **_: Any) -> Any:  # time limit, VM options, console cap: no VM runs
        work.mkdir(parents=True, exist_ok=True)
        console = work / "console.log"
        shutil.copyfile(consoles[ko.read_text()][boot.kind], console)
        text = console.read_text(errors="replace")
        stopped = ("benchmark-at-preload" if boot.mode == "preload" and "wolfCrypt Benchmark (" in text
                   and "panic:" not in text else None)
        if stopped:
            fboot.cut_at_benchmark(console)
        run = Watched(exit_code=None if stopped else 0, seconds=0.2, timed_out=False, stopped=stopped)
        return fconsole.outcome_from_boot(boot, console, run, symbols, {"console": console})

    stages.fetch_source = fetch_source  # type: ignore[assignment]
    freebsd_qemu.check_worker = lambda config: None  # type: ignore[assignment]
    freebsd_qemu.build_module = build_module  # type: ignore[assignment]
    freebsd_qemu.run_boot = run_boot  # type: ignore[assignment]
    freebsd_qemu.module_symbols = lambda ko: set()  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    install(json.loads(Path(argv[0]).read_text()))
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
