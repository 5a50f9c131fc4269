"""The pipeline's toolbox: processes, locks, errors, sources, builds, QEMU guests, consoles and load outcomes.

Nothing here knows a target or a job; targets and stages use these.
"""
