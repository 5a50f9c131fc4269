"""FreeBSD's official sets as a real mirror serves them, against doubles of the sets
(``tests/freebsd_sets.py``): no FreeBSD kernel is fetched or kept.

- a snapshot caught mid-update (its ``kernel.txz`` disagrees with its ``MANIFEST``) is fetched again
  after a pause, within the retry bound, and then is an infrastructure failure; a release's set or a
  pinned ``MANIFEST`` that disagrees is an ``integrity`` infrastructure failure, never retried and
  never the code's fault;
- of two configured kernels, one unreachable is **not run**: in the headline, the report,
  ``summary.json`` and JUnit, and an infrastructure failure where unavailable runs fail (Buildbot,
  the Action);
- ``snapshot: CURRENT`` is the newest ``*-CURRENT`` of the mirror's directory listing, and the run
  says which;
- ``cryptodev.ko`` is taken from the same ``kernel.txz`` and put on the guest's FAT root;
- the set directory's ``BUILDDATE``, ``REVISION`` and ``GITBRANCH`` and the MANIFEST's digest are in
  the run's metadata and the report.

The pipeline runs whole (``run_matrix``) with the module build and the QEMU boot replaced: the boot
returns this target's own recording of a real kldload run (``tests/freebsd_double/real/``).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from freebsd_sets import CRYPTODEV, RELEASE, SNAPSHOT, make_set, set_facts, txz, write_manifest

from buildbot_bsdkm.config.bsdkm_yml import ConfigError, parse_config
from buildbot_bsdkm.contract import TARGET_UNAVAILABLE
from buildbot_bsdkm.model import FailureCategory, StageFailure
from buildbot_bsdkm.pipeline.jobs.matrix import run_matrix
from buildbot_bsdkm.pipeline.runtime.proc import Watched
from buildbot_bsdkm.pipeline.runtime.stage_error import StageError
from buildbot_bsdkm.pipeline.targets._freebsd import freebsd_kmod_dir
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import boot as fboot
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import console as fconsole
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import kit as fkit
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import release_set
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu import target as fq
from buildbot_bsdkm.pipeline.targets.freebsd_kmod_qemu.release_set import (
    ReleaseSpec,
    SetRetry,
    kit_facts,
    newest_current,
    release_kit,
    resolve_snapshot,
)
from buildbot_bsdkm.retry.decision import Attempt, AttemptVerdict, RetrySettings, decide

REAL = Path(__file__).parents[2] / "freebsd_double" / "real"
KLDLOAD_RUN = REAL / "kldload-release-crypto_aesni.console.log"
TARGET = "freebsd-kmod-qemu"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class _Pauses:
    """The pause between fetches, recorded (a test never sleeps); ``then`` runs at each pause."""

    def __init__(self, then: Any = None) -> None:
        self.seconds: list[float] = []
        self.then = then

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        if self.then is not None:
            self.then()


# --------------------------------------------------------------------------- item 8: whose fault


def _stale_kernel(where: Path) -> None:
    """The mirror mid-update: a fresh MANIFEST beside the kernel.txz it replaced (the CDN's copy)."""
    txz(where / "kernel.txz", [("./boot/kernel/kernel", b"\x7fELF last week's kernel")])


def test_a_snapshot_caught_mid_update_is_fetched_again_then_infrastructure(tmp_path: Path) -> None:
    where = make_set(tmp_path / "m", SNAPSHOT)
    _stale_kernel(where)
    pauses = _Pauses()
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(SNAPSHOT, str(tmp_path / "m")), tmp_path / "cache",
                    retry=SetRetry(2, (30.0, 120.0), pause=pauses))
    f = err.value.failure
    assert pauses.seconds == [30.0, 120.0]  # fetched three times, within the retry bound, with pauses
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "snapshot-changing"
    assert "kernel.txz" in f.message and "after 3 fetch(es)" in f.message
    assert not (tmp_path / "cache" / "freebsd-sets" / f"snapshots-{SNAPSHOT}-amd64" / "kit").exists()
    # Buildbot's and the Action's retry rules retry it too (infrastructure), up to their bound.
    decision = decide([Attempt.failing(1, "w1", f)], RetrySettings())
    assert decision.retry and decision.verdict is AttemptVerdict.RETRYING


def test_a_snapshot_that_settles_during_the_pause_is_taken(tmp_path: Path) -> None:
    where = make_set(tmp_path / "m", SNAPSHOT)
    good = (where / "kernel.txz").read_bytes()
    _stale_kernel(where)
    pauses = _Pauses(then=lambda: (where / "kernel.txz").write_bytes(good))
    kit = release_kit(ReleaseSpec(SNAPSHOT, str(tmp_path / "m")), tmp_path / "cache",
                      retry=SetRetry(2, (30.0, 120.0), pause=pauses))
    assert pauses.seconds == [30.0]
    assert (kit / "boot" / "kernel-debug").read_bytes().endswith(SNAPSHOT.encode())


