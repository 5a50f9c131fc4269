"""``bsdkm.yml`` → Buildbot's ``BuildmasterConfig``: workers, one builder per (target, variant),
schedulers, web UI and database. ``master.cfg`` is a few lines around ``buildmaster_config``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from buildbot.plugins import schedulers, secrets, util, worker

from ..config import builders as plan
from ..config.bsdkm_yml import Config
from ..config.master import DEFAULT_DB_URL, stored_db_url
from ..contract import (
    CONFIG_PROPERTY,
    RUN_KIND_PROPERTY,
    TAGS_PROPERTY,
    TARGET_PROPERTY,
    VARIANT_PROPERTY,
    builder_name,
)
from ..github.services import github_services
from ..github.settings import parse_settings
from ..retry.decision import RetrySettings
from . import bisect_builder, candidate
from . import steps as bsdkm_steps
from .heap import FrozenStartupHeap
from .retrying_build import BsdkmBuildFactory, can_start_build, next_worker
from .trust_levels import warn_without_levels
from .worker_config import WorkerCopy, send_config_first, worker_copy
from .worker_passwords import PasswordRef, WorkerConfigError, WorkerSpec, parse_workers, resolve_env_password
from .www_perf import apply_perf_dashboard
from .www_security import apply_www_security

LOCAL_TAGS = ("linux-userspace", "linux-qemu")
GATE_TIMEOUT_S = 300.0
OUT_DIR = "bsdkm-out"
NIGHTLY_HOUR = 2


@dataclass(frozen=True)
class MasterSettings:
    """How this master runs; everything else comes from ``bsdkm.yml``."""

    # None: from bsdkm.yml's master: section (a master made by `bsdkm-ci init master`); the local
    # tooling (scripts/master.sh) writes its own free loopback ports into bsdkm-master.json instead.
    www_port: int | None = None
    pb_port: int | None = None
    pb_interface: str | None = None  # "" or 0.0.0.0: every interface
    www_interface: str | None = None
    db_url: str = "sqlite:///state.sqlite"
    config_path: str | None = None  # bsdkm.yml as the local worker sees it
    local_workers: Mapping[str, str] = field(default_factory=dict)  # embedded workers: name -> password
    secrets_dir: str | None = None  # SecretInAFile directory for {secret: NAME} passwords
    title: str = "bsdkm-ci"
    bsdkm_ci: str = "bsdkm-ci"  # the command on the workers
    extra_worker_properties: Mapping[str, Any] = field(default_factory=dict)
    basedir: str | None = None  # the master's directory (GitHub's outbox lives there)


def _endpoint(port: int, interface: str) -> str:
    if not interface:
        return f"tcp:{port}"
    return f"tcp:{port}:interface={interface.replace(':', chr(92) + ':')}"  # an IPv6 address's colons


@dataclass(frozen=True)
class Listening:
    """Where the web UI and the workers' port listen, after bsdkm-master.json and bsdkm.yml."""

    www_port: int
    www_interface: str
    pb_port: int
    pb_interface: str

    @property
    def www_url(self) -> str:
        return f"http://127.0.0.1:{self.www_port}/"


def listening(config: Config, settings: MasterSettings) -> Listening:
    m = config.master
    return Listening(
        www_port=settings.www_port if settings.www_port is not None else m.www_port,
        www_interface=settings.www_interface if settings.www_interface is not None else m.www_listen,
        pb_port=settings.pb_port if settings.pb_port is not None else m.workers_port,
        pb_interface=settings.pb_interface if settings.pb_interface is not None else m.workers_listen,
    )


def missing_secret(name: str, settings: MasterSettings) -> str | None:
    """Why the master's secrets directory cannot give secret ``name`` (None: it can)."""
    if not settings.secrets_dir:
        where = Path(settings.basedir or ".") / "secrets"
        return f"secret {name!r} not found: there is no secrets directory {where}"
    path = Path(settings.secrets_dir) / name
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        return f"secret {name!r} not found: cannot read {path}: {e.strerror}"
    if not value:
        return f"secret {name!r} is empty: {path}"
    return None


