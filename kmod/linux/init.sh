#!/bin/busybox sh
# /init of the bsdkm-ci initramfs: load one kernel module once, unload it, power off.
#
# Everything the host needs to judge the run is on the serial console:
# `### bsdkm-ci: <event> ... uptime=<s>` markers around each step, and the kernel
# log dumped after boot, after the load and after the unload (with `quiet` only
# errors reach the console live). The markers come in a fixed order, so a hang or
# panic is recognised by which marker is the last one printed:
#   init begin -> boot dmesg begin/end -> load begin -> load rc=N | load timeout
#   -> load dmesg begin/end -> modules begin/end [-> after-load begin -> after-load rc=N
#   | after-load timeout] -> unload begin -> unload rc=N
#   | unload timeout | unload skipped -> unload dmesg begin/end -> poweroff
#
# Inputs: /etc/bsdkm-ci.conf (MODULE, MODNAME, MODPARAMS, NONCE; written by
# mkinitramfs.sh, removed once read) and, on the kernel command line, bsdkm_ci.load_timeout=S and
# bsdkm_ci.unload_timeout=S, bsdkm_ci.after_load_timeout=S (seconds, guest-side watchdogs; the host keeps its
# own hard timeout in case the guest itself stops).

/bin/busybox mkdir -p /proc /sys /dev /tmp /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

uptime_s() { cut -d' ' -f1 /proc/uptime; }
# NONCE (from the conf, this boot's own) ends every marker: the host takes no marker without it,
# so a module that prints marker-like lines cannot stand in for this script.
mark() { echo "### bsdkm-ci: $* uptime=$(uptime_s)${NONCE:+ nonce=$NONCE}"; }

# Value of `bsdkm_ci.<key>=` on the kernel command line, or the default.
cmdline_opt() {
    read -r cmdline </proc/cmdline
    for word in $cmdline; do
        case "$word" in
            "bsdkm_ci.$1="*) echo "${word#*=}"; return ;;
        esac
    done
    echo "$2"
}

# Show the kernel log since the last dump between two markers, and clear it.
dump_dmesg() {
    mark "$1 dmesg begin"
    dmesg -c
    mark "$1 dmesg end"
}

finish() {
    mark "poweroff"
    sync
    poweroff -f
    # Only reached if poweroff failed: exiting init panics, and panic=-1 ends the VM.
    exit 1
}

# Whole seconds since boot, without forking (forks are slow in a starved TCG guest).
uptime_whole() {
    read -r up _ </proc/uptime
    echo "${up%.*}"
}

# Run a command in the background with a watchdog: a module init that never
# returns must still leave us able to dump the kernel log and power off.
# Sets RC to the command's exit status, or TIMED_OUT=1 after $1 seconds.
# The deadline is on the guest clock, not a count of polls: on a loaded host each
# poll takes far longer than its sleep.
run_bounded() {
    limit=$1
    shift
    rm -f /tmp/rc
    ("$@"; echo $? >/tmp/rc) &
    deadline=$(($(uptime_whole) + limit))
    TIMED_OUT=0
    while [ ! -s /tmp/rc ]; do
        if [ "$(uptime_whole)" -ge "$deadline" ]; then
            TIMED_OUT=1
            return
        fi
        sleep 0.2
    done
    read -r RC </tmp/rc
}

# A hung step: show where the tasks are blocked, then stop the VM.
give_up() {
    mark "$1 timeout after ${2}s"
    echo w >/proc/sysrq-trigger 2>/dev/null
    dump_dmesg "$1"
    finish
}

if [ ! -r /etc/bsdkm-ci.conf ]; then
    mark "init error: /etc/bsdkm-ci.conf missing"
    finish
fi
# shellcheck source=/dev/null
. /etc/bsdkm-ci.conf
# Gone before any module runs: the nonce now lives only in this shell.
rm -f /etc/bsdkm-ci.conf
load_timeout=$(cmdline_opt load_timeout 600)
unload_timeout=$(cmdline_opt unload_timeout 60)

mark "init begin kernel=$(uname -r)"
mark "module path=$MODULE name=$MODNAME load_timeout=$load_timeout unload_timeout=$unload_timeout"
mark "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 | tr ' ' '\n' |
    grep -E '^(aes|pclmulqdq|avx|avx2|bmi2|adx|sha_ni|rdrand|rdseed|vaes|vpclmulqdq|avx512f)$' | tr '\n' ' ')"
dump_dmesg boot

mark "load begin"
run_bounded "$load_timeout" /bin/bsdkm-modload load "$MODULE" "$MODPARAMS"
[ "$TIMED_OUT" = 1 ] && give_up load "$load_timeout"
mark "load rc=$RC"
dump_dmesg load

mark "modules begin"
cat /proc/modules
mark "modules end"
mark "tainted=$(cat /proc/sys/kernel/tainted)"

# Optional step while the module is loaded (an initramfs overlay may add one, e.g. the
# AF_ALG benchmark of the lkcapi variant), bounded like the load itself.
if [ -x /etc/bsdkm-ci.d/after-load ] && grep -q "^$MODNAME " /proc/modules; then
    after_load_timeout=$(cmdline_opt after_load_timeout 300)
    mark "after-load begin"
    # The nonce goes along: a step that counts instructions signals QEMU's plugin with it.
    run_bounded "$after_load_timeout" env BSDKM_CI_NONCE="$NONCE" /etc/bsdkm-ci.d/after-load
    [ "$TIMED_OUT" = 1 ] && give_up after-load "$after_load_timeout"
    mark "after-load rc=$RC"
fi

if grep -q "^$MODNAME " /proc/modules; then
    mark "unload begin"
    run_bounded "$unload_timeout" /bin/bsdkm-modload unload "$MODNAME"
    [ "$TIMED_OUT" = 1 ] && give_up unload "$unload_timeout"
    mark "unload rc=$RC"
else
    mark "unload skipped: $MODNAME not loaded"
fi
dump_dmesg unload
finish
