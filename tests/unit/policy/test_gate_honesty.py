"""No PASS without evidence: the verdict word, the gross bound, unmatched baselines, mis-timed rows,
and JUnit whose failures point at their log line (as mikepenz's and dorny's readers resolve it).

The lost-acceleration pair is real: the shared userspace ``accel`` (AES-NI, intelasm) and ``noasm``
(``--disable-asm``) default benchmark tables of one wolfSSL, parsed as ``freebsd-kmod/asm``.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import FIXTURES
from junit_readers import dorny_annotations, mikepenz_annotations, validate

from buildbot_bsdkm.github.aggregate import SUCCESS, BuildFacts, PrReport
from buildbot_bsdkm.model import RunResult, to_json
from buildbot_bsdkm.parsers import parse_file, parse_text
from buildbot_bsdkm.policy import BaselineMismatch, evaluate, load_policy, parse_policy
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import markdown_report

ROOT = Path(__file__).resolve().parents[3]
BSDKM_CI = Path(sys.executable).parent / "bsdkm-ci"
ASM_TABLE = FIXTURES / "userspace" / "accel" / "bench_default.txt"
NOASM_TABLE = FIXTURES / "userspace" / "noasm" / "bench_default.txt"
RECORDINGS = sorted((ROOT / "bench" / "data").glob("noise-*"))


def cli(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BSDKM_CI), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def run_of(path: Path, target: str = "freebsd-kmod", variant: str = "asm") -> RunResult:
    return RunResult(variant, target, logs=[parse_file(path)])


def results_doc(tmp: Path, name: str, table: Path) -> Path:
    p = cli("parse", "--json", "--target", "freebsd-kmod", "--variant", "asm", table)
    assert p.returncode == 0, p.stderr
    out = tmp / name
    out.write_text(p.stdout, encoding="utf-8")
    return out


def healthy_pairs() -> list[tuple[str, RunResult, RunResult]]:
    """Two healthy runs of each variant of every recording (ours and the shared ten), as base, head."""
    pairs = []
    for rec in RECORDINGS:
        first: dict[str, list[str]] = {}
        for line in (rec / "runs.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r["exit"] == 0 and len(first.setdefault(r["variant"], [])) < 2:
                first[r["variant"]].append(r["file"])
        for variant, files in first.items():
            logs = [parse_text(gzip.decompress((rec / f).read_bytes()).decode(), f) for f in files]
            pairs.append((f"{rec.name}/{variant}", RunResult(variant, "userspace", logs=[logs[0]]),
                          RunResult(variant, "userspace", logs=[logs[1]])))
    for variant in ("accel", "noasm"):
        a, b = (FIXTURES / "noise" / f"{variant}_r{n}.txt" for n in ("01", "03"))
        pairs.append((f"shared/{variant}", run_of(a, "userspace", variant), run_of(b, "userspace", variant)))
    return pairs


# --------------------------------------------------------------------------- the verdict word


def test_one_vs_one_healthy_pair_is_inconclusive_never_pass() -> None:
    base, head = run_of(FIXTURES / "noise" / "accel_r01.txt"), run_of(FIXTURES / "noise" / "accel_r03.txt")
    v = evaluate([head], load_policy(), [base])
    assert v.passed and v.status == "inconclusive" and v.accepted  # exit 0 under the default policy
    n = len(v.inconclusive)
    assert n == 28  # 27 items and the geometric mean, each at 1 vs 1
    assert v.headline().startswith(f"⚠️ INCONCLUSIVE: {n} gated item(s) not judged")
    assert "PASS" not in v.summary()
    assert f"⚠️ INCONCLUSIVE: {n} gated item(s)" in markdown_report([head], v)
    assert 'aria-label="inconclusive">' in html_report([head], v)  # the mark drawn, not an emoji
    assert f"</svg> INCONCLUSIVE: {n} gated item(s)" in html_report([head], v)
    doc = v.to_dict()
    assert (doc["verdict"], doc["inconclusive"]) == ("inconclusive", n)
    strict = parse_policy("perf: {inconclusive: fail}\nregressions:\n"
                          "  - {pattern: '*', max_pct: 2, limit: learned, detect_pct: 25}\n", "strict.yml")
    v2 = evaluate([head], strict, [base])
    assert v2.status == "inconclusive" and not v2.accepted
    assert v2.summary().endswith("the policy fails unjudged items")


def test_pr_comment_and_commit_status_say_inconclusive() -> None:
    base, head = run_of(FIXTURES / "noise" / "accel_r01.txt"), run_of(FIXTURES / "noise" / "accel_r03.txt")
    report = PrReport(load_policy(), [base]).verdict([head])  # the comment is markdown_report of it
    assert report.status == "inconclusive"
    assert "⚠️ INCONCLUSIVE: 28 gated item(s)" in markdown_report([head], report)
    build = BuildFacts("freebsd-kmod", "asm", SUCCESS, properties={"bsdkm_results": to_json([head])})
    status = PrReport(load_policy(), [base]).report([build]).status(build.context)
    assert status is not None
    state, text = status.state, status.description
    assert state == "success" and text.startswith("⚠️ inconclusive: 28 gated item(s) not judged")
    assert "passed" not in text


def test_compare_and_junit_exit_status_follow_the_verdict_word(tmp_path: Path) -> None:
    a1 = results_doc(tmp_path, "a1.json", FIXTURES / "noise" / "accel_r01.txt")
    a3 = results_doc(tmp_path, "a3.json", FIXTURES / "noise" / "accel_r03.txt")
    out = tmp_path / "v.json"
    p = cli("compare", a1, a3, "--json", out)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("⚠️ INCONCLUSIVE: 28 gated item(s) not judged")
    assert json.loads(out.read_text())["verdict"] == "inconclusive"
    strict = tmp_path / "strict.yml"
    strict.write_text(ROOT.joinpath("policies/default.yml").read_text().replace(
        "inconclusive: pass", "inconclusive: fail"))
    p = cli("compare", a1, a3, "--policy", strict)
    assert p.returncode == 1 and p.stdout.startswith("⚠️ INCONCLUSIVE"), p.stdout + p.stderr


# --------------------------------------------------------------------------- the gross bound


def test_lost_acceleration_fails_at_one_vs_one() -> None:
    v = evaluate([run_of(NOASM_TABLE)], load_policy(), [run_of(ASM_TABLE)])
    assert v.status == "fail" and not v.accepted
    gcm = next(c for c in v.regressions if c.name == "AES-128-GCM-enc")
    assert gcm.delta_pct < -90 and "gross bound 13.5x" in gcm.message


@pytest.mark.parametrize("name,base,head", healthy_pairs(), ids=lambda x: x if isinstance(x, str) else "")
def test_a_healthy_one_vs_one_pair_never_fails(name: str, base: RunResult, head: RunResult) -> None:
    for b, h in ((base, head), (head, base)):
        v = evaluate([h], load_policy(), [b])
        assert not v.regressions, (name, [c.message for c in v.regressions])
        assert v.status == "inconclusive"


def test_the_default_policy_states_the_bound_and_its_source() -> None:
    text = ROOT.joinpath("policies/default.yml").read_text()
    assert "gross_ratio: 13.5" in text and "bench/gross_bound.py" in text
    assert load_policy().perf.gross_ratio == 13.5
    assert "13.5x" in ROOT.joinpath("bench/results/gross_bound.md").read_text()
    with pytest.raises(ValueError, match="must be above 1"):
        parse_policy("perf: {gross_ratio: 0.5}\n")


def test_compare_and_junit_fail_the_asm_noasm_pair(tmp_path: Path) -> None:
    asm = results_doc(tmp_path, "ASM.json", ASM_TABLE)
    noasm = results_doc(tmp_path, "NOASM.json", NOASM_TABLE)
    p = cli("compare", asm, noasm)
    assert p.returncode == 1 and p.stdout.startswith("❌ FAIL"), p.stdout + p.stderr
    assert "AES-128-GCM-enc" in p.stdout.split("### Failures", 1)[1]
    # the junit: a text log (unknown/unknown) against a freebsd-kmod/asm baseline
    p = cli("junit", NOASM_TABLE, "--baseline", asm, "-o", tmp_path / "j.xml")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "the baseline's freebsd-kmod/asm run(s) compared with the head's unknown/unknown" in p.stdout
    assert "unknown/unknown regression: AES-128-GCM-enc: -96.3%" in p.stdout


# --------------------------------------------------------------------------- unmatched baselines


def test_a_baseline_that_matches_nothing_is_an_error_naming_both_sides(tmp_path: Path) -> None:
    base = [run_of(ASM_TABLE, "freebsd-kmod", "asm"), run_of(ASM_TABLE, "freebsd-kmod", "aesni")]
    with pytest.raises(BaselineMismatch, match=r"baseline has freebsd-kmod/aesni, freebsd-kmod/asm; "
                                               r"the head has unknown/unknown"):
        evaluate([run_of(NOASM_TABLE, "unknown", "unknown")], load_policy(), base)
    doc = tmp_path / "two.json"
    asm = json.loads(results_doc(tmp_path, "ASM.json", ASM_TABLE).read_text())
    asm["runs"].append(dict(asm["runs"][0], variant="aesni"))
    doc.write_text(json.dumps(asm))
    p = cli("junit", NOASM_TABLE, "--baseline", doc, "-o", tmp_path / "j.xml")
    assert p.returncode == 2
    assert "the baseline has freebsd-kmod/aesni, freebsd-kmod/asm; the head has unknown/unknown" in p.stderr


def test_one_run_a_side_under_different_names_is_paired_with_a_note() -> None:
    v = evaluate([run_of(NOASM_TABLE, "unknown", "unknown")], load_policy(), [run_of(ASM_TABLE)])
    assert any("compared with the head's unknown/unknown" in n for n in v.notes)
    assert not any("no baseline and no history" in n for n in v.notes)
    assert v.status == "fail"


# --------------------------------------------------------------------------- mis-timed rows

# A PR #9714-style FreeBSD table: every row's rate x cycles is 3.4 GHz, the RNG row's 1.3 GHz.
PR9714_TABLE = """wolfCrypt Benchmark (block bytes 1048576, min 1.0 sec each)
AES-128-CBC-enc          1700.0 MiB took 1.000 seconds, 1700.000 MiB/s Cycles per byte = 1.91
AES-128-GCM-enc          4100.0 MiB took 1.000 seconds, 4100.000 MiB/s Cycles per byte = 0.79
SHA-256                  1500.0 MiB took 1.000 seconds, 1500.000 MiB/s Cycles per byte = 2.16
SHA-512                  780.0 MiB took 1.000 seconds, 780.000 MiB/s Cycles per byte = 4.16
RNG SHA-256 DRBG         65.0 MiB took 1.000 seconds, 65.000 MiB/s Cycles per byte = 19.07
Benchmark complete
"""


def test_mis_timed_row_is_marked_without_a_baseline(tmp_path: Path) -> None:
    table = tmp_path / "pr9714.log"
    table.write_text(PR9714_TABLE)
    run = run_of(table)
    v = evaluate([run], load_policy())
    (row,) = v.mis_timed
    assert row["name"] == "RNG SHA-256 DRBG" and row["line"] == 6
    assert abs(row["clock_hz"] / 1.3e9 - 1) < 0.02 and abs(row["log_hz"] / 3.4e9 - 1) < 0.02
    assert any("RNG SHA-256 DRBG is mis-timed" in n and "1.30 GHz" in n and "3.40 GHz" in n for n in v.notes)
    rng_row = next(ln for ln in markdown_report([run], v).splitlines() if ln.startswith("| RNG SHA-256 DRBG"))
    assert "mis-timed" in rng_row
    assert [n for n in v.notes if "mis-timed" in n] and len(v.mis_timed) == 1
    p = cli("junit", table, "-o", tmp_path / "j.xml", cwd=tmp_path)
    assert "RNG SHA-256 DRBG is mis-timed" in p.stdout, p.stdout + p.stderr
    assert "clock: mis-timed: rate x cycles implies 1.30 GHz" in (tmp_path / "j.xml").read_text()


# --------------------------------------------------------------------------- JUnit that points at the line


@pytest.fixture(scope="module")
def failing_junit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """A workspace with logs below directories; junit over a failing self-test, a cut-off log, a
    regression against a baseline and a missing required item, run from the workspace."""
    ws = tmp_path_factory.mktemp("ws")
    logs = ws / "logs" / "userspace" / "intelasm"
    logs.mkdir(parents=True)
    shutil.copy(FIXTURES / "userspace/accel/testwolfcrypt_FAIL_ulimit_v8000.txt", logs / "selftest.log")
    shutil.copy(NOASM_TABLE, logs / "bench.log")
    shutil.copy(FIXTURES / "userspace/noasm/bench_timeout3_KILL.txt", logs / "cut.log")
    base = ws / "base.json"
    p = cli("parse", "--json", "--target", "userspace", "--variant", "intelasm", ASM_TABLE)
    base.write_text(p.stdout)
    policy = ws / "policy.yml"
    policy.write_text(ROOT.joinpath("policies/default.yml").read_text().replace(
        'pattern: "SHA-256"', 'pattern: "SHA3-999"'))
    out = ws / "junit.xml"
    rel = ["logs/userspace/intelasm/selftest.log", "logs/userspace/intelasm/bench.log",
           "logs/userspace/intelasm/cut.log"]
    p = cli("junit", *rel, "--target", "userspace", "--variant", "intelasm", "--baseline", base,
            "--policy", policy, "-o", out, cwd=ws)
    assert p.returncode == 1, p.stdout + p.stderr
    return ws, out, rel


def _line(ws: Path, path: str, line: int) -> str:
    return (ws / path).read_text(errors="replace").splitlines()[line - 1]


def test_every_failure_names_its_log_line_for_mikepenz(failing_junit) -> None:
    ws, out, rel = failing_junit
    validate(out.read_bytes(), str(out))
    found = mikepenz_annotations(out)
    assert len(found) >= 5
    for a in found:
        assert a.path in rel, a  # a real, relative log path: never a classname
        assert a.line > 1, a
        text = _line(ws, a.path, a.line)
        if a.test.startswith(("AES-", "RNG", "SHA", "GMAC", "CHACHA", "ECC", "RSA", "DH")):
            assert text.startswith(a.test), (a, text)  # the benchmark row itself
    by_test = {a.test: a for a in found}
    assert "PWDBASED" in _line(ws, by_test["PWDBASED"].path, by_test["PWDBASED"].line)
    assert by_test["AES-128-GCM-enc"].path == "logs/userspace/intelasm/bench.log"
    cut = by_test["complete:cut.log"]  # the cut-off log: where it ends
    assert cut.path == "logs/userspace/intelasm/cut.log"
    assert cut.line == len((ws / cut.path).read_text(errors="replace").splitlines())
    missing = by_test["required:SHA3-999"]
    assert missing.path in rel and missing.line > 1


def test_every_failure_names_its_log_line_for_dorny(failing_junit) -> None:
    ws, out, rel = failing_junit
    mikepenz = {(a.suite, a.test): (a.path, a.line) for a in mikepenz_annotations(out)}
    dorny = dorny_annotations(out, tracked=rel)
    assert dorny and all(mikepenz[(a.suite, a.test)] == (a.path, a.line) for a in dorny), dorny


def test_missing_required_item_says_missing(failing_junit) -> None:
    _, out, _ = failing_junit
    text = out.read_text()
    start = text.index('name="required:SHA3-999"')
    case = text[start:text.index("</testcase>", start)]
    assert "required: missing" in case and "required: 0.00" not in case
    assert "log: logs/userspace/intelasm/" in case


def test_test_names_are_the_same_from_any_directory(failing_junit, tmp_path: Path) -> None:
    ws, out, rel = failing_junit
    again = tmp_path / "again.xml"
    p = cli("junit", *[ws / r for r in rel], "--target", "userspace", "--variant", "intelasm",
            "--baseline", ws / "base.json", "--policy", ws / "policy.yml", "-o", again, cwd=tmp_path)
    assert p.returncode == 1, p.stderr

    def names(path: Path) -> list[tuple[str, str]]:
        return [(a.suite, a.test) for a in mikepenz_annotations(path)]

    assert names(again) == names(out)
    assert str(ws) not in "".join(t for _, t in names(again))
    assert all(not t.startswith("complete:/") for _, t in names(again))


def test_suites_have_one_log_each() -> None:
    from buildbot_bsdkm.report.junit import junit_xml

    run = RunResult("intelasm", "userspace", logs=[parse_file(FIXTURES / "userspace/accel/testwolfcrypt.txt"),
                                                    parse_file(FIXTURES / "noise/accel_r01.txt")])
    v = evaluate([run], load_policy())
    text = junit_xml([run], v)
    suites = list(ET.fromstring(text.encode()).iter("testsuite"))
    assert suites and all(s.get("file") for s in suites)
    assert all(not os.path.isabs(s.get("file", "")) for s in suites)
    assert len({s.get("name") for s in suites}) == len(suites)
    assert len(suites) == 3  # the self-test part's two logs, the benchmark part's one


def test_testcase_files_give_enricomi_the_log_line(failing_junit) -> None:
    """EnricoMi/publish-unit-test-result-action (python/publish/junit.py) reads a testcase's own
    ``file`` and ``line`` attributes and nothing else; ``--testcase-files`` writes them (the file is then
    outside junit-10.xsd, which is why they are not written by default)."""
    import junitparser

    ws, out, rel = failing_junit
    with_attrs = ws / "junit-with-testcase-files.out"  # not *.xml: the suite validates those against the xsd
    p = cli("junit", *rel, "--target", "userspace", "--variant", "intelasm", "--baseline", ws / "base.json",
            "--policy", ws / "policy.yml", "--testcase-files", "-o", with_attrs, cwd=ws)
    assert p.returncode == 1, p.stderr
    xml = junitparser.JUnitXml.fromfile(str(with_attrs))
    failed = [(case._elem.get("file"), case._elem.get("line"), case.name)
              for suite in xml for case in suite if case.result and not case.is_skipped]
    assert len(failed) == len(mikepenz_annotations(out))
    by_mikepenz = {a.test: (a.path, a.line) for a in mikepenz_annotations(out)}
    for file, line, name in failed:
        assert (file, int(line)) == by_mikepenz[name]


def test_every_shell_says_inconclusive() -> None:
    """The Buildbot gate step's summary, the Action's verdict output and the release report read the
    core's one word (Verdict.status) rather than deciding it themselves."""
    from buildbot_bsdkm.buildbot.summaries import verdict_summary
    from buildbot_bsdkm.commands.action.results import RunOutcome
    from buildbot_bsdkm.report.release_report import _word

    base, head = run_of(FIXTURES / "noise" / "accel_r01.txt"), run_of(FIXTURES / "noise" / "accel_r03.txt")
    v = evaluate([head], load_policy(), [base])
    assert verdict_summary(v.to_dict()).startswith("gate INCONCLUSIVE (INCONCLUSIVE: 28 gated item(s)")
    outcome = RunOutcome([head], v, "", None, [])
    assert outcome.verdict_word() == "inconclusive" and outcome.passed
    assert outcome.outputs()["summary"].startswith("INCONCLUSIVE: 28")
    assert _word({"passed": True, "status": v.status}, marked=True) == "⚠️ INCONCLUSIVE"
    assert _word({"passed": True}) == "PASS"  # a document written before the word existed
