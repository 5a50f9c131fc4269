#!/bin/sh
# load.sh KO [TIMEOUT_S] LOGDIR
# Loads a wolfSSL FreeBSD kernel module (libwolfssl.ko) and keeps the kernel
# messages the load produced. Needs root (kldload).
#
# Writes into LOGDIR:
#   kernel.log          kernel messages since the load began (no marker lines)
#   load.kernel.log     the same slice, kept when unload.sh rewrites kernel.log
#   kldload.out         what kldload printed
#   load.status         key=value facts for bsdkm-ci (see README.md)
#   msgbuf.before.load, msgbuf.after.load   raw `dmesg -a` snapshots
# Exit: 0 loaded and listed by kldstat; 1 kldload failed (kernel log kept);
#       2 usage / not FreeBSD; 3 timed out (kldload hung);
#       4 kldload succeeded but kldstat does not list the module.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

usage="usage: load.sh KO [TIMEOUT_S] LOGDIR"
case $# in
    2) ko=$1 timeout_s=600 logdir=$2 ;;
    3) ko=$1 timeout_s=$2 logdir=$3 ;;
    *) die_usage "$usage" ;;
esac
require_positive_seconds "$timeout_s"
[ -f "$ko" ] || die_usage "kernel module '$ko' does not exist"
need_commands kldload kldstat dmesg
mkdir -p "$logdir" || die_usage "cannot create log directory '$logdir'"

case $ko in
    /*) ;;
    *) ko="$(cd "$(dirname "$ko")" && pwd)/${ko##*/}" ;;
esac
name=${ko##*/}
name=${name%.ko}
status="$logdir/load.status"
: >"$status"
record() { printf '%s=%s\n' "$1" "$2" >>"$status"; }

if file_listed "$name"; then
    say "$name is already loaded; unload it first (kldunload $name)"
    record result already-loaded
    exit "$EX_STATE"
fi

marker=$(new_marker_id "load-$name")
record marker "$marker"
record ko "$ko"
record timeout_s "$timeout_s"
snapshot_kernel_log "$logdir/msgbuf.before.load" || say "warning: dmesg -a failed before the load"
write_marker "$marker" || say "warning: cannot write the marker to ${BSDKM_CONSOLE:-/dev/console}"

started=$(date +%s)
run_limited "$timeout_s" "$logdir/kldload.out" kldload "$ko"
load_rc=$?
record duration_s "$(elapsed_since "$started")"

snapshot_kernel_log "$logdir/msgbuf.after.load" || say "warning: dmesg -a failed after the load"
method=$(cut_kernel_log "$marker" "$logdir/msgbuf.before.load" "$logdir/msgbuf.after.load" \
    "$logdir/load.kernel.log")
cp "$logdir/load.kernel.log" "$logdir/kernel.log"
record slice_method "$method"

if [ "$load_rc" -eq 124 ]; then
    record load_rc ""
    record timed_out 1
    record loaded_seen 0
    record result timeout
    say "kldload $ko did not finish within $timeout_s s; kernel log so far in $logdir/kernel.log"
    exit "$EX_TIMEOUT"
fi
record load_rc "$load_rc"
record timed_out 0

if [ "$load_rc" -ne 0 ]; then
    record loaded_seen 0
    record result load-error
    say "kldload failed (status $load_rc): $(head -n 1 "$logdir/kldload.out")"
    say "kernel log kept as evidence: $logdir/kernel.log"
    exit "$EX_FAILED"
fi

# shellcheck disable=SC2046 # the candidate list is split on purpose
if module=$(module_listed $(module_candidates "$name")); then
    record loaded_seen 1
    record module "$module"
    record result loaded
    exit "$EX_OK"
fi
record loaded_seen 0
record result not-listed
say "kldload returned 0 but kldstat lists none of: $(module_candidates "$name")"
exit "$EX_STATE"
