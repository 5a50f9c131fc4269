"""Runtime data shipped inside the package, found through ``importlib.resources``.

``buildbot_bsdkm/_data/`` holds the default configuration (``bsdkm.yml``), the policies, the
worker scripts (``kmod/freebsd``, ``kmod/linux`` with the loader and test-module sources),
``master.cfg`` and the local worker's ``buildbot.tac``. In the repository those entries are
symlinks to the top-level files people edit (``kmod/``, ``policies/``, ...); the wheel holds
copies (setuptools follows the links when it collects package data). So the same lookup
works in a checkout, an editable install and an installed wheel.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

DATA_PACKAGE = "buildbot_bsdkm"
DATA_DIR = "_data"


class ResourceError(RuntimeError):
    """The installed package lacks a data file it needs (a broken or partial install)."""


def data_path(*parts: str) -> Path:
    """A filesystem path to ``_data/<parts>``; scripts are run by path, so it must be a real file."""
    node = files(DATA_PACKAGE).joinpath(DATA_DIR, *parts)
    # Installed from a wheel or a checkout this is a plain directory; a zip import would not be.
    path = Path(str(node))
    if not isinstance(node, Path) and not path.exists():
        raise ResourceError(f"bsdkm-ci data {'/'.join(parts)} is not on the filesystem ({node})")
    # In a checkout the entries are symlinks: the real file is what people edit and what messages name.
    return path.resolve()


def default_policy_path() -> Path:
    return data_path("policies", "default.yml")


def default_config_path() -> Path:
    return data_path("bsdkm.yml")


def config_schema_path() -> Path:
    """The JSON Schema of ``bsdkm.yml`` (``config/json_schema.py`` made it), for editors."""
    return data_path("bsdkm.schema.json")


def kmod_dir(platform: str) -> Path:
    """``kmod/freebsd`` or ``kmod/linux``: what a worker runs to load and unload the module."""
    return data_path("kmod", platform)


def master_cfg_path() -> Path:
    return data_path("master.cfg")


def local_worker_tac_path() -> Path:
    return data_path("workers", "local", "buildbot.tac")
