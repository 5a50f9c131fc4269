#!/bin/sh
# collect.sh LOGDIR
# Gathers what a run left in LOGDIR into the files bsdkm-ci reads:
#   kernel.log   the whole load-to-unload story: the last snapshot cut after
#                load.sh's marker, or load + unload slices joined when the
#                marker is gone (collect.method says which)
#   worker.txt   the machine: uname, CPU model and features, message buffer size
# Runs after unload.sh (which calls it) or by hand after a failed load.
# Exit: 0 done; 2 usage (LOGDIR missing or holds no load.sh output).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

[ $# -eq 1 ] || die_usage "usage: collect.sh LOGDIR"
logdir=$1
[ -f "$logdir/load.status" ] || die_usage "'$logdir' holds no load.status: run load.sh first"

status_value() {
    sed -n "s/^$1=//p" "$2" 2>/dev/null | tail -n 1
}

assemble_kernel_log() {
    marker=$(status_value marker "$logdir/load.status")
    last="$logdir/msgbuf.after.unload"
    [ -f "$last" ] || last="$logdir/msgbuf.after.load"
    if [ -n "$marker" ] && [ -f "$last" ] &&
        slice_after_marker "$marker" "$last" "$logdir/kernel.log.new"; then
        echo marker >"$logdir/collect.method"
    else
        cat "$logdir/load.kernel.log" "$logdir/unload.kernel.log" >"$logdir/kernel.log.new" 2>/dev/null
        echo joined >"$logdir/collect.method"
    fi
    mv "$logdir/kernel.log.new" "$logdir/kernel.log"
}

describe_worker() {
    echo "uname: $(uname -a 2>/dev/null)"
    for oid in hw.model hw.ncpu kern.osrelease kern.msgbufsize kern.log_console_output; do
        echo "$oid: $(sysctl -n "$oid" 2>/dev/null)"
    done
    # Boot-time CPU feature flags (AESNI, AVX, SHA...): dmesg.boot survives the
    # ring buffer wrapping, the live buffer may not.
    if [ -r /var/run/dmesg.boot ]; then
        grep -E '^ +(Features|Structured Extended Features)' /var/run/dmesg.boot 2>/dev/null
    fi
}

assemble_kernel_log
describe_worker >"$logdir/worker.txt"
exit "$EX_OK"
