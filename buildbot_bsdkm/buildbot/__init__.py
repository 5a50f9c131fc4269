"""Buildbot shell: steps (one per ``bsdkm-ci stage``), bounded retry and the master configuration.

``classification`` and ``summaries`` are pure; the rest imports Buildbot.
"""
