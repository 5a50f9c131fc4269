"""The one marker reader of every QEMU guest: a table says what a guest's markers mean, the reader
takes only the boot's own (its nonce), in their order."""

from __future__ import annotations

from buildbot_bsdkm.parsers.guest_markers import MarkerTable, StepResult, read_markers

NONCE = "00112233445566778899aabbccddeeff"
TABLE = MarkerTable(facts={"listed": r"listed (\S+)", "kldstat": r"kldstat .*"}, last="poweroff",
                    after_load=("listed ", "kldstat "))


def _console(*bodies: str, nonce: str = NONCE) -> list[str]:
    return [f"### bsdkm-ci: {b} nonce={nonce}\n" for b in bodies]


def test_a_steps_result_is_the_first_after_its_begin() -> None:
    said = read_markers(_console("load begin", "load rc=0", "load rc=5", "unload begin",
                                 "unload rc=-1 errno=16", "poweroff"), TABLE, NONCE)
    assert said.results == {"load": StepResult(0), "unload": StepResult(-1, 16)}
    assert said.bodies[-1] == "poweroff" and said.imitations == 0


def test_facts_take_their_first_marker_and_a_failed_load_has_none() -> None:
    ok = read_markers(_console("load begin", "load rc=0", "listed toy", "listed other", "kldstat id=2"),
                      TABLE, NONCE)
    assert ok.facts == {"listed": "toy", "kldstat": "kldstat id=2"}
    failed = read_markers(_console("load begin", "load rc=8", "listed toy"), TABLE, NONCE)
    assert failed.facts == {} and failed.imitations == 1


def test_markers_without_the_nonce_or_after_the_last_are_not_the_harnesss() -> None:
    lines = [*_console("load begin"), *_console("load rc=0", nonce="f" * 32), "### bsdkm-ci: load rc=0\n",
             *_console("load rc=3", "poweroff", "unload begin")]
    said = read_markers(lines, TABLE, NONCE)
    assert said.results == {"load": StepResult(3)}
    assert said.imitations == 3 and said.imitation_lines == [2, 3, 6]
    assert said.first_body == "load begin"
    # Before the module runs ("load begin"), a stray marker-shaped line is the console's, not an imitation.
    early = read_markers(["### bsdkm-ci: init begin nonce=0\n", *_console("load begin")], TABLE, NONCE)
    assert early.imitations == 0 and early.bodies == ["load begin"]


def test_a_kept_console_is_read_without_its_nonce_from_line_starts_only() -> None:
    said = read_markers(["boot ### bsdkm-ci: load rc=9\n", "### bsdkm-ci: load begin uptime=1.5\n",
                         "### bsdkm-ci: load rc=0\r\n"], TABLE)
    assert said.results == {"load": StepResult(0)}
    assert [m.uptime for m in said.taken] == [1.5, None]
