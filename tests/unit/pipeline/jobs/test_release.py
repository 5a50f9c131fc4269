"""``bsdkm-ci release``: SOURCE syntax, the full matrix, fair judging, the FIPS round trip
through the FreeBSD replay double, and the report. The real 5.9.2-vs-5.7.2 run is in
``test_release_real.py``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from freebsd_double import FreeBSDDouble, load_scenario

from buildbot_bsdkm.cli import main
from buildbot_bsdkm.config.bsdkm_yml import DebianSource, GitSource, LocalSource, TarballSource, parse_config
from buildbot_bsdkm.model import Benchmark, LogResult, RunResult, SelfTest, StageFailure, from_json
from buildbot_bsdkm.pipeline.jobs.release import (
    ELSEWHERE,
    NOT_COVERED,
    RUN,
    SourceSyntaxError,
    judge_candidate,
    median_run,
    parse_source,
    plan_matrix,
    run_release,
)
from buildbot_bsdkm.pipeline.runtime import fips
from buildbot_bsdkm.pipeline.targets import kernel
from buildbot_bsdkm.pipeline.targets.freebsd_kmod.target import FreeBSDWorkerTarget, run_freebsd_module
from buildbot_bsdkm.policy import parse_policy
from buildbot_bsdkm.report.release_report import compiler_warnings, parse_size

# --------------------------------------------------------------------------- SOURCE


def test_every_source_form_the_config_accepts(tmp_path: Path) -> None:
    assert parse_source("debian:trixie/5.7.2") == DebianSource(suite="trixie", version="5.7.2")
    assert parse_source("debian:sid/wolfssl=5.9.2") == DebianSource(suite="sid", version="5.9.2")
    assert parse_source("debian:bookworm") == DebianSource(suite="bookworm", version=None)
    assert parse_source("git:https://github.com/wolfSSL/wolfssl.git@v5.8.2-stable") == GitSource(
        "https://github.com/wolfSSL/wolfssl.git", "v5.8.2-stable")
    assert parse_source("git:git@github.com:wolfSSL/wolfssl.git@refs/pull/9/head") == GitSource(
        "git@github.com:wolfSSL/wolfssl.git", "refs/pull/9/head")
    assert parse_source("git:https://example.org/w.git") == GitSource("https://example.org/w.git", "HEAD")
    tar = tmp_path / "wolfssl-5.7.2.tar.gz"
    tar.write_bytes(b"x")
    assert parse_source(str(tar)) == TarballSource(str(tar))
    sha = "ab" * 32
    assert parse_source(f"tarball:https://example.org/w.tar.xz#{sha}") == TarballSource(
        "https://example.org/w.tar.xz", sha)
    assert parse_source(f"dir:{tmp_path}") == LocalSource(tmp_path.resolve())
    assert parse_source(str(tmp_path)) == LocalSource(tmp_path.resolve())


@pytest.mark.parametrize("text", ["5.7.2", "debian:trixie/five", "git:", "tarball:/no/such.tar.gz",
                                  "/no/such/dir", "git:https://x/y.git@-rf", "tarball:x.tgz#123"])
def test_unknown_source_is_refused_naming_it(text: str) -> None:
    with pytest.raises(SourceSyntaxError) as e:
        parse_source(text)
    assert repr(text) in str(e.value) or text in str(e.value)


def test_cli_exits_2_naming_an_unknown_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["release", "--candidate", "debian:sid/5.9.2", "--previous", "v5.7.2"]) == 2
    err = capsys.readouterr().err
    assert "--previous: unknown source 'v5.7.2'" in err and "debian:SUITE/VERSION" in err
    assert main(["release", "--candidate", "debian:sid/5.9.2", "--previous", "debian:trixie/5.7.2",
                 "--freebsd-release", "14"]) == 2
    assert "--freebsd-release '14': a FreeBSD release is MAJOR.MINOR" in capsys.readouterr().err


# --------------------------------------------------------------------------- the matrix

MATRIX = """\
targets:
  userspace: {flags: [--enable-cryptonly]}
  freebsd-kmod: {flags: [--enable-cryptonly]}
variants:
  noasm: {flags: [--disable-asm], targets: [userspace, freebsd-kmod]}
  fips: {flags: [--enable-fips=v6], targets: [freebsd-kmod], enabled: false}
workers:
  fbsd143: {password: {env: X}, tags: [freebsd-14.3-amd64]}
