#!/bin/sh
# unload.sh NAME LOGDIR [TIMEOUT_S]
# Unloads a wolfSSL FreeBSD kernel module by file name (libwolfssl or
# libwolfssl.ko) and keeps the kernel messages. Needs root (kldunload).
#
# Writes into LOGDIR:
#   unload.kernel.log   kernel messages since the unload began
#   kernel.log          rewritten: everything since load.sh's marker, so it
#                       holds the whole load-to-unload story when it can
#   kldunload.out, unload.status, msgbuf.before.unload, msgbuf.after.unload
# Exit: 0 unloaded and a cleanup line seen; 1 kldunload failed;
#       2 usage / not FreeBSD; 3 timed out; 4 kldunload succeeded but the file
#       is still listed; 5 unloaded but no cleanup line in the kernel log.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

[ $# -eq 2 ] || [ $# -eq 3 ] || die_usage "usage: unload.sh NAME LOGDIR [TIMEOUT_S]"
name=${1##*/}
name=${name%.ko}
logdir=$2
timeout_s=${3:-120}
require_positive_seconds "$timeout_s"
[ -n "$name" ] || die_usage "NAME is empty"
need_commands kldunload kldstat dmesg
mkdir -p "$logdir" || die_usage "cannot create log directory '$logdir'"
status="$logdir/unload.status"
: >"$status"
record() { printf '%s=%s\n' "$1" "$2" >>"$status"; }

if ! file_listed "$name"; then
    say "$name is not loaded"
    record result not-loaded
    exit "$EX_STATE"
fi

marker=$(new_marker_id "unload-$name")
record marker "$marker"
snapshot_kernel_log "$logdir/msgbuf.before.unload" || say "warning: dmesg -a failed before the unload"
write_marker "$marker" || say "warning: cannot write the marker to ${BSDKM_CONSOLE:-/dev/console}"

started=$(date +%s)
run_limited "$timeout_s" "$logdir/kldunload.out" kldunload "$name"
unload_rc=$?
record duration_s "$(elapsed_since "$started")"

snapshot_kernel_log "$logdir/msgbuf.after.unload" || say "warning: dmesg -a failed after the unload"
method=$(cut_kernel_log "$marker" "$logdir/msgbuf.before.unload" "$logdir/msgbuf.after.unload" \
    "$logdir/unload.kernel.log")
record slice_method "$method"
"$here/collect.sh" "$logdir"

if [ "$unload_rc" -eq 124 ]; then
    record unload_rc ""
    record timed_out 1
    record result timeout
    say "kldunload $name did not finish within $timeout_s s"
    exit "$EX_TIMEOUT"
fi
record unload_rc "$unload_rc"
record timed_out 0

if [ "$unload_rc" -ne 0 ]; then
    record result unload-error
    say "kldunload failed (status $unload_rc): $(head -n 1 "$logdir/kldunload.out")"
    exit "$EX_FAILED"
fi
if file_listed "$name"; then
    record result still-listed
    say "kldunload returned 0 but $name is still listed by kldstat"
    exit "$EX_STATE"
fi
# Plain module: "info: libwolfssl unloaded"; crypto-register driver: detach's
# "crid unregistered". Either means wolfCrypt_Cleanup ran and succeeded.
if grep -q -e 'info: libwolfssl unloaded' -e 'info: crid unregistered:' "$logdir/unload.kernel.log"; then
    record cleanup_seen 1
    record result unloaded
    exit "$EX_OK"
fi
record cleanup_seen 0
record result no-cleanup-line
say "$name unloaded, but the kernel log has no cleanup line"
exit "$EX_NO_CLEANUP"