def _password(ref: PasswordRef, worker_name: str, settings: MasterSettings) -> Any:
    if ref.kind == "secret":
        # Buildbot would only find out when the master starts (KeyError in the worker's login);
        # checking here makes `buildbot checkconfig` name it.
        problem = missing_secret(ref.name, settings)
        if problem:
            raise WorkerConfigError(f"workers.{worker_name}.password: {problem} (`bsdkm-ci init master` "
                                    f"writes one, mode 0600)")
        return util.Secret(ref.name)
    return resolve_env_password(ref)


def make_workers(specs: list[WorkerSpec], settings: MasterSettings) -> list[Any]:
    out = []
    for spec in specs:
        props = dict(spec.properties or {})
        props.setdefault(TAGS_PROPERTY, list(spec.tags))
        out.append(worker.Worker(spec.name, _password(spec.password, spec.name, settings),
                                 max_builds=spec.max_builds,
                                 properties=props))
    for name, password in settings.local_workers.items():
        props = {TAGS_PROPERTY: list(LOCAL_TAGS), **settings.extra_worker_properties}
        if settings.config_path:
            props[CONFIG_PROPERTY] = settings.config_path
        out.append(worker.Worker(name, password, max_builds=1, properties=props))
    return out


def worker_specs(config: Config, settings: MasterSettings) -> list[WorkerSpec]:
    specs = parse_workers(config.workers)
    for name in settings.local_workers:
        if any(s.name == name for s in specs):
            raise WorkerConfigError(f"workers.{name}: the name is taken by an embedded local worker")
        specs.append(WorkerSpec(name, PasswordRef("env", "-"), tags=LOCAL_TAGS))
    if not specs:
        raise WorkerConfigError("workers: none configured and no local worker: nothing could run a build")
    return specs


def stage_time_limit(config: Config, stage: str) -> float:
    """Seconds a stage may take on the worker; load covers the self-test and the benchmark too."""
    # A PR build's load measures its base too, benchmark.repeats rounds of base and head, and more up
    # to benchmark.max_repeats while the rounds are too noisy to decide.
    rounds = max(config.benchmark.repeats, config.benchmark.max_repeats)
    if stage == "gate":
        # A PR build's gate may measure a regressed pair again (policy perf.confirm: true), as many
        # rounds of base and head as load did; the master does not read the policy, so always room.
        return GATE_TIMEOUT_S + 2 * rounds * config.timeout("benchmark")
    if stage == "load":
        once = config.timeout("load") + config.timeout("selftest")
        return 2 * once + 2 * rounds * config.timeout("benchmark")
    return config.timeout(stage)


def worker_config_path(settings: MasterSettings, copy: WorkerCopy | None) -> Any:
    """The ``--config`` of the workers' commands: the worker's own ``bsdkm_config`` property when it
    has one, else the master's file as each build receives it (``worker_config``)."""
    return util.Property(CONFIG_PROPERTY, default=settings.config_path or (copy.config_path if copy else ""))


def build_factory(config: Config, target: str, variant: str, settings: MasterSettings,
                  copy: WorkerCopy | None = None) -> BsdkmBuildFactory:
    factory = BsdkmBuildFactory(retry_settings=RetrySettings.from_config(config.retry))
    config_path = worker_config_path(settings, copy)
    for step_class in bsdkm_steps.STAGE_STEPS:
        limit = stage_time_limit(config, step_class.stage)
        factory.addStep(step_class(
            variant=variant, target=target, out_dir=OUT_DIR, config_path=config_path,
            bsdkm_ci=settings.bsdkm_ci, patterns=config.retry, maxTime=limit, timeout=limit,
            repeats=config.benchmark.repeats,
        ))
    return factory


def make_builders(
    config: Config, specs: list[WorkerSpec], settings: MasterSettings, copy: WorkerCopy | None = None
) -> tuple[list[Any], list[str]]:
    """Builders, and the (target/variant) pairs no configured worker can run (``plan.pair_builders``)."""
    planned, orphans = plan.pair_builders(config, specs)
    builders = [util.BuilderConfig(
        name=b.name,
        workernames=list(b.workers),
        factory=build_factory(config, b.targets[0], str(b.variant), settings, copy),
        tags=[b.targets[0], str(b.variant)],
        collapseRequests=False,  # each change keeps its own status
        canStartBuild=can_start_build,
        nextWorker=next_worker,
        properties={TARGET_PROPERTY: b.targets[0], VARIANT_PROPERTY: b.variant},
    ) for b in planned]
    return builders, orphans


