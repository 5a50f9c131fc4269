#!/bin/busybox sh
# /etc/bsdkm-ci.d/after-load of the lkcapi variant: AF_ALG throughput while wolfCrypt is
# registered with the kernel crypto API (run by init.sh between "modules end" and the unload).
#
# 1. Load the kernel's own AF_ALG and crypto modules (copied from /lib/modules/<version>
#    by pipeline/targets/linux_kmod_qemu/afalg.py, listed in dependency order in /lib/modules/afalg/order).
#    Their loader lines are renamed so the host never takes them for the module's load.
# 2. Run /bin/bsdkm-afalg (afalg_bench.c): every path it was built for, AFALG_BUDGET_MS per size.
# 3. Ask wolfCrypt to unregister its algorithms, which the module needs before it can unload.
# Inputs: /etc/bsdkm-ci.d/afalg.conf (AFALG_BUDGET_MS, AFALG_SIZES; AFALG_COUNT_BYTES,
# AFALG_COUNT_SIZES and AFALG_COUNT_SECTIONS, the module's executable sections besides .text, for
# the counted run), BSDKM_CI_NONCE in the environment (from /init).

AFALG_BUDGET_MS=100
AFALG_SIZES=16,64,256,1024,4096,16384,65536
# shellcheck source=/dev/null
[ -r /etc/bsdkm-ci.d/afalg.conf ] && . /etc/bsdkm-ci.d/afalg.conf

if [ -r /lib/modules/afalg/order ]; then
    while read -r ko; do
        /bin/bsdkm-modload load "/lib/modules/afalg/$ko" "" | sed 's/^bsdkm-modload: /afalg-kmod: /'
    done </lib/modules/afalg/order
fi

/bin/bsdkm-afalg -t "$AFALG_BUDGET_MS" -s "$AFALG_SIZES"
rc=$?

# 2b. With AFALG_COUNT_BYTES: the fixed-work run QEMU's counting plugin measures (the timed run
#     above is unchanged by it).
if [ -n "${AFALG_COUNT_BYTES:-}" ]; then
    if [ -n "${AFALG_COUNT_SECTIONS:-}" ]; then
        /bin/bsdkm-afalg -w "$AFALG_COUNT_BYTES" -s "${AFALG_COUNT_SIZES:-16,1024,16384}" \
            -x "$AFALG_COUNT_SECTIONS" || rc=1
    else
        /bin/bsdkm-afalg -w "$AFALG_COUNT_BYTES" -s "${AFALG_COUNT_SIZES:-16,1024,16384}" || rc=1
    fi
fi

if [ -w /sys/module/libwolfssl/deinstall_algs ]; then
    echo 1 >/sys/module/libwolfssl/deinstall_algs && echo "afalg-kmod: deinstall_algs: ok" ||
        echo "afalg-kmod: deinstall_algs: failed"
fi
exit "$rc"
