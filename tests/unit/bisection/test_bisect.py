"""The bisection's search logic against a fake runner: good/bad/skip per commit, flaky, verification."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from buildbot_bsdkm.bisection.search import (
    BisectSettings,
    Commit,
    Outcome,
    Probe,
    Purpose,
    bisect,
    build_limit,
    next_index,
)
from buildbot_bsdkm.cli import main
from buildbot_bsdkm.model import FailureCategory, RunResult, StageFailure
from buildbot_bsdkm.pipeline.jobs.bisect import (
    FailureSpec,
    RegressionSpec,
    failure_outcome,
    linear_history,
    regression_outcome,
)
from buildbot_bsdkm.policy import Check, CheckKind, Verdict
from buildbot_bsdkm.report.bisection_report import write_reports


def history(n: int) -> list[Commit]:
    """The good end and ``n`` commits after it."""
    return [Commit(f"{i:040x}", f"change {i}", "A U Thor <a@example.org>", "2026-12-01")
            for i in range(n + 1)]


class Fake:
    """Commit ``culprit`` and every later one fail; ``skip`` do not build; ``fail_rate`` < 1: flaky."""

    def __init__(self, commits: list[Commit], culprit: int, skip: frozenset[int] = frozenset(),
                 fail_rate: float = 1.0, seed: int = 1, bad_from_start: bool = False) -> None:
        self.index = {c.sha: i for i, c in enumerate(commits)}
        self.culprit = culprit
        self.skip = skip
        self.fail_rate = fail_rate
        self.rng = random.Random(seed)
        self.built: set[int] = set()
        self.calls: list[tuple[int, Purpose]] = []
        self.bad_from_start = bad_from_start

    def __call__(self, commit: Commit, purpose: Purpose) -> Probe:
        i = self.index[commit.sha]
        self.calls.append((i, purpose))
        built = i not in self.built
        self.built.add(i)
        if i in self.skip:
            return Probe(Outcome.SKIP, "does not build: error: expected ';'", built=built)
        broken = self.bad_from_start or i >= self.culprit
        if broken and self.rng.random() < self.fail_rate:
            return Probe(Outcome.BAD, "SHA-256: self-test failed", built=built)
        return Probe(Outcome.GOOD, built=built)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 32, 33, 64])
def test_every_culprit_is_named_within_the_limit(n: int) -> None:
    commits = history(n)
    for culprit in range(1, n + 1):
        fake = Fake(commits, culprit)
        result = bisect(commits, fake)
        assert result.decided, result.why
        assert result.culprit == commits[culprit]
        assert result.parent == commits[culprit - 1]
        assert result.builds <= build_limit(n), (culprit, result.builds)
        assert result.confidence == "high"
        verify = result.verification
        assert [s.index for s in verify] == [culprit, culprit - 1]
        # verification runs reuse the builds; only the good end may be built for it (never tested before)
        assert [s.index for s in verify if s.probe.built] == ([0] if culprit == 1 else [])


def test_limit_is_log2_plus_three() -> None:
    assert build_limit(32) == 5 + 3
    assert build_limit(64) == 6 + 3
    assert build_limit(33) == 6 + 3


def test_the_bad_end_is_tested_first_and_a_range_without_the_failure_is_not_searched() -> None:
    commits = history(16)
    fake = Fake(commits, culprit=99)  # never fails
    result = bisect(commits, fake)
    assert not result.decided
    assert result.status == "could not decide"
    assert "does not show it" in result.why
    assert fake.calls == [(16, Purpose.END)]
    assert result.remaining == commits[1:]
    assert result.confidence == "none"


def test_a_skipped_commit_is_neither_good_nor_bad() -> None:
    commits = history(16)
    # 8 is the first midpoint: skipped, the search asks a neighbour instead and still finds 11
    fake = Fake(commits, culprit=11, skip=frozenset({8}))
    result = bisect(commits, fake)
    assert result.decided and result.culprit == commits[11]
    assert (8, Purpose.SEARCH) in fake.calls
    assert [s.probe.outcome for s in result.steps if s.index == 8] == [Outcome.SKIP]
    assert result.builds <= build_limit(16)


def test_skipped_parent_leaves_the_culprit_among_the_skipped() -> None:
    commits = history(16)
    fake = Fake(commits, culprit=6, skip=frozenset({4, 5}))
    result = bisect(commits, fake)
    assert not result.decided
    assert result.remaining == [commits[4], commits[5], commits[6]]
    assert "one of 3 commits" in result.why
    assert "does not build" in result.why
    assert result.culprit is None


def test_next_index_goes_around_skips() -> None:
    assert next_index(0, 16, set()) == 8
    assert next_index(0, 16, {8}) == 7
    assert next_index(0, 16, {8, 7}) == 9
    assert next_index(3, 4, set()) is None
    assert next_index(3, 6, {4, 5}) is None


def test_verification_failure_is_could_not_decide() -> None:
    """A failure that does not reproduce at the culprit names no commit."""
    commits = history(8)

    class OnceOnly(Fake):
        def __call__(self, commit: Commit, purpose: Purpose) -> Probe:
            probe = super().__call__(commit, purpose)
            return Probe(Outcome.GOOD, built=probe.built) if purpose == Purpose.VERIFY else probe

    result = bisect(commits, OnceOnly(commits, culprit=5))
    assert not result.decided
    assert result.culprit is None
    assert "verification failed" in result.why
    assert "flaky?" in result.why
    assert result.remaining == [commits[4], commits[5]]


def test_the_good_end_failing_too_is_could_not_decide() -> None:
    commits = history(8)
    result = bisect(commits, Fake(commits, culprit=1, bad_from_start=True))
    assert not result.decided
    assert "its parent" in result.why and commits[0].short in result.why


def test_flaky_failure_needs_k_passes_for_good_and_verifies_k_times() -> None:
    commits = history(32)
    settings = BisectSettings(flaky=True)
    named = wrong = 0
    for seed in range(20):
        fake = Fake(commits, culprit=19, fail_rate=0.7, seed=seed)
        result = bisect(commits, fake, settings)
        if result.decided:
            assert result.confidence in ("high", "medium")
            if result.culprit == commits[19]:
                named += 1
            else:
                wrong += 1
            runs_parent = [s for s in result.verification if s.index == 18]
            assert len(runs_parent) == 3
    assert wrong == 0
    assert named >= 15


def test_flaky_without_the_flaky_setting_never_names_a_wrong_commit_silently() -> None:
    """Bisecting a flaky failure as deterministic can end at a later commit; verification catches
    a parent that fails, and what it names is never a commit before the real culprit."""
    commits = history(32)
    for seed in range(30):
        result = bisect(commits, Fake(commits, culprit=19, fail_rate=0.6, seed=seed))
        if result.decided:
            assert result.culprit is not None
            assert commits.index(result.culprit) >= 19


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="bisect.k"):
        BisectSettings(k=0)
    with pytest.raises(ValueError, match="good and a bad"):
        bisect(history(0), Fake(history(0), 1))


def test_max_steps_stops_with_could_not_decide() -> None:
    commits = history(64)
    result = bisect(commits, Fake(commits, culprit=40), BisectSettings(max_steps=3))
    assert not result.decided and "max_steps" in result.why


def test_result_json_names_culprit_and_steps() -> None:
    commits = history(8)
    result = bisect(commits, Fake(commits, culprit=3))
    d = result.to_dict()
    assert d["status"] == "culprit"
    assert d["culprit"]["sha"] == commits[3].sha
    assert d["culprit"]["subject"] == "change 3"
    assert d["builds"] == result.builds
    assert d["build_limit"] == build_limit(8)
    assert d["steps"][0]["purpose"] == "end"
    assert {s["outcome"] for s in d["steps"]} <= {"good", "bad", "skip"}
    assert Commit.from_dict(d["culprit"]) == commits[3]


# --------------------------------------------------------------------------- the command's inputs


def _tiny_repo(path: Path, n: int = 3) -> list[str]:
    """A repository of ``n`` commits (no wolfSSL: the range is checked before anything is built)."""
    path.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    run("init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (path / "f").write_text(f"{i}\n")
        run("add", "f")
        run("-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m", f"c{i}")
        shas.append(run("rev-parse", "HEAD"))
    return shas


def _bisect(*args: str) -> int:
    return main(["bisect", "--target", "userspace", "--variant", "noasm", *args])


@pytest.mark.parametrize(("args", "message"), [
    (["--good=-x", "--bad", "main", "--failure", "SHA-256"], "--good '-x': not a usable git ref"),
    (["--good", "a..b", "--bad", "main", "--failure", "SHA-256"], "not a usable git ref"),
    (["--good", "a", "--bad", "b", "--failure", "SHA-256", "--pct", "5"], "--pct and --metric go with"),
    (["--good", "a", "--bad", "b", "--failure", ": x"], "no check name"),
    (["--good", "a", "--bad", "b", "--failure", "SHA-256: (["], "no regular expression"),
    (["--good", "a", "--bad", "b", "--regression", "SHA-256", "--pct", "0"], "--pct 0: a slowdown"),
    (["--good", "a", "--bad", "b", "--regression", "SHA-256", "--pct", "nan"], "above 0 and below 100"),
    (["--good", "a", "--bad", "b", "--failure", "SHA-256", "--k", "0"], "bisect.k"),
])
def test_bad_arguments_exit_2_naming_the_problem(args: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _bisect(*args) == 2
    assert message in capsys.readouterr().err


def test_regression_on_a_target_not_measured_against_a_base_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bisect", "--target", "linux-kmod-qemu", "--variant", "noasm", "--good", "a", "--bad", "b",
                 "--regression", "SHA-256"])
    assert code == 2
    assert "not regression-gated" in capsys.readouterr().err


def test_source_dir_must_be_a_git_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _bisect("--good", "a", "--bad", "b", "--failure", "SHA-256", "--source-dir", str(tmp_path)) == 2
    assert "not a git checkout" in capsys.readouterr().err


@pytest.mark.parametrize(("good", "bad", "message"), [
    (0, 0, "the same commit"),
    (2, 0, "is not an ancestor of --bad"),
])
def test_unusable_range_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch, good: int, bad: int, message: str) -> None:
    monkeypatch.setenv("BSDKM_CACHE", str(tmp_path / "cache"))
    shas = _tiny_repo(tmp_path / "repo")
    code = _bisect("--good", shas[good], "--bad", shas[bad], "--failure", "SHA-256",
                   "--source-dir", str(tmp_path / "repo"), "--out", str(tmp_path / "out"))
    assert code == 2
    assert message in capsys.readouterr().err


def test_unknown_ref_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BSDKM_CACHE", str(tmp_path / "cache"))
    _tiny_repo(tmp_path / "repo")
    code = _bisect("--good", "nosuchbranch", "--bad", "main", "--failure", "SHA-256",
                   "--source-dir", str(tmp_path / "repo"))
    assert code == 2
    assert "cannot bisect nosuchbranch..main" in capsys.readouterr().err


def test_linear_history_is_first_parent_oldest_first(tmp_path: Path) -> None:
    shas = _tiny_repo(tmp_path / "repo", 5)
    history = linear_history(tmp_path / "repo", shas[1], shas[4])
    assert [c.sha for c in history] == shas[1:]
    assert history[1].subject == "c2" and history[1].author == "T <t@example.org>"


# --------------------------------------------------------------------------- judging one run


def _selftest_run(passed: bool) -> tuple[RunResult, Verdict]:
    check = Check("noasm", "userspace", "SHA-256", CheckKind.SELFTEST, passed,
                  "SHA-256 self-test passed" if passed else "SHA-256 self-test failed: error i=1")
    failure = None if passed else StageFailure("selftest", "self-test failed: SHA-256", FailureCategory.REAL,
                                               "selftest")
    return RunResult("noasm", "userspace", failure=failure), Verdict([check])


def test_failure_spec_matches_name_and_pattern() -> None:
    run, verdict = _selftest_run(False)
    assert failure_outcome(FailureSpec("SHA-256"), run, verdict).outcome == Outcome.BAD
    assert failure_outcome(FailureSpec("SHA-*: error i=\\d"), run, verdict).outcome == Outcome.BAD
    # another check failing, ours not run: hidden, so skipped
    assert failure_outcome(FailureSpec("AES-GCM"), run, verdict).outcome == Outcome.SKIP
    run, verdict = _selftest_run(True)
    assert failure_outcome(FailureSpec("SHA-256"), run, verdict).outcome == Outcome.GOOD
    # a run that went to its end with another check failed (a required item missing) is good
    missing = Check("noasm", "userspace", "AES-128-CBC-enc", CheckKind.REQUIRED, False,
                    "required item missing")
    probe = failure_outcome(FailureSpec("selftest: SHA-256 (-1)"), run, Verdict([*verdict.checks, missing]))
    assert probe.outcome == Outcome.GOOD and "required item missing" in probe.reason


def test_build_failure_is_skip_unless_it_is_what_is_bisected() -> None:
    broken = RunResult("noasm", "userspace", failure=StageFailure(
        "build", "compile failed: hash.c:1: error: expected ';'", FailureCategory.REAL, "compile"))
    assert failure_outcome(FailureSpec("SHA-256"), broken, Verdict()).outcome == Outcome.SKIP
    assert failure_outcome(FailureSpec("build: expected ';'"), broken, Verdict()).outcome == Outcome.BAD


def test_regression_outcome_needs_a_decided_measurement() -> None:
    spec = RegressionSpec("SHA-256", 10.0)
    item = {"name": "SHA-256", "verdict": "regression", "change": -0.11, "ci_low": -0.14, "ci_high": -0.08,
            "n_base": 5, "n_head": 5, "min_detectable": 0.04}
    assert regression_outcome(spec, item, 5, 10).outcome == Outcome.BAD
    small = {**item, "change": -0.03}  # a regression, but not the one bisected
    assert regression_outcome(spec, small, 5, 10).outcome == Outcome.GOOD
    noisy = {**item, "verdict": "unchanged", "change": -0.02, "min_detectable": 0.3}
    probe = regression_outcome(spec, noisy, 15, 10)
    assert probe.outcome == Outcome.SKIP and "inconclusive after 15 round(s)" in probe.reason
    assert regression_outcome(spec, {**item, "verdict": "inconclusive"}, 15, 10).outcome == Outcome.SKIP
    assert regression_outcome(spec, None, 5, 10).outcome == Outcome.SKIP


def test_reports_escape_what_the_repository_wrote(tmp_path: Path) -> None:
    commits = [Commit(f"{i:040x}", "[x](https://evil) <b>", "@org/team", "2026") for i in range(5)]
    result = bisect(commits, Fake(commits, culprit=2))
    paths = write_reports(result, {"target": "userspace"}, tmp_path)
    md, page = paths["md"].read_text(), paths["html"].read_text()
    assert "[x](https://evil)" not in md and "\\[x\\]" in md and "@\u200borg" in md  # GitHub links \\@org
    assert "<b>" not in page and "&lt;b&gt;" in page
    assert json.loads(paths["json"].read_text())["culprit"]["sha"] == commits[2].sha


# --------------------------------------------------------------------------- the policy's bisect: section


def test_policy_bisect_section_sets_k_and_flaky_k() -> None:
    from buildbot_bsdkm.policy import PolicyError, parse_policy

    assert parse_policy("version: 1\n").bisect.k == 1
    got = parse_policy("version: 1\nbisect: {k: 2, flaky_k: 5}\n").bisect
    assert (got.k, got.flaky_k) == (2, 5)
    with pytest.raises(PolicyError, match="bisect.k"):
        parse_policy("version: 1\nbisect: {k: 0}\n")
    with pytest.raises(PolicyError, match="colour"):
        parse_policy("version: 1\nbisect: {colour: red}\n")


def test_policy_k_reaches_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's settings come from the config's policy (the run stops at the unknown ref)."""
    import buildbot_bsdkm.commands.bisect_cmd as cmd

    seen: list[BisectSettings] = []

    def fake_range(*args: object, settings: BisectSettings, **kw: object) -> None:
        seen.append(settings)
        raise cmd.HistoryError("stop here")

    monkeypatch.setattr(cmd, "bisect_range", fake_range)
    (tmp_path / "policy.yml").write_text("version: 1\nselftests: true\nbisect: {k: 2, flaky_k: 4}\n")
    (tmp_path / "bsdkm.yml").write_text(
        "targets: {userspace: {flags: []}}\nvariants: {noasm: {flags: [], targets: [userspace]}}\n"
        f"policy: {tmp_path / 'policy.yml'}\n")
    _tiny_repo(tmp_path / "repo")
    assert _bisect("--good", "a", "--bad", "b", "--failure", "SHA-256", "--flaky", "--config",
                   str(tmp_path / "bsdkm.yml"), "--source-dir", str(tmp_path / "repo")) == 2
    assert seen == [BisectSettings(k=2, flaky_k=4, flaky=True)]