def make_schedulers(builder_names: list[str], on_change: list[str]) -> list[Any]:
    """PR/branch changes build the enabled variants; force and the nightly RC run cover the full matrix."""
    return [
        schedulers.AnyBranchScheduler(name="changes", builderNames=on_change, treeStableTimer=None),
        schedulers.ForceScheduler(name="force", builderNames=builder_names),
        schedulers.Nightly(name="nightly-rc", builderNames=builder_names, hour=NIGHTLY_HOUR, minute=0,
                           onlyIfChanged=False, properties={RUN_KIND_PROPERTY: "release-candidate"}),
    ]


def apply_github(
    c: dict[str, Any], config: Config, settings: MasterSettings, builder_names: list[str] | None = None,
    github: Any = None,
) -> None:
    """Reporters/change hook from ``github.services.github_services(config)``.

    It returns a mapping with ``services``, ``change_hook_dialects`` and ``secretsProviders``
    (empty without a ``github:`` section); a plain list of services is taken too. Only the
    builders this master has are built and reported for a PR (a target no worker runs has none).
    """
    got = github_services(config, basedir=settings.basedir, builder_names=builder_names, settings=github)
    if isinstance(got, Mapping):
        c["services"].extend(got.get("services", []))
        if got.get("change_hook_dialects"):
            c["www"].setdefault("change_hook_dialects", {}).update(got["change_hook_dialects"])
        c["secretsProviders"].extend(got.get("secretsProviders", []))
    elif got:
        c["services"].extend(got)


def buildmaster_config(config: Config, settings: MasterSettings) -> dict[str, Any]:
    """The whole ``BuildmasterConfig`` dictionary."""
    specs = worker_specs(config, settings)
    remote = [s for s in specs if s.name not in settings.local_workers]
    copy = worker_copy(config.path) if config.path is not None and config.path.is_file() else None
    builders, orphans = make_builders(config, specs, settings, copy)
    if not builders:
        raise WorkerConfigError(f"no worker can run any of: {', '.join(orphans)}")
    names = [b.name for b in builders]
    enabled = {builder_name(t, v) for t, v in config.pairs()}
    on_change = [n for n in names if n in enabled] or names
    where = listening(config, settings)
    c: dict[str, Any] = {
        "title": settings.title,
        "titleURL": where.www_url,
        "buildbotURL": where.www_url,
        "workers": make_workers(remote, settings),
        "protocols": {"pb": {"port": _endpoint(where.pb_port, where.pb_interface)}},
        "builders": builders,
        "schedulers": make_schedulers(names, on_change),
        "db": {"db_url": settings.db_url},
        "www": {
            "port": _endpoint(where.www_port, where.www_interface),
            "plugins": {"waterfall_view": {}, "console_view": {}, "grid_view": {}},
        },
        "services": [FrozenStartupHeap()],
        "secretsProviders": [],
        "buildbotNetUsageData": None,
    }
    if settings.secrets_dir:
        c["secretsProviders"].append(secrets.SecretInAFile(dirname=settings.secrets_dir))
    say_coverage(config, specs)
    unlevelled = warn_without_levels([(s.name, tuple(s.tags)) for s in remote])  # trusted/untrusted
    if unlevelled:
        print(unlevelled, flush=True)
    github = _github_settings(config, settings)  # read once: the reporters and bisect share its tokens
    apply_github(c, config, settings, names, github)
    apply_www_security(c, config)  # buildbotURL, and who may force/stop/cancel
    apply_perf_dashboard(c)  # the perf history page; it asks the authz just set who may read it
    config_path = worker_config_path(settings, copy)
    candidate.apply_release(c, config, specs, config_path, settings.bsdkm_ci)
    bisect_builder.apply_bisect(c, config, specs, config_path, settings.bsdkm_ci, github)
    if copy is not None:
        for builder in c["builders"]:
            send_config_first(builder.factory, copy)
    return c


def say_coverage(config: Config, specs: list[WorkerSpec]) -> None:
    """The builders these workers allow and which worker would add the rest, on standard output:
    ``buildbot checkconfig`` shows it, and a running master's twistd.log has it (twistd logs what is
    printed). The trust-level warning goes the same way."""
    for line in plan.coverage_lines(config, specs):
        print(f"bsdkm: {line}", flush=True)