def test_a_release_or_a_pinned_manifest_that_disagrees_is_integrity_never_retried(tmp_path: Path) -> None:
    where = make_set(tmp_path / "m", RELEASE)
    pin = _sha(where / "MANIFEST")
    _stale_kernel(where)  # the release's kernel.txz is not what its MANIFEST says
    pauses = _Pauses()
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(tmp_path / "m")), tmp_path / "cache",
                    retry=SetRetry(2, (30.0,), pause=pauses))
    mismatch = err.value.failure
    write_manifest(where, {})  # now the MANIFEST agrees with the sets, but not with the pin
    with pytest.raises(StageError) as err:
        release_kit(ReleaseSpec(RELEASE, str(tmp_path / "m"), manifest_sha256=pin), tmp_path / "cache",
                    retry=SetRetry(2, (30.0,), pause=pauses))
    pinned = err.value.failure
    assert pauses.seconds == []  # a release's sets never change: nothing is fetched again
    for f in (mismatch, pinned):
        # Not the code's fault (never ``real``, never the PR's failure); not transient either.
        assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == "integrity"
        decision = decide([Attempt.failing(1, "w1", f)], RetrySettings())
        assert not decision.retry and decision.verdict is AttemptVerdict.INFRASTRUCTURE
        assert "not retried" in decision.summary
    assert "checksum mismatch" in mismatch.message and pin in pinned.message


# --------------------------------------------------------------------------- item 7: CURRENT


def test_current_is_the_newest_current_of_the_directory_listing(tmp_path: Path) -> None:
    for name in ("14.3-STABLE", "15.0-CURRENT", "16.0-CURRENT", "15.0-STABLE"):
        make_set(tmp_path / "m", name)
    (tmp_path / "m" / "snapshots" / "amd64" / "amd64").mkdir()  # Makefile.mirrors' TARGET/TARGET_ARCH tree
    name, how = resolve_snapshot("CURRENT", str(tmp_path / "m"), "amd64", tmp_path / "cache")
    assert name == "16.0-CURRENT" and how is not None and "16.0-CURRENT" in how
    assert resolve_snapshot("15.0-CURRENT", str(tmp_path / "m"), "amd64", tmp_path / "cache") == \
        ("15.0-CURRENT", None)
    # download.freebsd.org's listing is an HTML index: names in links, dates beside them
    html = ('<a href="../">../</a>\n<a href="ISO-IMAGES/">ISO-IMAGES/</a>  01-Dec-2025 10:00  -\n'
            '<a href="9.3-CURRENT/">9.3-CURRENT/</a>\n'
            '<a href="16.0-CURRENT/">16.0-CURRENT/</a>  04-Dec-2025\n'
            '<a href="15.0-STABLE/">15.0-STABLE/</a>\n<a href="17.0-CURRENT.txt">17.0-CURRENT.txt</a>\n')
    assert newest_current(html) == "16.0-CURRENT"  # 16 > 9 as a number; a file is no snapshot directory
    assert newest_current("<a href='15.0-STABLE/'>") is None


