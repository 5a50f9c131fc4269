#!/bin/sh
# Build a tiny initramfs that loads one kernel module once and powers off.
#
#   mkinitramfs.sh MODULE.ko OUT.cpio.gz [MODULE_PARAMS]
#
# Contents: /init (init.sh), /bin/busybox (static), /bin/bsdkm-modload (loader.c,
# static), the module under /lib/modules/bsdkm/ and /etc/bsdkm-ci.conf naming it.
# Environment: BUSYBOX (default /bin/busybox, must be static: Debian's
# busybox-static), LOADER (a prebuilt bsdkm-modload; default: compile loader.c
# with `gcc -static -Os`), CC (default gcc), INITRAMFS_EXTRA (a directory laid over the image),
# BSDKM_CI_NONCE (hex; /init appends it to its markers so the host can tell them from the module's).
set -eu

die() { echo "mkinitramfs.sh: $*" >&2; exit 2; }

case $# in 2 | 3) ;; *) die "usage: mkinitramfs.sh MODULE.ko OUT.cpio.gz [MODULE_PARAMS]" ;; esac
ko=$1
out=$2
params=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
busybox=${BUSYBOX:-/bin/busybox}

[ -f "$ko" ] || die "module not found: $ko"
nonce=${BSDKM_CI_NONCE:-}
case "$nonce" in *[!0-9a-f]*) die "BSDKM_CI_NONCE must be lowercase hex, got '$nonce'" ;; esac
case "$ko" in *.ko) ;; *) die "not a kernel module (expected a .ko file): $ko" ;; esac
[ -x "$busybox" ] || die "busybox not found at $busybox (install Debian's busybox-static)"
# A dynamic busybox cannot run from an initramfs without libc: the kernel would
# panic with "No working init found", which looks like a module problem.
if ldd "$busybox" >/dev/null 2>&1; then
    die "$busybox is dynamically linked; install busybox-static or set BUSYBOX"
fi

# The kernel's name for the module (what /proc/modules and delete_module use).
modname=$(modinfo -F name "$ko" 2>/dev/null || true)
[ -n "$modname" ] || modname=$(basename "$ko" .ko | tr - _)

stage=$(mktemp -d "${TMPDIR:-/tmp}/bsdkm-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT INT TERM
mkdir -p "$stage/bin" "$stage/etc" "$stage/lib/modules/bsdkm"

cp "$busybox" "$stage/bin/busybox"
if [ -n "${LOADER:-}" ]; then
    [ -x "$LOADER" ] || die "LOADER is not an executable: $LOADER"
    cp "$LOADER" "$stage/bin/bsdkm-modload"
else
    ${CC:-gcc} -static -Os -Wall -o "$stage/bin/bsdkm-modload" "$here/loader.c" ||
        die "could not compile $here/loader.c (need gcc and static libc: libc6-dev)"
fi
cp "$here/init.sh" "$stage/init"
chmod 0755 "$stage/init" "$stage/bin/busybox" "$stage/bin/bsdkm-modload"
modfile="/lib/modules/bsdkm/$(basename "$ko")"
cp "$ko" "$stage$modfile"

# INITRAMFS_EXTRA: a directory copied over the image (extra programs, /etc/bsdkm-ci.d/after-load).
if [ -n "${INITRAMFS_EXTRA:-}" ]; then
    [ -d "$INITRAMFS_EXTRA" ] || die "INITRAMFS_EXTRA is not a directory: $INITRAMFS_EXTRA"
    cp -R "$INITRAMFS_EXTRA/." "$stage/"
fi

# Shell-quote for the conf file that /init sources.
quote() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
    echo "MODULE=$(quote "$modfile")"
    echo "MODNAME=$(quote "$modname")"
    echo "MODPARAMS=$(quote "$params")"
    echo "NONCE=$(quote "$nonce")"
} >"$stage/etc/bsdkm-ci.conf"

mkdir -p "$(dirname "$out")"
(cd "$stage" && find . -print | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$out.tmp"
mv "$out.tmp" "$out"
