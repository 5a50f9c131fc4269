"""The FreeBSD QEMU boots of a real Buildbot build, replayed: see ``replay.py``."""
