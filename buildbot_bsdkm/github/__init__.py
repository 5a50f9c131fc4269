"""GitHub integration: signed webhooks in, commit statuses and one edited PR comment out.

Pure rules live in ``signature``, ``events``, ``triggers``, ``trust`` and ``coalesce`` (the
GitHub Action uses them too); Buildbot glue lives in ``hook``, ``reporters`` and ``services``.
"""
