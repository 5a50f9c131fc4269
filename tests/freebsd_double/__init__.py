"""Replay test double for the FreeBSD kernel-module tools (see README.md)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
SCENARIOS = HERE / "scenarios"


def scenario_names() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("*.json"))


def load_scenario(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCENARIOS / f"{name}.json").read_text(encoding="utf-8"))
    return doc


@dataclass
class FreeBSDDouble:
    """A fake FreeBSD kernel in ``state``, booted with its scenario's boot log."""

    scenario_file: Path
    state: Path

    @classmethod
    def boot(cls, scenario_name: str, state: Path) -> FreeBSDDouble:
        return cls.boot_file(SCENARIOS / f"{scenario_name}.json", state)

    @classmethod
    def boot_doc(cls, scenario: dict[str, Any], state: Path) -> FreeBSDDouble:
        """Boot a scenario made in a test (e.g. a variation of a stored one)."""
        state.mkdir(parents=True, exist_ok=True)
        path = state / "scenario.json"
        path.write_text(json.dumps(scenario), encoding="utf-8")
        return cls.boot_file(path, state)

    @classmethod
    def boot_file(cls, scenario_file: Path, state: Path) -> FreeBSDDouble:
        state.mkdir(parents=True, exist_ok=True)
        scenario = json.loads(scenario_file.read_text(encoding="utf-8"))
        boot = "".join(line + "\n" for line in scenario["boot_log"])
        (state / "msgbuf").write_text(boot, encoding="utf-8")
        (state / "console").write_text("", encoding="utf-8")
        (state / "loaded.json").unlink(missing_ok=True)
        return cls(scenario_file, state)

    @property
    def scenario(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.scenario_file.read_text(encoding="utf-8"))
        return doc

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        # The scripts search only FreeBSD's system directories; on Linux they search the double's first.
        env["BSDKM_SYSTEM_PATH"] = env["PATH"]
        env["BSDKM_DOUBLE_STATE"] = str(self.state)
        env["BSDKM_DOUBLE_SCENARIO"] = str(self.scenario_file)
        env["BSDKM_DOUBLE_PYTHON"] = sys.executable
        env["BSDKM_CONSOLE"] = str(self.state / "console")
        return env

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.log"
        if not path.exists():
            return []
        return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]

    def loaded_files(self) -> list[str]:
        path = self.state / "loaded.json"
        return sorted(json.loads(path.read_text())) if path.exists() else []

    def msgbuf_text(self) -> str:
        return (self.state / "msgbuf").read_text(encoding="utf-8")
