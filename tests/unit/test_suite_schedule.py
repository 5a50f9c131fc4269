"""The suite's own order under xdist: longest files first, Twisted's files one unit, trial first."""

from __future__ import annotations

import suite_schedule as sched


def test_longest_unit_first_and_each_file_kept_whole(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sched, "recorded_seconds", lambda: {"test_b.py": 300.0, "test_a.py": 2.0})
    ids = ["tests/test_a.py::one", "tests/test_a.py::two", "tests/test_b.py::one", "tests/test_c.py::one"]
    order = [ids[i] for i in sched.longest_first(ids)]
    assert order == ["tests/test_b.py::one", "tests/test_c.py::one", "tests/test_a.py::one",
                     "tests/test_a.py::two"]


def test_trial_files_run_before_the_reactor_thread_files_in_one_unit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sched, "recorded_seconds", dict)
    ids = ["tests/test_gh_client.py::t", "tests/unit/test_bb_steps.py::Case::t", "tests/test_zzz.py::t",
           "tests/test_bisect_buildbot.py::Case::t"]
    order = [ids[i] for i in sched.longest_first(ids)]
    assert {sched.unit_of(i) for i in order[:3]} == {sched.REACTOR_UNIT}
    assert order[:3] == ["tests/unit/test_bb_steps.py::Case::t", "tests/test_bisect_buildbot.py::Case::t",
                         "tests/test_gh_client.py::t"]