release: {freebsd_releases: [13.5, 14.3, 15.0], repeats: 1}
"""


def test_full_matrix_has_disabled_variants_and_every_declared_freebsd_release() -> None:
    config = parse_config(MATRIX)
    items = {i.label: i for i in plan_matrix(config, None, None, host_release=None)}
    assert set(items) == {"userspace/noasm", "freebsd-kmod@13.5/noasm", "freebsd-kmod@14.3/noasm",
                          "freebsd-kmod@15.0/noasm", "freebsd-kmod@13.5/fips", "freebsd-kmod@14.3/fips",
                          "freebsd-kmod@15.0/fips"}
    assert items["userspace/noasm"].status == RUN
    assert items["freebsd-kmod@13.5/fips"].status == NOT_COVERED
    assert "no worker has tag freebsd-13.5-amd64" in items["freebsd-kmod@13.5/fips"].note
    assert items["freebsd-kmod@14.3/noasm"].status == ELSEWHERE  # fbsd143 runs it; this host is not it
    on_143 = {i.label: i.status for i in plan_matrix(config, None, None, host_release="14.3")}
    assert on_143["freebsd-kmod@14.3/fips"] == RUN and on_143["freebsd-kmod@15.0/noasm"] == NOT_COVERED


# --------------------------------------------------------------------------- judging


def _run(variant: str, rates: dict[str, float], *, failed: tuple[str, ...] = (),
         failure: StageFailure | None = None) -> RunResult:
    benches = [Benchmark(name, v, "MiB/s", per_second=v * 1024**2) for name, v in rates.items()]
    tests = [SelfTest("AES", "AES" not in failed), SelfTest("SHA-256", "SHA-256" not in failed)]
    log = LogResult("x", complete=True, benchmarks=benches, tests=tests, benchmark_complete=True)
    return RunResult(variant, "userspace", logs=[log] if not failure else [], failure=failure)


def test_median_of_repeats_and_a_later_failure_is_kept() -> None:
    reps = [_run("noasm", {"AES-128-GCM-enc": 100}), _run("noasm", {"AES-128-GCM-enc": 300}),
            _run("noasm", {"AES-128-GCM-enc": 110}, failed=("SHA-256",))]
    m = median_run(reps)
    assert m.benchmarks[0].value == 110
    assert [t.name for t in m.tests if not t.passed] == ["SHA-256"]
    assert m.metadata["repeats"] == 3


# The regression rules in force before the statistical gate (fixed limits).
FIXED = parse_policy("regressions:\n  - {pattern: '*', max_pct: 15}\n  - {pattern: '*', max_pct: 6, "
                     "aggregate: geomean}\n", "fixed.yml")


def test_candidate_regression_against_previous_fails_the_gate() -> None:
    policy = FIXED
    prev = {"userspace/noasm": [_run("noasm", {"AES-128-GCM-enc": 100, "SHA-256": 100})] * 2}
    cand = {"userspace/noasm": [_run("noasm", {"AES-128-GCM-enc": 60, "SHA-256": 101})] * 2}
    v = judge_candidate(cand, prev, policy)
    (bad,) = [c for c in v.regressions if c.name == "AES-128-GCM-enc"]
    assert bad.delta_pct == pytest.approx(-40.0)
    assert not v.passed


def test_a_qemu_target_is_never_judged_a_regression_against_the_previous_release() -> None:
    """QEMU TCG speeds are the emulator's: 40 % slower under TCG says nothing about the candidate."""
    def qemu(rates: dict[str, float]) -> RunResult:
        run = _run("noasm", rates)
        run.target = "linux-kmod-qemu"
        return run

    prev = {"linux-kmod-qemu/noasm": [qemu({"AES-128-GCM-enc": 100, "SHA-256": 100})] * 2}
    cand = {"linux-kmod-qemu/noasm": [qemu({"AES-128-GCM-enc": 60, "SHA-256": 101})] * 2}
    v = judge_candidate(cand, prev, FIXED)
    assert not v.regressions and v.passed, v.summary()
    assert any(n.startswith("linux-kmod-qemu: QEMU TCG") and n.endswith("not regression-gated")
               for n in v.notes), v.notes


def test_previous_that_failed_to_build_leaves_the_candidate_judged_on_its_own() -> None:
    broken = StageFailure("build", "compile failed: x.c:1: error: y")
    prev = {"userspace/noasm": [_run("noasm", {}, failure=broken)]}
    cand = {"userspace/noasm": [_run("noasm", {"AES-128-GCM-enc": 60, "SHA-256": 10})]}
    v = judge_candidate(cand, prev, FIXED)
    assert not v.regressions and "no baseline given: regression gates were not evaluated" in v.notes
    assert [c for c in v.checks if c.kind == "selftest"]  # still judged: its self-tests count


