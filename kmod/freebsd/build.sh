#!/bin/sh
# build.sh SRC_DIR [configure flags...]
# Builds wolfSSL's FreeBSD kernel module (SRC_DIR/bsdkm/libwolfssl.ko):
#   ./autogen.sh            only when SRC_DIR has no configure yet
#   ./configure --enable-freebsdkm --enable-kernel-benchmarks [flags...]
#   make -j$JOBS            FreeBSD's make (bmake): wolfSSL's top Makefile and
#                           bsdkm/Makefile use bmake syntax, so not gmake
# Later flags win in autoconf, so callers may repeat or override the two
# defaults (--disable-kernel-benchmarks). Pass --with-kernel-source=PATH when
# the kernel tree is not /usr/src/sys.
# Environment: MAKE (default make), JOBS (default 2).
# Exit: 0 built; 2 usage; 20 autogen failed; 21 configure failed;
#       22 make failed; 23 make succeeded but no bsdkm/libwolfssl.ko.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

[ $# -ge 1 ] || die_usage "usage: build.sh SRC_DIR [configure flags...]"
src=$1
shift
[ -d "$src" ] || die_usage "source directory '$src' does not exist"
jobs=${JOBS:-2}
case $jobs in
    '' | *[!0-9]* | 0) die_usage "JOBS must be a whole number > 0, got '$jobs'" ;;
esac
cd "$src" || die_usage "cannot enter '$src'"

if [ "$(uname -s)" != FreeBSD ]; then
    say "warning: this is $(uname -s), not FreeBSD; the module build needs FreeBSD's make and kernel tree"
fi

if [ ! -x ./configure ]; then
    [ -x ./autogen.sh ] || die_usage "'$src' has neither ./configure nor ./autogen.sh: not a wolfSSL tree"
    say "running ./autogen.sh"
    ./autogen.sh || { say "autogen.sh failed"; exit 20; }
fi

say "./configure --enable-freebsdkm --enable-kernel-benchmarks $*"
./configure --enable-freebsdkm --enable-kernel-benchmarks "$@" || {
    say "configure failed (see config.log in $src)"
    exit 21
}

say "${MAKE:-make} -j$jobs"
"${MAKE:-make}" -j"$jobs" || { say "make failed"; exit 22; }

[ -f bsdkm/libwolfssl.ko ] || { say "make succeeded but bsdkm/libwolfssl.ko is missing"; exit 23; }
say "built $(pwd)/bsdkm/libwolfssl.ko"
exit "$EX_OK"
