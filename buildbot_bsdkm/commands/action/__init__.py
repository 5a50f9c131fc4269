"""``bsdkm-ci action ...``: what the GitHub Action's shell steps call.

The composite action in ``action/`` is plumbing only; every decision it needs lives here, one
module per job, on top of the same core the Buildbot shell uses:

* ``results.py``   ``outputs`` (results of ``bsdkm-ci run`` → ``$GITHUB_OUTPUT``,
  ``$GITHUB_STEP_SUMMARY`` and ``::error``/``::warning`` annotations, titles from
  ``annotations.py``, delivered by ``summary_sinks.py``) and ``gate`` (exit 1 when the verdict
  failed, the last step), both through the core's one PR report (``report/pull_request.py``) as the Buildbot
  reporter is; ``merge.py`` joins several jobs' results into one document for the report job;
* ``attempts.py``  ``retry`` (run a command again only when ``classify`` says infrastructure)
  and ``vm-check`` (after a failed FreeBSD VM step: retry it or not);
* ``comment.py``   keep the one marked PR comment up to date with the Markdown report
  (``comment-mode``; which earlier comment is ours, without being told the bot's login);
* ``status.py``    a commit status per (target, variant) on the PR head, the PR report's
  (``states.py``: the check counts and what ``fail-on`` makes fail the job);
* ``run_pr.py``    in a ``workflow_run`` job, the fork PR whose run finished (checked through the API)
  and what of its judges it changes (``provenance.py``: such results' statuses are errors, and a
  fork's results say where they came from);
* ``trigger.py``   ``issue_comment`` event → whether (and which variants) to retest, after
  checking the commenter's permission through the API (``github.py``: API context, client run);
* ``config.py``    a ``bsdkm.yml`` that builds the workflow's own checkout, and the build cache's key;
* ``run_files.py`` what they share: file names of a run, reading/writing files, runner files.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from ..exit_codes import UsageError
from . import attempts, comment, config, merge, results, run_pr, status, trigger
from .workflow import log_line


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("action", help="steps of the GitHub Action (outputs, gate, retry, comment, status, "
                                         "trigger)")
    asub = p.add_subparsers(dest="action_command", required=True, parser_class=type(p))
    results.register_outputs(asub)
    results.register_gate(asub)
    attempts.register_retry(asub)
    comment.register(asub)
    status.register(asub)
    run_pr.register(asub)
    trigger.register(asub)
    attempts.register_vm_check(asub)
    merge.register_merge(asub)
    config.register(asub)
    config.register_cache_key(asub)
    for parser in asub.choices.values():
        parser.set_defaults(func=_one_line_errors(parser.get_default("func")))


def _one_line_errors(func: Callable[..., int]) -> Callable[..., int]:
    """A step's error names what it refused, often an artifact's text: one line, no command."""

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> int:
        try:
            return func(*args, **kwargs)
        except UsageError as e:
            raise UsageError(log_line(str(e))) from None

    return run
