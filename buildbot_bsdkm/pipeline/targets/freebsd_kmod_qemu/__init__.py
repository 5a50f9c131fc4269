"""``freebsd-kmod-qemu``: the target (kit, boot, console) and FreeBSD's distribution sets it boots."""
