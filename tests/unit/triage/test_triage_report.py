"""The report's triage sections: New / Pre-existing / Known issues / Flaky / Fixed, escaped."""

from __future__ import annotations

from test_triage_classify import AESNI_SIG, POLICY, base, clean_run, panic_run

from buildbot_bsdkm.config.bsdkm_yml import load_config
from buildbot_bsdkm.model import SelfTest
from buildbot_bsdkm.policy import evaluate
from buildbot_bsdkm.report.html_page import html_report
from buildbot_bsdkm.report.markdown import markdown_report
from buildbot_bsdkm.support.resources import default_config_path
from buildbot_bsdkm.triage.classify_checks import TriageInputs, failed_signatures


def test_known_and_new_sections_with_the_tracker_link() -> None:
    run = panic_run()
    run.logs[1].tests.append(SelfTest("AES-GCM", False, " error L=1 code=-216", -216))
    v = evaluate([run], POLICY, triage=TriageInputs(known=load_config(default_config_path()).known_issues))
    text = markdown_report([run], v)
    assert "Triage: 1 with no base to compare with, 2 known" in text  # no base outcomes: none is "new"
    new = text[text.index("### Failures (no base to compare with)"):text.index("### Known issues")]
    assert "selftest: AES-GCM (-216)" in new and "malloc" not in new
    known = text[text.index("### Known issues"):]
    assert "aesni-key-setup-malloc-in-critical-section" in known and "(until 5.9.3)" in known
    link = "[aesni-key-setup-malloc-in-critical-section](https://github.com/wolfSSL/wolfssl/issues?q="
    assert link in known
    html = html_report([run], v)
    assert "<h3>Known issues</h3>" in html and '<a href="https://github.com/wolfSSL/wolfssl/issues?q=' in html


def test_pre_existing_flaky_and_fixed_sections() -> None:
    v = evaluate([panic_run()], POLICY, triage=TriageInputs(base=base(3, [True] * 3)))
    text = markdown_report([panic_run()], v)
    assert "### Failures: Pre-existing" in text and "in 3 of the last 3 base builds" in text
    rerun = failed_signatures([clean_run()], evaluate([clean_run()], POLICY))
    v = evaluate([panic_run()], POLICY, triage=TriageInputs(rerun=rerun))
    assert "### Failures: Flaky" in markdown_report([panic_run()], v)
    v = evaluate([clean_run()], POLICY, triage=TriageInputs(base=base(2, [True, True])))
    text = markdown_report([clean_run()], v)
    assert "### Fixed by this change" in text and "1 fixed" in text
    fixed = text[text.index("### Fixed by this change"):]
    assert AESNI_SIG.replace("|", "\\|").replace("_", "\\_") in fixed


def test_pr_controlled_names_in_signatures_stay_text() -> None:
    run = panic_run()
    run.logs[1].tests.append(SelfTest("[x](https://evil) @org/team", False, None, -1))
    v = evaluate([run], POLICY)
    text = markdown_report([run], v)
    new = text[text.index("### Failures (no base to compare with)"):text.index("### Kernel health")]
    # no link, no autolink, no mention
    assert "selftest: \\[x\\](https:\u200b//evil) @\u200borg/team (-1)" in new
    assert "@org/team" not in text  # GitHub links even \\@org/team: a zero-width space stops it


def test_a_failure_is_new_only_against_a_base() -> None:
    run = panic_run()
    alone = markdown_report([run], evaluate([run], POLICY))
    assert "### Failures (no base to compare with)" in alone and "Failures: New" not in alone
    clean_base = TriageInputs(base=base(2, [False, False]))  # the base branch passed twice
    against = markdown_report([run], evaluate([run], POLICY, triage=clean_base))
    assert "### Failures: New" in against and "no base to compare with" not in against
