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
    """A fake FreeBSD kernel in ``state``, booted with the scenario's boot log."""

    scenario_name: str
    state: Path

    @classmethod
    def boot(cls, scenario_name: str, state: Path) -> FreeBSDDouble:
        state.mkdir(parents=True, exist_ok=True)
        scenario = load_scenario(scenario_name)
        boot = "".join(line + "\n" for line in scenario["boot_log"])
        (state / "msgbuf").write_text(boot, encoding="utf-8")
        (state / "console").write_text("", encoding="utf-8")
        return cls(scenario_name, state)

    @property
    def scenario(self) -> dict[str, Any]:
        return load_scenario(self.scenario_name)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
        env["BSDKM_DOUBLE_STATE"] = str(self.state)
        env["BSDKM_DOUBLE_SCENARIO"] = str(SCENARIOS / f"{self.scenario_name}.json")
        env["BSDKM_DOUBLE_PYTHON"] = sys.executable
        env["BSDKM_CONSOLE"] = str(self.state / "console")
        return env

    def calls(self) -> list[list[str]]:
        path = self.state / "calls.log"
        if not path.exists():
            return []
        return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]

    def msgbuf_text(self) -> str:
        return (self.state / "msgbuf").read_text(encoding="utf-8")
