"""The performance gate: repeats, limits learned from noise, clock consistency, history, drift.

Pure numbers in, verdicts out (``gate``, ``clock``, ``stats``, ``drift``); ``fingerprint`` says
which runs may be compared; ``store`` keeps base-branch history per fingerprint; ``gab`` writes
github-action-benchmark JSON. ``policy.py`` turns results documents into the repeats these read.
"""
