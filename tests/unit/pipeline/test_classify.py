"""Failure classification on real failure output: configure, compile, DNS, self-tests, hangs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES, fixture_text

from buildbot_bsdkm.config.bsdkm_yml import LocalSource, load_config, parse_config
from buildbot_bsdkm.model import FailureCategory, LogFormat
from buildbot_bsdkm.parsers import parse_file, parse_text
from buildbot_bsdkm.pipeline.job import Job
from buildbot_bsdkm.pipeline.runtime.source import wolfssl_source
from buildbot_bsdkm.pipeline.runtime.userspace_build import run_logged
from buildbot_bsdkm.pipeline.stages import run_stage
from buildbot_bsdkm.retry.classify_failure import Patterns, classify, first_compile_error

INFRA, REAL = FailureCategory.INFRASTRUCTURE, FailureCategory.REAL


def test_failed_selftest_names_algorithm_and_code_from_a_real_log() -> None:
    log = parse_file(FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt")
    f = classify("selftest", exit_code=1, log_results=[log], program="testwolfcrypt")
    assert (f.category, f.reason) == (REAL, "selftest")
    assert f.message == "self-test failed: PWDBASED (error -125)"


def test_linux_module_ecc_failure_from_the_real_console() -> None:
    text = fixture_text("linuxkm/asm-verbose-short-eccfail.console.log")
    log = parse_text(text, "console.log", LogFormat.LINUX_KERNEL_LOG)
    f = classify("load", exit_code=1, output=text, log_results=[log])
    assert (f.category, f.reason) == (REAL, "selftest")
    # This kernel run printed no wolfCrypt code, only the test's line: the message says so.
    assert f.message == "self-test failed: ECC (error L=39795)"


def test_curl_dns_failure_is_infrastructure() -> None:
    proc = subprocess.run(["curl", "-sS", "http://nonexistent.invalid/wolfssl.tar.gz"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0
    f = classify("fetch", exit_code=proc.returncode, output=proc.stderr)
    assert (f.category, f.reason) == (INFRA, "network")
    assert "Could not resolve host: nonexistent.invalid" in f.message


def _run_fixture_then_hang(tmp_path: Path, fixture: str, lines: int | None) -> tuple[Path, bool]:
    src = FIXTURES / fixture
    show = f"head -n {lines} {src}" if lines else f"cat {src}"
    log = tmp_path / "bench.log"
    res = run_logged(["/bin/sh", "-c", f"{show}; exec sleep 60"], cwd=tmp_path, log=log, timeout_s=2,
                     header=False)
    return log, res.timed_out


def test_complete_output_then_no_exit_is_infrastructure(tmp_path: Path) -> None:
    log, timed_out = _run_fixture_then_hang(tmp_path, "userspace/accel/bench_default.txt", None)
    assert timed_out
    parsed = parse_file(log, LogFormat.WOLFCRYPT_BENCH)
    assert parsed.complete
    f = classify("benchmark", exit_code=None, log_results=[parsed], timed_out=True, timeout_s=2,
                 program="benchmark")
    assert (f.category, f.reason) == (INFRA, "hung-after-complete")
    assert f.message == "benchmark finished its output but did not exit after 2 s"


def test_hang_part_way_is_real(tmp_path: Path) -> None:
    log, timed_out = _run_fixture_then_hang(tmp_path, "userspace/accel/bench_default.txt", 20)
    parsed = parse_file(log, LogFormat.WOLFCRYPT_BENCH)
    assert timed_out and not parsed.complete and parsed.benchmarks
    f = classify("benchmark", exit_code=None, log_results=[parsed], timed_out=True, timeout_s=2,
                 program="benchmark")
    assert (f.category, f.reason) == (REAL, "load-timeout")
    m = classify("load", exit_code=None, log_results=[parsed], timed_out=True, timeout_s=600)
    assert m.message == "module load timed out after 600 s" and m.category == REAL


def test_ci_side_exception_and_lost_worker() -> None:
    # What the CI itself said (the harness's text) is infrastructure; the same words in a build log are
    # the PR's to print, so they are not.
    trace = 'Exception in thread "main" java.lang.NullPointerException\n\tat hudson.Launcher.launch'
    f = classify("build", exit_code=1, harness=trace)
    assert (f.category, f.reason) == (INFRA, "ci-exception")
    assert "java.lang.NullPointerException" in f.message
    assert classify("build", exit_code=1, output=trace).category == REAL
    lost = "remote: slave lost\nprogram finished with exit code -1"
    assert classify("build", exit_code=None, harness=lost).category == INFRA
    assert classify("fetch", exit_code=None, output=lost).category == INFRA
    # Losing the worker while the module loads is the module's doing (panic, hang), not the network's.
    during_load = classify("load", exit_code=None, harness=lost)
    assert (during_load.category, during_load.reason) == (REAL, "panic")


# A source line the compiler echoes with its error: the PR wrote every word of it.
ECHOED_SOURCE = """\
  CC       wolfcrypt/src/libwolfssl_la-hash.lo
wolfcrypt/src/hash.c:42:2: error: #error "Connection refused: no route to host"
   42 | #error "Connection refused: no route to host"
      |  ^~~~~
