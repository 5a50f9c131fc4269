"""``freebsd-kmod``: the target on a FreeBSD worker, and its cryptodev offload check."""
