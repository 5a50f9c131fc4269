"""Triage: which failures a change caused, and which were already broken, known or flaky.

Pure (no Buildbot, no GitHub): ``signature`` names a failure stably across machines and boots,
``outcomes`` records what the base branch did, ``known`` reads the known-issue list,
``classify_checks`` gives every failed check of a verdict its triage word, and ``policy_section``
reads the policy's ``triage:`` section.
"""