def test_warnings_and_size_are_read_from_compiler_and_binutils_output() -> None:
    log = ("../src/wolfcrypt/src/aes.c:12:5: warning: unused variable 'x' [-Wunused-variable]\n"
           "wolfcrypt/src/aes.c:99:5: warning: unused variable 'x' [-Wunused-variable]\n"
           "a.c: In function 'f':\nsp_int.c:7: warning: shift [-Wshift]\n"
           "cc1: warning: command-line option '-Wno-x' is valid for C++/ObjC++ but not for C\n"
           "configure: WARNING: unrecognized options: --enable-kernel-benchmarks\n")
    assert compiler_warnings(log) == {"aes.c: unused variable 'x' [-Wunused-variable]": 2,
                                      "sp_int.c: shift [-Wshift]": 1,
                                      "cc1: command-line option '-Wno-x' is valid for C++/ObjC++ "
                                      "but not for C": 1}
    assert parse_size("   text\t   data\t    bss\t    dec\t    hex\tfilename\n"
                      " 912345\t  20480\t    128\t 932953\t  e3c59\tlibwolfssl.ko\n") == {
        "text": 912345, "data": 20480, "bss": 128}


# --------------------------------------------------------------------------- FIPS round trip (double)

MISMATCH = load_scenario("fips-hash-mismatch")
ASKED = re.search(r"HASH_VALUE=([0-9A-F]+)", "\n".join(MISMATCH["kldload"]["kernel_log"])).group(1)
FIPS_OK = "info: FIPS 140-3 wolfCrypt-fips v6.0.0 startup self-test succeeded."


def fips_kernel(tmp_path: Path):
    """A double whose kernel checks the module's in-core hash: only a build with ASKED loads."""
    ok = load_scenario("success")
    ok["modules"] = ["libwolfssl_fips"]
    ok["kldload"]["kernel_log"] = [FIPS_OK, *ok["kldload"]["kernel_log"]]
    boots = []

    def load(ko: Path, attempt: int):
        right = ASKED in ko.read_text()
        double = FreeBSDDouble.boot_doc(ok if right else MISMATCH, tmp_path / f"kernel-{attempt}")
        boots.append("success" if right else "mismatch")
        outcome = run_freebsd_module(ko, tmp_path / f"logs-{attempt}", timeout_s=20, privilege=[],
                                     env=double.env())
        return outcome, kernel.parse_kernel_log("freebsd-kmod", outcome.kernel_log)

    return load, boots


def test_fips_round_trip_rebuilds_with_the_hash_the_module_asked_for(tmp_path: Path) -> None:
    load, boots = fips_kernel(tmp_path)
    built: list[str] = []

    def build(value: str) -> Path:
        built.append(value)
        ko = tmp_path / f"build-{len(built)}" / "libwolfssl.ko"
        ko.parent.mkdir()
        ko.write_text(fips.hash_cflag(value))
        return ko

    trip = fips.fips_round_trip(build, load)
    assert trip.passed and trip.hash == ASKED
    assert built == [fips.PLACEHOLDER_HASH, ASKED] and boots == ["mismatch", "success"]
    assert [s.name for s in trip.steps] == ["build", "load", "rebuild", "reload"]
    assert trip.outcome is not None and trip.outcome.load_rc == 0


def test_fips_round_trip_fails_when_the_rebuilt_module_is_refused_again(tmp_path: Path) -> None:
    load, _ = fips_kernel(tmp_path)

    def build(value: str) -> Path:  # a build that ignores the hash: the kernel keeps refusing it
        ko = tmp_path / f"b-{value[:4]}" / "libwolfssl.ko"
        ko.parent.mkdir(exist_ok=True)
        ko.write_text("no hash here")
        return ko

    trip = fips.fips_round_trip(build, load)
    assert not trip.passed
    assert trip.failure == ("FIPS second load after the rebuild failed: the hash still does not match "
                            f"(now {ASKED})")


def test_fips_detection_and_the_default_source_is_not_fips() -> None:
    assert fips.is_fips(["--enable-cryptonly", "--enable-fips=v6"])
    assert not fips.is_fips(["--enable-fips=v6", "--disable-fips"]) and not fips.is_fips(["--enable-aesni"])
    cfg = parse_config(Path(__file__).resolve().parents[4].joinpath("bsdkm.yml").read_text())
    assert not any(fips.is_fips(cfg.configure_flags(t, v)) for t, v in cfg.pairs(list(cfg.variants)))


