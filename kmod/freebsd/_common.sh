# shellcheck shell=sh
# Shared helpers for the FreeBSD libwolfssl.ko scripts; sourced, never run.
# Plain POSIX sh: FreeBSD's /bin/sh runs these, dash checks them here.
#
# How a run's kernel messages are cut out of the message buffer
# -------------------------------------------------------------
# `logger` writes to syslogd, not to the kernel message buffer, so it cannot
# mark a position there. Text written to /dev/console is copied into the
# message buffer (as a LOG_CONSOLE record, shown by `dmesg -a`) while the
# sysctl kern.log_console_output is 1, FreeBSD's default. So each script:
#   1. saves `dmesg -a` (a snapshot) before acting,
#   2. writes a unique marker line to the console,
#   3. acts (kldload / kldunload), then saves `dmesg -a` again,
#   4. keeps only the lines after the last copy of its marker.
# If the marker is missing (console logging off, or the ring buffer wrapped
# past it) the second snapshot is aligned against the first instead, and if
# even that fails the whole buffer is kept and the method says so, so a
# reader knows older lines may be mixed in. We never clear the buffer
# (kern.msgbuf_clear): it belongs to the machine, not to us.
#
# Marker lines are removed from every slice, so the logs hold only what the
# kernel printed. BSDKM_CONSOLE overrides /dev/console (the test double uses it).

BSDKM_MARKER_TAG="bsdkm-ci-marker:"

# Root runs these through sudo, which keeps the caller's PATH (FreeBSD's sudoers sets no
# secure_path). So the system's own directories, and only they: kldload, kldstat, kldunload,
# dmesg and sysctl live in /sbin (hier(7)), and nothing the worker user can write may stand in
# for a command root runs. BSDKM_SYSTEM_PATH replaces them for the replay double on Linux
# (sudo's env_reset drops it, so it never reaches a run through sudo).
PATH=${BSDKM_SYSTEM_PATH:-/sbin:/bin:/usr/sbin:/usr/bin}
export PATH

# Exit statuses shared by load.sh and unload.sh (documented in README.md).
# shellcheck disable=SC2034 # used by the scripts that source this file
readonly EX_OK=0 EX_FAILED=1 EX_USAGE=2 EX_TIMEOUT=3 EX_STATE=4 EX_NO_CLEANUP=5

say() {
    printf '%s: %s\n' "${0##*/}" "$*" >&2
}

die_usage() {
    say "$*"
    exit "$EX_USAGE"
}

need_commands() {
    for _cmd in "$@"; do
        command -v "$_cmd" >/dev/null 2>&1 ||
            die_usage "'$_cmd' not found in $PATH: this must run on a FreeBSD host"
    done
}

require_positive_seconds() {
    case "$1" in
        '' | *[!0-9]* | 0 | 00*) die_usage "TIMEOUT_S must be a whole number of seconds > 0, got '$1'" ;;
    esac
}

new_marker_id() {
    printf '%s-%s-%s-%s\n' "$1" "$(hostname 2>/dev/null || echo host)" "$$" "$(date +%s)"
}

# Appends (never truncates) so a plain file can stand in for the console.
write_marker() {
    printf '%s %s\n' "$BSDKM_MARKER_TAG" "$1" >>"${BSDKM_CONSOLE:-/dev/console}" 2>/dev/null
}

snapshot_kernel_log() {
    dmesg -a >"$1" 2>/dev/null
}

# slice_after_marker ID SNAPSHOT OUT: lines after the last line holding ID.
slice_after_marker() {
    awk -v id="$1" -v tag="$BSDKM_MARKER_TAG" '
        index($0, id) { n = 0; found = 1; next }
        found { buf[++n] = $0 }
        END {
            for (i = 1; i <= n; i++)
                if (index(buf[i], tag) == 0) print buf[i]
            exit(found ? 0 : 1)
        }' "$2" >"$3"
}

# slice_after_snapshot BEFORE AFTER OUT: the lines of AFTER that follow the
# longest tail of BEFORE found at AFTER's start (its first line may be cut
# by the ring buffer, so alignment may also start at AFTER's second line).
# Status 1, with all of AFTER written, when nothing of BEFORE is left.
slice_after_snapshot() {
    awk -v tag="$BSDKM_MARKER_TAG" '
        NR == FNR { if (index($0, tag) == 0) b[++nb] = $0; next }
        { if (index($0, tag) == 0) a[++na] = $0 }
        function aligned(i, j,    k) {
            for (k = 0; i + k <= nb; k++)
                if (j + 1 + k > na || a[j + 1 + k] != b[i + k]) return 0
            return 1
        }
        END {
            start = 1; ok = (nb == 0)
            for (i = 1; !ok && i <= nb; i++)
                for (j = 0; !ok && j <= 1; j++)
                    if (aligned(i, j)) { ok = 1; start = j + (nb - i + 1) + 1 }
            for (k = start; k <= na; k++) print a[k]
            exit(ok ? 0 : 1)
        }' "$1" "$2" >"$3"
}

# cut_kernel_log ID BEFORE AFTER OUT -> prints the method used.
cut_kernel_log() {
    if slice_after_marker "$1" "$3" "$4"; then
        echo marker
    elif slice_after_snapshot "$2" "$3" "$4"; then
        echo snapshot
    else
        echo whole-buffer
    fi
}

# run_limited SECONDS OUTFILE CMD...: runs CMD with a time limit.
# Not timeout(1): a kldload stuck inside the kernel may ignore even SIGKILL,
# and timeout(1) then waits for it forever. Here we stop waiting instead,
# leave the stuck process behind (the worker needs a reboot) and return 124.
run_limited() {
    _limit_ticks=$(($1 * 5))
    _out=$2
    shift 2
    "$@" >"$_out" 2>&1 &
    _pid=$!
    _ticks=0
    while kill -0 "$_pid" 2>/dev/null; do
        if [ "$_ticks" -ge "$_limit_ticks" ]; then
            kill -TERM "$_pid" 2>/dev/null
            sleep 1
            kill -KILL "$_pid" 2>/dev/null
            return 124
        fi
        sleep 0.2
        _ticks=$((_ticks + 1))
    done
    wait "$_pid"
}

# module_listed NAME...: first module name kldstat knows, if any.
module_listed() {
    for _mod in "$@"; do
        if kldstat -q -m "$_mod" 2>/dev/null; then
            echo "$_mod"
            return 0
        fi
    done
    return 1
}

file_listed() {
    kldstat -q -n "$1" 2>/dev/null
}

# Modules libwolfssl.ko may declare: plain, FIPS, crypto-register driver.
module_candidates() {
    if [ -n "${BSDKM_MODULE:-}" ]; then
        echo "$BSDKM_MODULE"
    else
        echo "$1 ${1}_fips nexus/$1"
    fi
}

elapsed_since() {
    echo $(($(date +%s) - $1))
}
