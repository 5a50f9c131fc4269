"""A FreeBSD self-test failure that printed only wolfcrypt_test's return code, named from the build's own
wolfcrypt/test/test.{c,h} and error-crypt.h: wolfSSL 5.9.2 (Debian sid) and 5.7.2 (Debian trixie), real.

REAL: the sources (Debian's tarballs, fetched once into the shared cache by the project's own fetch and
checked by SHA-256), the FreeBSD console ``planted_debug-kernel_noasm_sha256-kat-selftest-fail.log``.
CONSTRUCTED: test.c with lines added above the failure and the console it gives (the return code the
real kernel printed for three added lines, -1610718634), the second planted failure's return code (an
AES-GCM error code at a line found in test.c by its text) and the base outcomes.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from conftest import SHARED

from buildbot_bsdkm.bisection.search import Commit, Outcome, Purpose, bisect
from buildbot_bsdkm.config.bsdkm_yml import DebianSource
from buildbot_bsdkm.model import RunResult, StageFailure
from buildbot_bsdkm.parsers import parse_text
from buildbot_bsdkm.pipeline.jobs.bisect import FailureSpec, failure_outcome
from buildbot_bsdkm.pipeline.runtime.source import cache_root, debian_tarball
from buildbot_bsdkm.policy import evaluate, load_policy
from buildbot_bsdkm.report.junit import junit_xml
from buildbot_bsdkm.report.markdown import markdown_report
from buildbot_bsdkm.retry.classify_failure import selftest_failure
from buildbot_bsdkm.support.resources import default_policy_path
from buildbot_bsdkm.triage.classify_checks import TriageInputs
from buildbot_bsdkm.triage.outcomes import BaseOutcome
from buildbot_bsdkm.triage.selftest_source import (
    TestSource,
    TestSourceError,
    name_failures,
    read_encoding,
)

LOGS = SHARED / "freebsd" / "logs"
PLANTED = LOGS / "planted_debug-kernel_noasm_sha256-kat-selftest-fail.log"
PASSING = LOGS / "main-job_debug-kernel_noasm_selftest-pass.log"
MEMBERS = ("wolfcrypt/test/test.c", "wolfcrypt/test/test.h", "wolfssl/wolfcrypt/error-crypt.h")
TARGET = "freebsd-kmod-qemu"
ADDED = "/* one */\n/* two */\n/* three */\n"


def _tree(suite: str, version: str, dest: Path) -> Path:
    tarball, _, _ = debian_tarball(DebianSource(suite=suite, version=version), cache_root())
    root = dest / f"wolfssl-{version}"
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            rel = m.name.split("/", 1)[-1]
            if rel in MEMBERS:
                out = root / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(tf.extractfile(m).read())  # type: ignore[union-attr]
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("wolfssl-src")
    return {"5.9.2": _tree("sid", "5.9.2", base), "5.7.2": _tree("trixie", "5.7.2", base)}


def _shifted(tree: Path, dest: Path, text: str = ADDED) -> Path:
    """A copy of ``tree`` whose test.c has ``text`` added at its top (what a PR adding lines does)."""
    for rel in MEMBERS:
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        body = (tree / rel).read_text(encoding="utf-8", errors="replace")
        out.write_text(text + body if rel.endswith("test.c") else body, encoding="utf-8")
    return dest


def _run(console: str, source: object, sha: str = "c0ffee") -> RunResult:
    log = parse_text(console, "console-debug.log")
    stale = selftest_failure("load", [log], ["console-debug.log"])
    assert stale is not None
    stale.part = "debug kernel"  # as the FreeBSD QEMU target says which kernel failed
    stale.message = f"debug kernel: {stale.message}"
    failure = name_failures([log], stale, source)  # type: ignore[arg-type]
    return RunResult("noasm", TARGET, [log], failure,
                     metadata={"wolfssl_version": "5.9.2", "source_commit": sha})


def _line_of(test_c: Path, function: str, needle: str) -> int:
    ts = TestSource.from_tree(test_c.parents[2])
    f = next(f for f in ts.functions if f.name == function)
    return next(n for n in range(f.first, f.last + 1) if needle in ts.lines[n - 1])


def _encoded(line: int, number: int, tag: int) -> int:
    return -(line + number * 100000 + (tag << 29))


def test_real_freebsd_console_is_sha256_kat_vector_1_with_the_test_c_line(trees: dict[str, Path]) -> None:
    run = _run(PLANTED.read_text(errors="replace"), trees["5.9.2"])
    (test,) = [t for t in run.tests if not t.passed]
    assert test.name == "SHA-256"
    assert ("(sha256_kat_test, vector 1) at test.c:5895: `ERROR_OUT(WC_TEST_RET_ENC_I(i), exit);`"
            in test.error)
    assert "console: error: wolfcrypt test failed: -1610718631" in test.error
    assert run.failure is not None
    assert run.failure.message.startswith("debug kernel: self-test failed: SHA-256 (")
    verdict = evaluate([run], load_policy(default_policy_path()))
    sigs = {c.signature for c in verdict.checks if not c.passed}
    assert sigs == {"selftest: SHA-256"}, sigs  # the self-test's check and the stage's: one cause
    report = markdown_report([run], verdict).replace("\\_", "_")  # Markdown escapes the underscores
    assert "SHA-256" in report and "sha256_kat_test, vector 1" in report and "wolfcrypt_test" not in report
    assert 'name="SHA-256"' in junit_xml([run], verdict)
    decoded = next(ev.detail for ev in run.logs[0].lifecycle if ev.kind == "selftest_failed")
    assert decoded["decoded_function"] == "sha256_kat_test" and decoded["decoded_line"] == 5895


def test_lines_added_above_the_failure_change_the_code_not_the_name(trees: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    shifted = _shifted(trees["5.9.2"], tmp_path / "pr")
    console = PLANTED.read_text(errors="replace").replace("-1610718631", "-1610718634")
    run = _run(console, shifted)
    (test,) = [t for t in run.tests if not t.passed]
    assert test.name == "SHA-256" and "at test.c:5898" in test.error
    verdict = evaluate([run], load_policy(default_policy_path()))
    assert {c.signature for c in verdict.checks if not c.passed} == {"selftest: SHA-256"}


@pytest.mark.parametrize("version", ["5.9.2", "5.7.2"])
def test_each_release_decodes_by_its_own_test_c(trees: dict[str, Path], version: str) -> None:
    tree = trees[version]
    ts = TestSource.from_tree(tree)
    assert ts.encoding.multiplier == 100000 and ts.encoding.shift == 29
    assert ts.encoding.tags == {0: "nothing", 1: "code", 2: "errno", 3: "index"}
    test_c = tree / "wolfcrypt/test/test.c"
    # SHA-256's known answer, by its text in this release's test.c (5895 in 5.9.2, elsewhere in 5.7.2)
    kat = _line_of(test_c, "sha256_kat_test" if version == "5.9.2" else "sha256_test",
                   "XMEMCMP(hash, test_sha[i].output")
    d = ts.decode(_encoded(kat + 1, 1, 3))
    assert (d.name, d.carries, d.number) == ("SHA-256", "index", 1), d
    # the second planted failure: AES-GCM returning an out-of-memory error code
    gcm = _line_of(test_c, "aesgcm_test", "WC_TEST_RET_ENC_EC(ret)")
    d = ts.decode(_encoded(gcm, 125, 1))
    assert (d.name, d.test_function, d.number) == ("AES-GCM", "aesgcm_test", -125), d
    assert d.number_name is not None and d.number_name.startswith("MEMORY_E")
    # the same line with lines added above: the same test
    assert TestSource.from_texts(ADDED + test_c.read_text(errors="replace"),
                                 (tree / "wolfcrypt/test/test.h").read_text()).decode(
        _encoded(gcm + 3, 125, 1)).name == "AES-GCM"
    assert version != "5.9.2" or kat + 1 == 5895


def test_second_planted_failure_is_named_and_keeps_its_code(trees: dict[str, Path]) -> None:
    test_c = trees["5.9.2"] / "wolfcrypt/test/test.c"
    value = _encoded(_line_of(test_c, "aesgcm_test", "WC_TEST_RET_ENC_EC(ret)"), 125, 1)
    run = _run(PLANTED.read_text(errors="replace").replace("-1610718631", str(value)), trees["5.9.2"])
    verdict = evaluate([run], load_policy(default_policy_path()))
    assert {c.signature for c in verdict.checks if not c.passed} == {"selftest: AES-GCM (-125)"}


def test_without_the_source_the_name_is_unknown_and_the_line_kept(tmp_path: Path) -> None:
    run = _run(PLANTED.read_text(errors="replace"), tmp_path / "nowhere")
    (test,) = [t for t in run.tests if not t.passed]
    assert test.name == "wolfcrypt_test"
    assert "name unknown:" in test.error and "test.c" in test.error and "not found" in test.error
    verdict = evaluate([run], load_policy(default_policy_path()))
    assert {c.signature for c in verdict.checks if not c.passed} == {
        "selftest: name unknown (test.c:5895, vector 1)"}
    # a log judged alone, never named: the same signature, never the raw number
    alone = RunResult("noasm", TARGET, [parse_text(PLANTED.read_text(errors="replace"), "console-debug.log")])
    verdict = evaluate([alone], load_policy(default_policy_path()))
    assert {c.signature for c in verdict.checks if not c.passed} == {
        "selftest: name unknown (test.c:5895, vector 1)"}
    assert "the test's name needs the build's test.c" in markdown_report([alone], verdict)


ERRNO_H = Path("/usr/include/asm-generic/errno-base.h")  # this Linux host's own numbering


@pytest.mark.skipif(not ERRNO_H.is_file(), reason="no Linux errno-base.h on this host")
def test_an_errno_is_named_by_the_targets_own_errno_h(trees: dict[str, Path]) -> None:
    test_c = trees["5.9.2"] / "wolfcrypt/test/test.c"
    line = _line_of(test_c, "sha256_kat_test", "XMEMCMP(hash, test_sha[i].output") + 1
    value = _encoded(line, 11, 2)
    linux = TestSource.from_tree(trees["5.9.2"], ERRNO_H).decode(value)
    assert (linux.name, linux.carries, linux.what) == ("SHA-256", "errno", "errno 11 (EAGAIN)")
    # FreeBSD numbers EAGAIN 35 and 11 EDEADLK: without the target's errno.h the number stays unnamed
    assert TestSource.from_tree(trees["5.9.2"]).decode(value).what == "errno 11"


def _base(sig: str) -> BaseOutcome:
    return BaseOutcome(TARGET, "noasm", "debug", "fail", [sig], "b" * 40, "5.9.2", "2026-12-01")


def test_pre_existing_through_a_pr_that_adds_lines_and_old_signatures_migrate(trees: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    policy = load_policy(default_policy_path())
    base_run = _run(PLANTED.read_text(errors="replace"), trees["5.9.2"], "b" * 40)
    base_sig = {c.signature for c in evaluate([base_run], policy).checks if not c.passed}
    assert base_sig == {"selftest: SHA-256"}
    head = _run(PLANTED.read_text(errors="replace").replace("-1610718631", "-1610718634"),
                _shifted(trees["5.9.2"], tmp_path / "pr"))
    verdict = evaluate([head], policy, triage=TriageInputs(base=[_base("selftest: SHA-256")]))
    assert {c.triage for c in verdict.checks if not c.passed} == {"pre-existing"}
    assert verdict.passed
    # a base outcome recorded in the old form (the raw number) still matches the same line, with a note
    same_line = _run(PLANTED.read_text(errors="replace"), trees["5.9.2"])
    verdict = evaluate([same_line], policy,
                       triage=TriageInputs(base=[_base("selftest: wolfcrypt_test (-1610718631)")]))
    assert {c.triage for c in verdict.checks if not c.passed} == {"pre-existing"}
    assert any("recorded before self-test failures were named" in n and
               "selftest: name unknown (test.c:5895, vector 1)" in n for n in verdict.notes), verdict.notes
    assert not verdict.triage["fixed"]


def test_naming_reads_the_failures_fields_never_their_words(trees: dict[str, Path]) -> None:
    """The return code and console line are the test's fields, the kernel the stage failure's part:
    the words the parser and the target print around them may change."""
    log = parse_text(PLANTED.read_text(errors="replace"), "console-debug.log")
    (test,) = log.failed_tests
    test.error = "wolfcrypt_test's failure, said in other words"
    failure = StageFailure("load", "debug kernel: the module's self-test failed", reason="selftest",
                           part="debug kernel")
    named = name_failures([log], failure, trees["5.9.2"])
    assert test.name == "SHA-256" and test.decoded is not None
    assert (test.decoded["function"], test.decoded["line"]) == ("sha256_kat_test", 5895)
    assert test.error.endswith("; console: error: wolfcrypt test failed: -1610718631")
    assert named is not None and named.part == "debug kernel"
    assert named.message.startswith("debug kernel: self-test failed: SHA-256 (")
    assert name_failures([log], named, trees["5.9.2"]) is named  # named once


def test_naming_twice_changes_nothing(trees: dict[str, Path]) -> None:
    run = _run(PLANTED.read_text(errors="replace"), trees["5.9.2"])
    before = [(t.name, t.error) for t in run.tests]
    assert name_failures(run.logs, run.failure, trees["5.9.2"]) is run.failure
    assert [(t.name, t.error) for t in run.tests] == before


def test_bisection_names_the_same_test_before_and_after_the_culprit(trees: dict[str, Path],
                                                                    tmp_path: Path) -> None:
    """Commits 0-3 pass, 4 plants the SHA-256 failure; 2 and 6 add lines to test.c above it."""
    policy = load_policy(default_policy_path())
    history = [Commit(f"{i:040x}", f"commit {i}") for i in range(8)]
    culprit, shifts = 4, {2, 6}
    good = PASSING.read_text(errors="replace")
    planted = PLANTED.read_text(errors="replace")
    named: list[str] = []

    def run(commit: Commit, purpose: Purpose):  # type: ignore[no-untyped-def]
        i = int(commit.sha, 16)
        added = sum(3 for s in shifts if s <= i)
        tree = _shifted(trees["5.9.2"], tmp_path / commit.sha[-2:], ADDED * (added // 3)) if added \
            else trees["5.9.2"]
        console = planted.replace("-1610718631", str(-1610718631 - added)) if i >= culprit else good
        r = _run(console, tree, commit.sha) if i >= culprit else RunResult(
            "noasm", TARGET, [parse_text(console, "console-debug.log")])
        probe = failure_outcome(FailureSpec("selftest: SHA-256"), r, evaluate([r], policy))
        if probe.outcome == Outcome.BAD:
            named.append(probe.evidence["signature"])
        return probe

    result = bisect(history, run)
    assert result.culprit is not None and result.culprit.sha == history[culprit].sha, result.to_dict()
    assert named and set(named) == {"selftest: SHA-256"}


def test_a_test_h_of_another_shape_is_refused_with_its_reason() -> None:
    with pytest.raises(TestSourceError, match="no WC_TEST_RET_ENC macro"):
        read_encoding("#define SOMETHING_ELSE 1\n")
    with pytest.raises(TestSourceError, match="shape the decoder does not know"):
        read_encoding("#define WC_TEST_RET_ENC(line, i, tag) ((line) * 2)\n")
    with pytest.raises(TestSourceError, match="no wolfcrypt_test function"):
        TestSource.from_texts("int main(void)\n{\n    return 0;\n}\n",
                              "#define WC_TEST_RET_TAG_I 3L\n#define WC_TEST_RET_ENC(line, i, tag) "
                              "(-((line) + ((word32)(i) & 0x7ffL) * 100000L) + ((tag) << 29L)))\n"
                              "#define WC_TEST_RET_ENC_I(i) "
                              "WC_TEST_RET_ENC(WC_TEST_RET_LN, i, WC_TEST_RET_TAG_I)\n")
