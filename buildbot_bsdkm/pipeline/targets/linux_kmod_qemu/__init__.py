"""``linux-kmod-qemu``: the target, its QEMU harness, and an lkcapi variant's AF_ALG benchmark."""
