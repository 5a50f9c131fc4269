#!/bin/sh
# Boot an initramfs made by mkinitramfs.sh in QEMU (TCG) and wait for it to power off.
#
#   run-qemu.sh INITRD.cpio.gz CONSOLE.log [TIMEOUT_S]
#
# The serial console goes to CONSOLE.log; judge the run from its `### bsdkm-ci:`
# markers: QEMU exits 0 even when the module failed. Exit status is QEMU's, or
# 124 when TIMEOUT_S (default 900) ran out and the VM was killed.
# Environment:
#   KERNEL_VERSION  e.g. 6.1.0-57-amd64 (default: the newest /boot/vmlinuz-*)
#   KERNEL          path to the kernel image (overrides KERNEL_VERSION)
#   QEMU_CPU        default "max" (KVM is not usable on our workers: TCG only)
#   QEMU_MEM        MiB, default 1024
#   LOAD_TIMEOUT    guest-side watchdog for the module load (default TIMEOUT_S - max(60, TIMEOUT_S/5))
#   UNLOAD_TIMEOUT  guest-side watchdog for the unload (default 60)
#   EXTRA_APPEND    more kernel command line words
#   QEMU_PLUGIN     a TCG plugin and its arguments (`file.so,key=value,...`), passed as -plugin
#   CONSOLE_CAP_BYTES  stop the VM once the console holds more than this; then the console is cut
#                   to it, "run-qemu.sh: console flood: N bytes" goes to stderr and the exit is 3
set -eu

die() { echo "run-qemu.sh: $*" >&2; exit 2; }

case $# in 2 | 3) ;; *) die "usage: run-qemu.sh INITRD.cpio.gz CONSOLE.log [TIMEOUT_S]" ;; esac
initrd=$1
log=$2
timeout_s=${3:-900}
case "$timeout_s" in '' | *[!0-9]*) die "TIMEOUT_S must be whole seconds, got '$timeout_s'" ;; esac
[ -f "$initrd" ] || die "initramfs not found: $initrd"

if [ -n "${KERNEL:-}" ]; then
    kernel=$KERNEL
elif [ -n "${KERNEL_VERSION:-}" ]; then
    kernel=/boot/vmlinuz-$KERNEL_VERSION
else
    kernel=$(printf '%s\n' /boot/vmlinuz-* | sort -V | tail -n 1)
fi
if [ ! -r "$kernel" ]; then
    die "kernel image not readable: $kernel (install linux-image-amd64)"
fi
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (install qemu-system-x86)"

# Leave the guest time to boot, dump its log and power off after its own watchdog fires:
# a host kill loses the kernel log of the load (with `quiet` nothing was printed live).
margin=$((timeout_s / 5 > 60 ? timeout_s / 5 : 60))
load_timeout=${LOAD_TIMEOUT:-$((timeout_s > 120 ? timeout_s - margin : timeout_s / 2))}
unload_timeout=${UNLOAD_TIMEOUT:-60}
append="console=ttyS0 quiet panic=-1 bsdkm_ci.load_timeout=$load_timeout"
append="$append bsdkm_ci.unload_timeout=$unload_timeout ${EXTRA_APPEND:-}"

cap=${CONSOLE_CAP_BYTES:-}
case "$cap" in *[!0-9]*) die "CONSOLE_CAP_BYTES must be whole bytes, got '$cap'" ;; esac

: >"$log"
rc=0
set --
if [ -n "${QEMU_PLUGIN:-}" ]; then
    set -- -plugin "$QEMU_PLUGIN"
fi
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
    -accel tcg -cpu "${QEMU_CPU:-max}" -m "${QEMU_MEM:-1024}" -smp 1 \
    -nographic -no-reboot -kernel "$kernel" -initrd "$initrd" \
    -append "$append" -serial "file:$log" -monitor none -display none "$@" &
vm=$!
flood=
if [ -n "$cap" ]; then
    # A guest that prints without end would fill the disk: stop it at the cap.
    while kill -0 "$vm" 2>/dev/null; do
        size=$(stat -c %s "$log")
        if [ "$size" -gt "$cap" ]; then
            flood=$size
            pkill -KILL -P "$vm" 2>/dev/null || true # QEMU, the child of timeout(1)
            kill -TERM "$vm" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
fi
wait "$vm" || rc=$?
if [ -n "$flood" ]; then
    truncate -s "$cap" "$log"
    echo "run-qemu.sh: console flood: $flood bytes (cap $cap)" >&2
    exit 3
fi
exit "$rc"
