"""Bisection as a pure search: commits in, the first bad commit and its evidence out (``search``). Who
builds and measures each probed commit is the pipeline's (``pipeline/jobs/bisect.py``)."""
