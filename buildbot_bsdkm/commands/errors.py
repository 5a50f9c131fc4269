"""Exit statuses of ``bsdkm-ci`` and the error every subcommand raises for unusable input.

Exit codes (a contract other shells rely on): 0 everything passed, 1 a test or
threshold failed, 2 unusable input or usage error (reason on stderr). They live
here, below every subcommand and ``cli.py``, so no subcommand imports its caller.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNUSABLE = 2


class UsageError(Exception):
    """Unusable input: the message names the problem; exit status 2."""