# --------------------------------------------------------------------------- a whole release, FreeBSD double


def _tree(root: Path, version: str, bsdkm: bool) -> Path:
    root.mkdir(parents=True)
    (root / "configure").write_text("#!/bin/sh\n")
    (root / "configure.ac").write_text(f"AC_INIT([wolfssl],[{version}],[x])\n")
    if bsdkm:
        (root / "bsdkm").mkdir()
    return root


def test_release_through_the_freebsd_double(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """freebsd-kmod on "14.3": a plain and a FIPS variant; the previous tree (5.7.2) has no bsdkm/."""
    load_fips, boots = fips_kernel(tmp_path)

    def build_module(config, target, variant, source, cache, jobs, log, *_):
        ko = cache / "ko" / variant / "libwolfssl.ko"
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_text(" ".join(config.cflags(target, variant)))
        log.write_text("bsdkm/wolfkmod.c:10:3: warning: unused [-Wunused]\n")
        return ko

    def load_module(config, target, ko, work):
        if config.variants and fips.HASH_DEFINE in ko.read_text():
            return load_fips(ko, len(boots) + 1)[0]
        double = FreeBSDDouble.boot("success", work / "kernel")
        return run_freebsd_module(ko, work, timeout_s=20, privilege=[], env=double.env())

    monkeypatch.setattr(kernel, "build_module", build_module)
    monkeypatch.setattr(kernel, "load_module", load_module)
    # The stages build and load through the target itself: the same stand-ins there.
    monkeypatch.setattr(FreeBSDWorkerTarget, "build", lambda self, config, variant, *a: build_module(
        config, self.name, variant, *a))
    monkeypatch.setattr(FreeBSDWorkerTarget, "load", lambda self, config, ko, work: load_module(
        config, self.name, ko, work))
    monkeypatch.setattr(FreeBSDWorkerTarget, "check_worker", lambda self, config: None)  # not FreeBSD here
    config = parse_config(MATRIX.replace("  userspace: {flags: [--enable-cryptonly]}\n", "").replace(
        "targets: [userspace, freebsd-kmod]", "targets: [freebsd-kmod]")
        + f"cache_dir: {tmp_path / 'cache'}\n")
    cand = _tree(tmp_path / "cand", "5.9.2", bsdkm=True)
    prev = _tree(tmp_path / "prev", "5.7.2", bsdkm=False)
    out = tmp_path / "out"
    result = run_release(config, LocalSource(cand), LocalSource(prev), out, host_release="14.3",
                         progress=lambda _: None)
    doc = json.loads((out / "release.json").read_text())
    rows = {r["label"]: r for r in doc["matrix"]}
    assert rows["freebsd-kmod@14.3/fips"]["candidate"] == "ok"
    assert rows["freebsd-kmod@14.3/fips"]["previous"] == "not in previous"
    assert rows["freebsd-kmod@14.3/noasm"]["candidate"] == "ok"
    assert rows["freebsd-kmod@13.5/noasm"]["status"] == NOT_COVERED
    assert boots == ["mismatch", "success"]
    (fips_run,) = result.candidate.runs["freebsd-kmod@14.3/fips"]
    assert fips_run.metadata["fips"]["hash"] == ASKED and fips_run.metadata["os_release"] == "14.3"
    assert result.passed
    md = (out / "release.md").read_text()
    assert "not covered (no worker has tag freebsd-13.5-amd64)" in md and "not in previous" in md
    html = (out / "release.html").read_text()
    assert html.count("<svg") == 0 or "<svg" in html  # charts appear once items compare
    baseline = from_json((out / "baseline-5.9.json").read_text())
    assert sorted(r.variant for r in baseline) == ["fips", "noasm"]


def test_unknown_git_tag_exits_2_naming_it_before_anything_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess

    repo = _tree(tmp_path / "wolfssl", "5.9.2", bsdkm=True)
    for cmd in (["init", "-q"], ["add", "."], ["-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q",
                                               "-m", "x"], ["tag", "v5.9.2-stable"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    cfg = tmp_path / "bsdkm.yml"
    cfg.write_text(MATRIX + f"cache_dir: {tmp_path / 'cache'}\n")
    rc = main(["release", "--config", str(cfg), "--out", str(tmp_path / "out"), "--candidate",
               f"git:file://{repo}@v5.9.2-stable", "--previous", f"git:file://{repo}@v5.8.0-stable"])
    err = capsys.readouterr().err
    assert rc == 2
    want = f"unknown source: --previous git:file://{repo}@v5.8.0-stable: git fetch v5.8.0-stable failed"
    assert want in err
    assert not (tmp_path / "out" / "runs").exists()


def test_previous_release_that_fails_to_build_is_reported_and_the_candidate_judged_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from buildbot_bsdkm.pipeline.runtime.stage_error import real_error

    cand = _tree(tmp_path / "cand", "5.9.2", bsdkm=True)
    prev = _tree(tmp_path / "prev", "5.8.4", bsdkm=True)

    def build_module(config, target, variant, source, cache, jobs, log, *_):
        if Path(source) == prev:
            log.write_text("bsdkm/wolfkmod.c:3:1: error: unknown type name 'foo'\n")
            raise real_error("build", "compile", "compile failed: bsdkm/wolfkmod.c:3:1: error: unknown type")
        ko = cache / "ko" / variant / "libwolfssl.ko"
        ko.parent.mkdir(parents=True, exist_ok=True)
        ko.write_text("module")
        return ko

    def load_module(config, target, ko, work):
        double = FreeBSDDouble.boot("success", work / "kernel")
        return run_freebsd_module(ko, work, timeout_s=20, privilege=[], env=double.env())

    monkeypatch.setattr(kernel, "build_module", build_module)
    monkeypatch.setattr(kernel, "load_module", load_module)
    # The stages build and load through the target itself: the same stand-ins there.
    monkeypatch.setattr(FreeBSDWorkerTarget, "build", lambda self, config, variant, *a: build_module(
        config, self.name, variant, *a))
    monkeypatch.setattr(FreeBSDWorkerTarget, "load", lambda self, config, ko, work: load_module(
        config, self.name, ko, work))
    monkeypatch.setattr(FreeBSDWorkerTarget, "check_worker", lambda self, config: None)  # not FreeBSD here
    config = parse_config(MATRIX.replace("  userspace: {flags: [--enable-cryptonly]}\n", "").replace(
        "targets: [userspace, freebsd-kmod]", "targets: [freebsd-kmod]")
        + f"cache_dir: {tmp_path / 'cache'}\n")
    out = tmp_path / "out"
    result = run_release(config, LocalSource(cand), LocalSource(prev), out, variants=["noasm"],
                         host_release="14.3", progress=lambda _: None)
    (row,) = [r for r in result.comparison["matrix"] if r["status"] == RUN]
    assert row["candidate"] == "ok"
    assert row["previous"] == "FAILED build (real): compile failed: bsdkm/wolfkmod.c:3:1: error: unknown type"
    assert row["previous_failed_to_build"] and "selftests" not in row
    assert result.passed and any("not evaluated" in n for n in result.verdict.notes)  # no baseline
    md = (out / "release.md").read_text()
    assert "| freebsd-kmod@14.3/noasm | run (this host) | ok | FAILED build (real)" in md


def test_a_release_runs_outcomes_are_the_candidates_own_not_against_the_previous_one() -> None:
    from buildbot_bsdkm.pipeline.jobs.release import candidate_outcomes
    from buildbot_bsdkm.policy import load_policy
    from buildbot_bsdkm.support.resources import default_policy_path

    meta = {"wolfssl_version": "5.9.3", "fingerprint": {"id": "fp1"}}
    failed = RunResult("intelasm", "userspace", metadata=dict(meta), logs=[LogResult(
        source="test.log", selftest_summary=False, tests=[SelfTest("AES-GCM", False, "", -216)])])
    clean = RunResult("noasm", "userspace", metadata=dict(meta), logs=[LogResult(
        source="test.log", selftest_summary=True, tests=[SelfTest("AES-GCM", True)])])
    out = candidate_outcomes({"userspace/intelasm": [failed], "userspace/noasm": [clean]},
                             load_policy(default_policy_path()))
    by = {o["variant"]: o for o in out}
    assert by["intelasm"]["verdict"] == "fail" and "selftest: AES-GCM (-216)" in by["intelasm"]["signatures"]
    assert not any(s.startswith("selftest:") for s in by["noasm"]["signatures"])
    assert by["noasm"]["version"] == "5.9.3" and by["noasm"]["fingerprint"] == "fp1"
    assert not any(s.startswith("regression:") for o in out for s in o["signatures"])
