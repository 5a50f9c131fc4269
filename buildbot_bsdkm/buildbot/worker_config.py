"""The master's ``bsdkm.yml``, sent to the worker at the start of every build.

A worker on another machine has no copy of the master's configuration, and the one packaged with
bsdkm-ci there is not what the maintainer edited. So each build first writes the master's file, and
the files it names by a relative path (the policy, the known-issues list), into ``CONFIG_DIR`` in the
build's directory, without the master's own settings, and the stages read that copy. A worker
property ``bsdkm_config`` naming a file on the worker still wins: an operator who set one meant it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildbot.process.buildstep import get_factory_from_step_or_factory
from buildbot.process.results import SUCCESS
from buildbot.steps.transfer import StringDownload

from ..config.bsdkm_yml import ConfigError, parse_config
from ..support.yaml_reader import dump, load_plain

CONFIG_DIR = "bsdkm-config"
CONFIG_NAME = "bsdkm.yml"
# Keys whose value may be a file beside bsdkm.yml; known_issues is a list when it is not a path.
FILE_KEYS = ("policy", "known_issues", "baseline")
# The master's own settings: its folders mean nothing on a worker (which keeps its default cache), and
# a worker that runs PR code has no business reading who the workers are or how GitHub is reached.
MASTER_ONLY_KEYS = ("cache_dir", "workers", "github", "www", "master")


class WorkerConfigError(ConfigError):
    """The master's configuration cannot be sent to its workers as it is."""


@dataclass(frozen=True)
class WorkerCopy:
    """The files a build writes under ``CONFIG_DIR``: name → text, ``bsdkm.yml`` among them."""

    files: dict[str, str]

    @property
    def config_path(self) -> str:
        """The copy's ``bsdkm.yml`` as the stages name it (relative to the build's directory)."""
        return f"{CONFIG_DIR}/{CONFIG_NAME}"


def worker_copy(config_file: Path) -> WorkerCopy:
    """``config_file`` and the relative files it names, rewritten to sit together in ``CONFIG_DIR``."""
    text = config_file.read_text(encoding="utf-8")
    doc = load_plain(text, str(config_file), WorkerConfigError)
    if not isinstance(doc, dict):
        raise WorkerConfigError(f"{config_file}: not a mapping of settings")
    base = config_file.resolve().parent
    files: dict[str, str] = {}
    for key in FILE_KEYS:
        value = doc.get(key)
        if not isinstance(value, str) or "://" in value or Path(value).expanduser().is_absolute():
            continue
        named = base / value
        if not named.is_file():
            continue  # parse_config below names what is missing, with the key
        name = f"{key.replace('_', '-')}{named.suffix or '.yml'}"
        files[name] = named.read_text(encoding="utf-8")
        doc[key] = name
    for key in MASTER_ONLY_KEYS:
        doc.pop(key, None)
    files[CONFIG_NAME] = dump(doc)
    check_copy(files, config_file)
    return WorkerCopy(files)


def check_copy(files: dict[str, str], origin: Path) -> None:
    """The copy must read as the original does; a problem is named with the original's file."""
    with tempfile.TemporaryDirectory(prefix="bsdkm-worker-config-") as tmp:
        for name, text in files.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        parse_config(files[CONFIG_NAME], f"{origin} (as sent to the workers)", Path(tmp))


def download_steps(copy: WorkerCopy) -> list[Any]:
    """One ``StringDownload`` per file, hidden from the build's step list unless it fails."""
    return [StringDownload(text, workerdest=f"{CONFIG_DIR}/{name}", mode=0o644, name=f"config {name}",
                           hideStepIf=lambda results, _step: results == SUCCESS, haltOnFailure=True)
            for name, text in sorted(copy.files.items())]


def send_config_first(factory: Any, copy: WorkerCopy) -> None:
    """Put the downloads before every other step of ``factory`` (a Buildbot ``BuildFactory``)."""
    factory.steps[:0] = [get_factory_from_step_or_factory(step) for step in download_steps(copy)]


def work_steps(factory: Any) -> list[Any]:
    """``factory``'s step factories after the configuration's downloads."""
    return [s for s in factory.steps if s.step_class is not StringDownload]