def _github_settings(config: Config, settings: MasterSettings) -> Any:
    """The ``github:`` settings the bisect builder's commit comment uses (None: no comment)."""
    if not config.github:
        return None
    return parse_settings(config.github, env=dict(os.environ), variants=frozenset(config.variants),
                          targets=frozenset(config.targets))


SETTINGS_FILE = "bsdkm-master.json"


class MasterSettingsError(ValueError):
    """``bsdkm-master.json`` cannot be used; the message names the file and key."""


def _setting(doc: Mapping[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = doc.get(key, default)
    if value is None and default is None and key in ("www_port", "pb_port"):
        raise MasterSettingsError(f"{where}: missing key {key!r}")
    if value is not None and not isinstance(value, kind):
        raise MasterSettingsError(f"{where}: {key}: expected {kind.__name__}, got {value!r}")
    return value


def _read_password(path: Path, name: str, where: str) -> str:
    try:
        password = path.read_text(encoding="utf-8").strip()
    except OSError as e:
        problem = f"cannot read password file: {e.strerror}"
        raise MasterSettingsError(f"{where}: local_workers.{name}: {problem}") from None
    if not password:
        raise MasterSettingsError(f"{where}: local_workers.{name}: password file {path} is empty")
    return password


# A master made by `bsdkm-ci init master` (or `buildbot create-master`, master.cfg, bsdkm.yml) has
# no bsdkm-master.json: the ports and interfaces of bsdkm.yml's master: section, remote workers only.
DEFAULT_WORKER = "bsdkm-worker"  # when bsdkm.yml names none; password: secret file <basedir>/secrets/
DEFAULT_WORKER_TAGS = ("linux-userspace", "linux-qemu", "freebsd-kmod")


def default_master_settings(basedir: str | Path, environ: Mapping[str, str] | None = None) -> MasterSettings:
    env = os.environ if environ is None else environ
    base = Path(basedir)
    secrets_dir = base / "secrets"
    return MasterSettings(
        # `bsdkm-ci init master --db-url` keeps it there; $BSDKM_DB_URL still overrides it.
        db_url=env.get("BSDKM_DB_URL") or stored_db_url(secrets_dir) or DEFAULT_DB_URL,
        secrets_dir=str(secrets_dir) if secrets_dir.is_dir() else None,
        basedir=str(base),
    )


def with_default_worker(config: Config) -> Config:
    """``config`` with one remote worker able to run every target when it names none."""
    if config.workers:
        return config
    worker = {"password": {"secret": DEFAULT_WORKER}, "tags": list(DEFAULT_WORKER_TAGS)}
    return dataclasses.replace(config, workers={DEFAULT_WORKER: worker})


def load_master_settings(basedir: str | Path, environ: Mapping[str, str] | None = None) -> MasterSettings:
    """The master's own settings, written by ``scripts/master.sh``; ``BSDKM_DB_URL`` overrides the db.

    Without the file: a master made with ``bsdkm-ci init master``, listening where ``bsdkm.yml``'s
    ``master:`` says.
    """
    env = os.environ if environ is None else environ
    base = Path(basedir)
    path = base / SETTINGS_FILE
    where = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return default_master_settings(base, env)
    except (OSError, json.JSONDecodeError) as e:
        raise MasterSettingsError(f"{where}: unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise MasterSettingsError(f"{where}: expected a JSON object")
    locals_ = _setting(doc, "local_workers", dict, where, {})
    workers = {name: _read_password(base / str(p), name, where) for name, p in locals_.items()}
    return MasterSettings(
        www_port=_setting(doc, "www_port", int, where),
        pb_port=_setting(doc, "pb_port", int, where),
        pb_interface=_setting(doc, "pb_interface", str, where, "127.0.0.1"),
        www_interface=_setting(doc, "www_interface", str, where, "127.0.0.1"),
        db_url=env.get("BSDKM_DB_URL") or _setting(doc, "db_url", str, where, "sqlite:///state.sqlite"),
        config_path=_setting(doc, "config_path", str, where, None),
        local_workers=workers,
        secrets_dir=_setting(doc, "secrets_dir", str, where, None),
        bsdkm_ci=_setting(doc, "bsdkm_ci", str, where, "bsdkm-ci"),
        basedir=str(base),
    )
