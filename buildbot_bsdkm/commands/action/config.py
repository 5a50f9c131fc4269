"""``action config``: a copy of a ``bsdkm.yml`` that builds the workflow's own wolfSSL checkout."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from ...config.bsdkm_yml import Config, ConfigError, default_config_path, load_config, parse_config
from ...support.yaml_reader import dump, load_plain
from ..exit_codes import EXIT_OK, UsageError
from .run_files import optional_path, read_text, write_runner_files, write_text

# Top-level keys holding paths relative to the config file; the copy lives elsewhere. known_issues
# is a path when it names a file (a list otherwise); freebsd's kit and a mirror that is a directory too.
CONFIG_PATH_KEYS = ("policy", "baseline", "cache_dir", "known_issues")
FREEBSD_PATH_KEYS = ("kit", "mirror")


def register(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("config", help="write a copy of bsdkm.yml that builds the given wolfSSL tree")
    p.add_argument("--config", type=optional_path, help="bsdkm.yml to start from (default: bsdkm-ci's own)")
    p.add_argument("--source", type=Path, required=True, help="wolfSSL source tree (the workspace)")
    p.add_argument("--write", type=Path, required=True, help="where the derived bsdkm.yml goes")
    p.set_defaults(func=run_config)


def config_with_source(config: Path, source: Path) -> str:
    """``config``'s text with ``source: {local: SOURCE}`` and its relative paths made absolute."""
    text = read_text(config, "config")
    try:
        doc = load_plain(text, str(config), ConfigError)
    except ConfigError as e:
        raise UsageError(f"config {config} is not YAML: {e.problem}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"config {config} is not a mapping of settings")
    if not source.is_dir():
        raise UsageError(f"source {source} is not a directory")
    base = config.resolve().parent
    doc["source"] = {"local": str(source.resolve())}
    _rebase(doc, CONFIG_PATH_KEYS, base)
    if isinstance(doc.get("freebsd"), dict):
        _rebase(doc["freebsd"], FREEBSD_PATH_KEYS, base)
    derived = dump(doc)
    try:
        parse_config(derived, f"{config} with source {source}", base)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    return derived


def _rebase(doc: dict[str, object], keys: tuple[str, ...], base: Path) -> None:
    for key in keys:
        value = doc.get(key)
        if isinstance(value, str) and "://" not in value and not Path(value).expanduser().is_absolute():
            doc[key] = str(base / value)


def run_config(args: argparse.Namespace) -> int:
    derived = config_with_source(args.config or default_config_path(), args.source)
    write_text(args.write, derived)
    print(f"bsdkm-ci: {args.write}: builds {args.source.resolve()}", file=sys.stderr)
    return EXIT_OK


def register_cache_key(asub: argparse._SubParsersAction) -> None:
    p = asub.add_parser("cache-key", help="the wolfSSL build cache's key: the source and the flags it builds")
    p.add_argument("--config", type=optional_path, help="bsdkm.yml (default: bsdkm-ci's own)")
    p.add_argument("--variants", default="", help="the variants input")
    p.add_argument("--targets", default="", help="the targets input")
    p.add_argument("--source", type=optional_path, help="wolfSSL source tree (its commit)")
    p.set_defaults(func=run_cache_key)


def _names(text: str) -> list[str] | None:
    names = [n for n in text.replace(",", " ").split() if n]
    return names or None


def _source_identity(source: Path | None) -> str:
    """The checkout's commit; a tree that is no git checkout is named by its configure script."""
    if source is None:
        return "config-source"
    try:
        done = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=False)
    except OSError:
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    configure = source / "configure.ac"
    data = configure.read_bytes() if configure.is_file() else str(source.resolve()).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def cache_keys(config: Config, variants: list[str] | None, targets: list[str] | None,
               source: Path | None) -> dict[str, str]:
    """``key`` (source and flags) and ``restore`` (flags only: an older source's objects still help)."""
    pairs = config.selected_pairs(variants, targets)
    flags = [[t, v, *config.configure_flags(t, v), *config.cflags(t, v)] for t, v in pairs]
    digest = hashlib.sha256(json.dumps(flags).encode()).hexdigest()[:16]
    restore = f"bsdkm-ccache-{digest}-"
    return {"key": restore + _source_identity(source)[:40], "restore": restore}


# Events whose runs keep their caches in the default branch's scope, where every branch's runs
# (the nightly's included) restore them, yet whose jobs may build a PR's code (a retest checks out
# the PR head). A cache such a job saves is the PR author's to fill.
SHARED_SCOPE_EVENTS = ("issue_comment", "pull_request_target", "workflow_run")


def refuse_shared_scope_cache(env: Mapping[str, str]) -> None:
    """A build in a default-branch-scoped run gets no cache: the job fails before any is saved."""
    event = env.get("GITHUB_EVENT_NAME", "")
    if event in SHARED_SCOPE_EVENTS:
        raise UsageError(f"cache: 'true' in a {event} job that builds: its caches would be saved in the "
                         "default branch's scope, where trusted runs restore them, from a build of code "
                         "the run does not vouch for; set the action's input cache: 'false' in this job")


def run_cache_key(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    refuse_shared_scope_cache(env)
    path = args.config or default_config_path()
    try:
        config = load_config(path)
        keys = cache_keys(config, _names(args.variants), _names(args.targets), args.source)
    except ConfigError as e:
        raise UsageError(f"bad selection: {e}") from None
    write_runner_files(env, keys, "")
    return EXIT_OK