@pytest.fixture()
def https_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A loopback https mirror of two CURRENT snapshots; the client trusts it like a real one."""
    root = tmp_path / "m"
    for name in ("15.0-CURRENT", "16.0-CURRENT"):
        make_set(root, name)
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=60)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    import ssl

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a, **k: Quiet(*a, directory=str(root), **k))  # type: ignore[misc]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_current_from_an_https_listing_and_the_run_says_which(https_listing: str, tmp_path: Path) -> None:
    cfg = parse_config(f"targets: {{{TARGET}: null}}\nvariants: {{p: {{targets: [{TARGET}]}}}}\n"
                       f"cache_dir: {tmp_path / 'cache'}\nfreebsd:\n  snapshot: CURRENT\n"
                       f"  mirror: {https_listing}\n", "c.yml")
    chosen = fkit.kits(cfg, ("debug",))
    kit = chosen.found["debug"]
    assert kit.triple.endswith("freebsd16.0")
    assert chosen.chosen == [f"debug kernel: snapshot CURRENT is 16.0-CURRENT, the newest *-CURRENT "
                             f"{https_listing}/snapshots/amd64/ lists"]
    facts = kit.facts()
    assert facts is not None and (facts.name, facts.requested) == ("16.0-CURRENT", "CURRENT")
    assert facts.describe().startswith("16.0-CURRENT (CURRENT): REVISION ")
    # With the mirror out of reach the newest CURRENT in the cache stands, and says so.
    name, how = resolve_snapshot("CURRENT", "https://127.0.0.1:9", "amd64", tmp_path / "cache", timeout_s=5)
    assert name == "16.0-CURRENT" and how is not None and "the newest in the cache" in how
    with pytest.raises(StageError) as err:
        resolve_snapshot("CURRENT", "https://127.0.0.1:9", "amd64", tmp_path / "empty", timeout_s=5)
    assert err.value.failure.reason == TARGET_UNAVAILABLE and "freebsd.snapshot" in err.value.failure.message
    with pytest.raises(ConfigError, match="or CURRENT"):
        parse_config(f"targets: {{{TARGET}: null}}\nvariants: {{p: {{targets: [{TARGET}]}}}}\n"
                     "freebsd:\n  snapshot: current\n", "c.yml")


# --------------------------------------------------------------------------- item 9: cryptodev.ko


def test_cryptodev_is_taken_from_the_same_kernel_txz(tmp_path: Path) -> None:
    make_set(tmp_path / "m", RELEASE)
    make_set(tmp_path / "m", SNAPSHOT)
    release = fkit.Kit(release_kit(ReleaseSpec(RELEASE, str(tmp_path / "m")), tmp_path / "cache"))
    debug = fkit.Kit(release_kit(ReleaseSpec(SNAPSHOT, str(tmp_path / "m")), tmp_path / "cache"))
    assert release.cryptodev("release-crypto").read_bytes() == CRYPTODEV + RELEASE.encode()
    assert debug.cryptodev("debug").read_bytes() == CRYPTODEV + SNAPSHOT.encode()
    assert not (release.root / "boot" / "aesni.ko").exists()  # only what the guest needs
    if shutil.which("mkfs.vfat") is None or shutil.which("mdir") is None:
        pytest.skip("the FAT root needs dosfstools and mtools (mkfs.vfat, mdir)")
    init, ko = tmp_path / "init", tmp_path / "libwolfssl.ko"
    init.write_bytes(b"\x7fELF init")
    ko.write_bytes(b"\x7fELF module")
    image = fboot.make_root(tmp_path / "root.img", init, ko, release.cryptodev("release-crypto"))
    listing = subprocess.run(["mdir", "-b", "-i", str(image), "::/"], capture_output=True, text=True,
                             check=True).stdout
    assert "::/cryptodev.ko" in listing.split() and "::/libwolfssl.ko" in listing.split()
    got = subprocess.run(["mtype", "-i", str(image), "::/cryptodev.ko"], capture_output=True,
                         check=True).stdout
    assert got == CRYPTODEV + RELEASE.encode()
    # kldinit loads that module before it opens /dev/crypto (GENERIC has no device cryptodev)
    source = freebsd_kmod_dir() / "kldinit.c"
    text = source.read_text()
    assert '"/cryptodev.ko"' in text
    assert text.index("SYS_kldload, (long)CRYPTODEV_PATH") < text.index('(long)"/dev/crypto"')


# --------------------------------------------------------------------------- item 7 and 11: the run


CONFIG = """\
source: {{local: {source}}}
cache_dir: {cache}
targets:
  freebsd-kmod-qemu: {{kernels: [debug, release]}}
variants:
  p: {{targets: [freebsd-kmod-qemu]}}
retry: {{max_infra_retries: 1, backoff_s: [0]}}
freebsd: {{release: {release}, snapshot: {snapshot}, mirror: {mirror}}}
"""


@pytest.fixture()
def no_build_no_boot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The module build and the QEMU boot replaced: the boot gives a recorded real kldload console."""

    def build(config: Any, variant: str, source: Path, cache: Path, jobs: int, log: Path,
              patterns: Any = None) -> Path:
        fkit.kits(config, fkit.kernels_option(config))  # what the real build asks first
        ko = cache / "fake" / "libwolfssl.ko"
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_bytes(b"\x7fELF not a module")
        return ko

    def boot(b: fboot.Boot, kit: fkit.Kit, ko: Path, work: Path, cache: Path, **_: Any) -> Any:
        work.mkdir(parents=True, exist_ok=True)
        console = work / "console.log"
        shutil.copyfile(KLDLOAD_RUN, console)
        run = Watched(0, 60.0, False, None)
        return fconsole.outcome_from_boot(b, console, run, set(), {"console": console})

    monkeypatch.setattr(fq, "check_worker", lambda config: fkit.find_kit(config, "configure"))
    monkeypatch.setattr(fq, "build_module", build)
    monkeypatch.setattr(fq, "run_boot", boot)


