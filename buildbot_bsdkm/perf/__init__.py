"""The performance gate: repeats, limits learned from noise, clock consistency, history, drift.

Pure numbers in, verdicts out (``gate``, ``clock``, ``stats``, ``drift``); ``fingerprint`` says
which runs may be compared; ``store`` keeps base-branch history per fingerprint;
``instruction_counts`` holds instruction counts. Nothing here imports ``policy/``: deciding to
measure again (confirm, extend) is the pipeline's, and github-action-benchmark JSON is
``report/github_action_benchmark.py``'s.
"""
