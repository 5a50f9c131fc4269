"""What the Action's ``outputs``/``gate`` triage a re-judged run against.

The Action's results store is the base branch's artifacts: ``baseline-dir`` (the summary.json of
its last passing run, the perf baseline) and ``base-outcomes-dir`` (the summary.json of its last
run, passed or failed, which the nightly or a push to the base uploads) and, when one carries it,
the history directory ``bsdkm-ci history add`` keeps (``<dir>/outcomes/``). Known issues come
from the config, as for ``junit``/``compare --config``.

The base the test jobs built next to the head (``base-runs.json``) was built where the PR's code
ran: it gives the timed rounds their interleaved base, never the base's outcomes or instruction
counts, which come from the base branch's artifacts only (``results.py`` tells the core's judging
so: ``Judging.counts_beside_head``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...model import RunResult
from ...perf.store import StoreError
from ...policy import Policy, Verdict, evaluate
from ...triage.classify_checks import TriageInputs
from ...triage.outcome_store import OutcomeDirStore
from ...triage.outcomes import BaseOutcome
from ..exit_codes import UsageError
from ..triage_args import base_outcomes, known_issues


def _judge(policy: Policy) -> Callable[[list[RunResult]], Verdict]:
    def judge(runs: list[RunResult]) -> Verdict:
        return evaluate(runs, policy, triage=TriageInputs())
    return judge


def stored_outcomes(store_dir: Path | None, runs: list[RunResult]) -> list[BaseOutcome]:
    """The history directory's recorded outcomes of the runs' (target, variant)s, oldest first."""
    if store_dir is None or not (store_dir / "outcomes").is_dir():
        return []
    store = OutcomeDirStore(store_dir)
    try:
        records = [r for pair in sorted({(x.target, x.variant) for x in runs}) for r in store.window(*pair)]
    except StoreError as e:
        raise UsageError(f"base outcomes: {e}") from None
    return [BaseOutcome.from_dict(r) for r in records]


def triage_for(config: Path | None, policy: Policy, runs: list[RunResult], baseline_doc: Path | None,
               store_dir: Path | None, outcomes_dir: Path | None = None) -> TriageInputs:
    """Known issues of ``config`` (as ``junit``/``compare --config``) and the base outcomes, oldest
    first: the history directories' records, the baseline's run (a passing one), the base-outcomes
    artifact's last run (passed or failed: the newest). Not the base built next to the head: the
    PR's configure and make ran there first and could make the PR's failure look like the base's."""
    base = stored_outcomes(store_dir, runs) + stored_outcomes(outcomes_dir, runs)
    if baseline_doc is not None:
        base += base_outcomes([str(baseline_doc)], _judge(policy))
    if outcomes_dir is not None and (outcomes_dir / "summary.json").is_file():
        base += base_outcomes([str(outcomes_dir / "summary.json")], _judge(policy))
    return TriageInputs(known=known_issues(str(config) if config else None), base=base)
