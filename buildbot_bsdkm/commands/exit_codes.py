"""Exit statuses of ``bsdkm-ci`` and the error every subcommand raises for unusable input.

Exit codes (a contract other shells rely on): 0 everything passed, 1 a test or
threshold failed, 2 unusable input or usage error (reason on stderr). They live
here, below every subcommand and ``cli.py``, so no subcommand imports its caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ..config.bsdkm_yml import ConfigError
from ..contract import BaselineError
from ..policy import PolicyError
from ..triage.known import KnownIssueError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNUSABLE = 2


class UsageError(Exception):
    """Unusable input: the message names the problem; exit status 2."""


@contextlib.contextmanager
def run_input_errors(out: Path) -> Iterator[None]:
    """What the core raises about a whole run's inputs (``run``, ``main``, ``release``) as UsageError.

    ``out`` is the output directory, named when it cannot be written.
    """
    try:
        yield
    except ConfigError as e:
        raise UsageError(f"bad selection: {e}") from None
    except PolicyError as e:
        raise UsageError(f"bad policy: {e}") from None
    except BaselineError as e:
        raise UsageError(f"bad baseline: {e}") from None
    except KnownIssueError as e:  # expired for the wolfSSL version the run built
        raise UsageError(f"bad known issue: {e}") from None
    except OSError as e:
        raise UsageError(f"{out}: cannot write results: {e.strerror or e}") from None
