"""bsdkm-ci: CI for wolfSSL's FreeBSD kernel module and its crypto acceleration.

The package is one pure core (parsers, result model, threshold policy, JUnit,
reports, failure classification, pipeline) with thin shells on top: the
``bsdkm-ci`` command, Buildbot steps, ``master.cfg`` and the GitHub Action.

The version is the installed distribution's (``importlib.metadata.version("buildbot-bsdkm")``), written
once, in ``pyproject.toml``.
"""