make[2]: *** [Makefile:1234: wolfcrypt/src/libwolfssl_la-hash.lo] Error 1
"""


def test_a_compile_error_that_echoes_network_words_is_real() -> None:
    f = classify("build", exit_code=2, output=ECHOED_SOURCE)
    assert (f.category, f.reason) == (REAL, "compile")
    assert f.message.startswith("compile failed: wolfcrypt/src/hash.c:42:2: error:")
    # Even a line shaped like curl's, printed by the PR's Makefile, is the PR's.
    made_up = "curl: (7) Failed to connect to deb.debian.org port 80: Connection refused\n"
    assert classify("build", exit_code=2, output=made_up).category == REAL
    assert classify("configure", exit_code=1, output=made_up).category == REAL


def test_a_module_printing_connection_timed_out_before_a_failed_load_is_real() -> None:
    console = ("[    2.113] bsdkm_net: Connection timed out\nConnection timed out\n"
               "bsdkm-modload: load /lib/modules/bsdkm/bsdkm_net.ko: failed errno=22 (Invalid argument)\n")
    note = "finit_module failed: errno 22 (Invalid argument)"
    f = classify("load", exit_code=1, output=console, harness=note)
    assert f.category == REAL
    # The harness's own note still says when the VM never reached the module.
    g = classify("load", exit_code=None, output=console,
                 harness="no bsdkm-ci marker on the console: the initramfs /init never ran")
    assert (g.category, g.reason) == (INFRA, "worker-setup")


def test_a_real_failure_pattern_beats_an_infrastructure_one_in_the_same_output() -> None:
    out = ("fatal: unable to access 'https://example.invalid/x.git/': Connection reset by peer\n"
           "checksum mismatch for wolfssl_5.9.2.orig.tar.gz\n")
    f = classify("fetch", exit_code=1, output=out)
    assert (f.category, f.reason) == (REAL, "integrity")
    # A fetch's own tool lines are trusted: curl, git, apt.
    for line in ("curl: (7) Failed to connect to deb.debian.org port 80: Connection refused",
                 "fatal: unable to access 'https://github.com/x/y.git/': Could not resolve host: github.com",
                 "Err:1 http://deb.debian.org/debian sid InRelease "
                 "Temporary failure resolving 'deb.debian.org'"):
        g = classify("fetch", exit_code=1, output=f"some progress\n{line}\n")
        assert (g.category, g.reason) == (INFRA, "network"), line
    # ... but not the same words in a line no tool prints that way.
    assert classify("fetch", exit_code=1, output="note: Connection refused\n").category == REAL


def test_panic_in_a_console_beats_everything_else() -> None:
    out = "Could not resolve host: x\nKernel panic - not syncing: Fatal exception\n"
    f = classify("load", exit_code=None, output=out)
    assert (f.category, f.reason) == (REAL, "panic")
    assert "Kernel panic - not syncing" in f.message


def test_patterns_from_the_config_retry_block() -> None:
    cfg = parse_config("""\
targets: {userspace: {flags: []}}
variants: {noasm: {flags: [--disable-asm], targets: [userspace]}}
retry:
  infra_patterns: ["runner .* was evicted"]
  real_patterns: ["AddressSanitizer"]
""")
    pats = Patterns.with_extra(cfg.retry.infra_patterns, cfg.retry.real_patterns)
    f = classify("build", exit_code=2, harness="the runner ci-7 was evicted\n", patterns=pats)
    assert (f.category, f.reason) == (INFRA, "infra-pattern")
    # The config's own infrastructure patterns never read what the PR's build printed either.
    pr_said = classify("build", exit_code=2, output="the runner ci-7 was evicted\n", patterns=pats)
    assert pr_said.category == REAL
    g = classify("benchmark", exit_code=1, output="==1==ERROR: AddressSanitizer: heap-use-after-free\n",
                 patterns=pats)
    assert (g.category, g.reason) == (REAL, "real-pattern")
    assert classify("build", exit_code=2, output="the runner ci-7 was evicted\n").category == REAL


@pytest.fixture(scope="module")
def broken_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the real wolfSSL 5.9.2 tree whose settings.h no longer compiles."""
    copy = tmp_path_factory.mktemp("broken") / "wolfssl"
    shutil.copytree(wolfssl_source(), copy, symlinks=True)
    settings = copy / "wolfssl" / "wolfcrypt" / "settings.h"
    settings.write_text("this is not C;\n" + settings.read_text())
    return copy


def _job(tree: Path, out: Path, flags: str) -> Job:
    base = load_config(Path(__file__).resolve().parents[3] / "bsdkm.yml")
    cfg = parse_config(f"""\
source: {{local: {tree}}}
targets: {{userspace: {{flags: [--enable-cryptonly, --enable-crypttests]}}}}
variants: {{broken: {{flags: [{flags}], targets: [userspace]}}}}
cache_dir: {out / 'cache'}
""")
    assert isinstance(cfg.source, LocalSource) and base.timeouts
    return Job(cfg, "userspace", "broken", out, jobs=2, progress=lambda m: None)


@pytest.mark.slow
def test_real_configure_error_is_named(broken_tree: Path, tmp_path: Path) -> None:
    job = _job(broken_tree, tmp_path, "--disable-asm, --enable-fips=bogus")
    assert run_stage(job, "fetch") is None
    f = run_stage(job, "configure")
    assert f is not None
    assert (f.stage, f.category, f.reason) == ("configure", REAL, "configure")
    assert f.message.startswith('configure failed: configure: error: Invalid value for --enable-fips "bogus"')
    assert f.evidence == [str(tmp_path / "userspace" / "broken" / "build.log")]
    assert job.failure == f  # kept in state.json for the next `bsdkm-ci stage`


@pytest.mark.slow
def test_real_compile_error_names_the_first_error_line(broken_tree: Path, tmp_path: Path) -> None:
    job = _job(broken_tree, tmp_path, "--disable-asm")
    assert run_stage(job, "fetch") is None
    assert run_stage(job, "configure") is None
    f = run_stage(job, "build")
    assert f is not None
    assert (f.stage, f.category, f.reason) == ("build", REAL, "compile")
    log = (tmp_path / "userspace" / "broken" / "build.log").read_text()
    first = first_compile_error(log)
    assert first is not None and "settings.h:1:" in first and "error:" in first
    assert f.message == f"compile failed: {first}"
