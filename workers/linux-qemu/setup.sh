#!/bin/sh
# Make a Debian 12 (amd64) machine a `linux-kmod-qemu` worker for bsdkm-ci.
#
#   sudo workers/linux-qemu/setup.sh [--check]
#
# Installs the Debian packages, builds the static loader once (to prove static
# linking works here), and checks the kernel image, its headers and QEMU.
# --check only checks, installs nothing. Idempotent.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
kmod=$(cd "$here/../../kmod/linux" && pwd)
packages="qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static cpio kmod gcc make libc6-dev
autoconf automake libtool"

say() { echo "setup.sh: $*"; }
die() { echo "setup.sh: $*" >&2; exit 1; }

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "${1:-}" = --check ] && die "missing Debian packages:$missing"
    [ "$(id -u)" = 0 ] || die "run as root to install:$missing"
    say "installing$missing"
    apt-get update -q >/dev/null
    # shellcheck disable=SC2086  # word splitting of the package list is intended
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 $missing >/dev/null
fi

# The kernel QEMU boots must be the one the module is built for: both come from
# the same linux-image-amd64 / linux-headers-amd64 pair.
version=""
for image in /boot/vmlinuz-*; do
    v=${image#/boot/vmlinuz-}
    [ -f "/usr/src/linux-headers-$v/Makefile" ] && version=$v
done
[ -n "$version" ] || die "no /boot/vmlinuz-* with matching /usr/src/linux-headers-*"
[ -r "/boot/vmlinuz-$version" ] || die "/boot/vmlinuz-$version is not readable by $(id -un)"
say "kernel $version (image and headers present)"

out=${BSDKM_LOADER_OUT:-/usr/local/libexec/bsdkm-ci}
if [ "${1:-}" != --check ]; then
    mkdir -p "$out"
    gcc -static -Os -Wall -o "$out/bsdkm-modload" "$kmod/loader.c"
    say "loader built: $out/bsdkm-modload (use LOADER=$out/bsdkm-modload with mkinitramfs.sh)"
fi

ldd /bin/busybox >/dev/null 2>&1 && die "/bin/busybox is dynamic: install busybox-static"
qemu-system-x86_64 --version | head -n 1
# KVM is present on some workers but unusable (MSR aborts); the harness always uses TCG.
say "ok"