def _config(tmp_path: Path, snapshot: str = SNAPSHOT) -> Any:
    source = tmp_path / "wolfssl"
    source.mkdir(exist_ok=True)
    (source / "configure").write_text("#!/bin/sh\n")
    make_set(tmp_path / "m", RELEASE)  # the release is there; the snapshot is not
    text = CONFIG.format(source=source, cache=tmp_path / "cache", release=RELEASE, snapshot=snapshot,
                         mirror=tmp_path / "m")
    return parse_config(text, str(tmp_path / "bsdkm.yml"), tmp_path)


@pytest.mark.usefixtures("no_build_no_boot")
def test_one_of_two_kernels_unreachable_is_not_run_everywhere(tmp_path: Path) -> None:
    result = run_matrix(_config(tmp_path), None, None, tmp_path / "out", progress=lambda s: None,
                        not_run_ok=True)
    (run,) = result.runs
    assert run.failure is None and run.not_run is None  # the release kernel ran and is judged
    why = run.not_run_parts["debug kernel"]
    assert SNAPSHOT in why and "MANIFEST" in why
    headline = result.verdict.headline()
    assert headline.startswith("✅ PASS: ")  # what ran passed; the kernel that did not is said beside it
    assert f"; debug kernel not run ({TARGET}/p): {why}" in headline
    out = tmp_path / "out"
    report = (out / "report.md").read_text()
    assert "debug kernel not run" in report and f"{TARGET}/p (debug kernel)" in report
    summary = json.loads((out / "summary.json").read_text())
    assert {"target": TARGET, "variant": "p", "part": "debug kernel", "reason": why} in \
        summary["verdict"]["not_run"]
    assert summary["runs"][0]["not_run_parts"] == {"debug kernel": why}
    cases = {c.get("name"): c for c in ElementTree.parse(out / "junit.xml").iter("testcase")}
    skipped = cases["debug kernel"].find("skipped")
    assert skipped is not None and skipped.get("message") == f"not run: {why}"
    # Item 11: what the release kernel was, in the metadata and the report.
    facts = run.metadata["kernels"]["release"]
    expected = set_facts(RELEASE)
    assert (facts["builddate"], facts["revision"], facts["gitbranch"]) == (
        expected["BUILDDATE"], expected["REVISION"], expected["GITBRANCH"])
    assert facts["manifest_sha256"] == _sha(tmp_path / "m" / "releases" / "amd64" / RELEASE / "MANIFEST")
    assert f"REVISION {expected['REVISION']}, BUILDDATE {expected['BUILDDATE']}" in report
    assert f"MANIFEST sha256 {facts['manifest_sha256']}" in report


@pytest.mark.usefixtures("no_build_no_boot")
def test_where_unavailable_runs_fail_a_missing_kernel_is_an_infrastructure_failure(tmp_path: Path) -> None:
    result = run_matrix(_config(tmp_path), None, None, tmp_path / "out", progress=lambda s: None,
                        not_run_ok=False)  # Buildbot's stages, the Action's --unavailable fail
    (run,) = result.runs
    f = run.failure
    assert isinstance(f, StageFailure)
    assert f.category is FailureCategory.INFRASTRUCTURE and f.reason == TARGET_UNAVAILABLE
    assert f.message.startswith("not run: debug kernel (") and SNAPSHOT in f.message
    assert not result.passed
    decision = decide([Attempt.failing(1, "w1", f)], RetrySettings())
    assert decision.retry  # retried, then an infrastructure error, never a pass


@pytest.mark.usefixtures("no_build_no_boot")
def test_current_in_a_run_is_named_in_its_notes(tmp_path: Path) -> None:
    make_set(tmp_path / "m", "16.0-CURRENT")
    result = run_matrix(_config(tmp_path, snapshot="CURRENT"), None, None, tmp_path / "out",
                        progress=lambda s: None, not_run_ok=True)
    (run,) = result.runs
    assert run.not_run_parts == {}
    assert run.metadata["kernels"]["debug"]["name"] == "16.0-CURRENT"
    assert run.metadata["kernels"]["debug"]["requested"] == "CURRENT"
    state = json.loads((tmp_path / "out" / TARGET / "p" / "state.json").read_text())
    notes = state["outcome"]["notes"]
    assert any(n.startswith("debug kernel: snapshot CURRENT is 16.0-CURRENT") for n in notes)


def test_kit_facts_of_a_kit_made_before_they_were_kept(tmp_path: Path) -> None:
    make_set(tmp_path / "m", RELEASE)
    kit = release_kit(ReleaseSpec(RELEASE, str(tmp_path / "m")), tmp_path / "cache")
    (kit / release_set.FACTS).unlink()
    facts = kit_facts(kit)
    assert facts is not None and facts.name == RELEASE and facts.revision is None
    assert facts.manifest_sha256 == _sha(kit.parent / "MANIFEST")
