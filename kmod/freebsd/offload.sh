#!/bin/sh
# offload.sh LOGDIR — crypto-register variant: offload vs software, after load.sh.
#
# With --enable-freebsdkm-crypto-register the module attaches a driver to FreeBSD's
# crypto framework (opencrypto) instead of running its self-test. This script, run while
# the module is loaded:
#   1. finds the crid the driver registered ("libwolf0: info: driver loaded: <crid>" in
#      LOGDIR/load.kernel.log, and opencrypto's "crypto: assign libwolf0 driver id <n>") and
#      records `sysctl kern.crypto` (falling back to the single oids older releases have),
#      into LOGDIR/offload.status;
#   2. runs `openssl speed -elapsed -evp aes-128-gcm -engine devcrypto` (OpenSSL >= 1.1;
#      `cryptodev` on OpenSSL 1.0.2, tried second) and the same without the engine, into
#      LOGDIR/openssl.devcrypto.txt and LOGDIR/openssl.software.txt (stdout + stderr).
# -elapsed matters: through /dev/crypto the work happens in the kernel, so user CPU time
# (openssl's default clock) would make offload look absurdly fast.
# Environment: OPENSSL (default: openssl on PATH), OFFLOAD_ALG (default aes-128-gcm).
# Exit status: 0 both measured; 1 the engine run failed (software still measured);
# 2 usage; 4 no crid registered (nothing measured).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

[ $# -eq 1 ] || die_usage "usage: offload.sh LOGDIR"
logdir=$1
[ -d "$logdir" ] || die_usage "LOGDIR not found: $logdir (run load.sh first)"
openssl=${OPENSSL:-openssl}
alg=${OFFLOAD_ALG:-aes-128-gcm}
need_commands sysctl "$openssl"
status="$logdir/offload.status"

crid=$(sed -n 's/.*libwolf[0-9]*: info: driver loaded: \([0-9][0-9]*\).*/\1/p' \
    "$logdir/load.kernel.log" 2>/dev/null | tail -n 1)
# opencrypto's own line for the same registration (crypto_get_driverid): "crypto: assign
# libwolf0 driver id 1, flags 0xf000000"; recorded so a reader can check both agree.
framework_id=$(sed -n 's/.*crypto: assign libwolf[0-9]* driver id \([0-9][0-9]*\).*/\1/p' \
    "$logdir/load.kernel.log" 2>/dev/null | tail -n 1)
{
    sysctl kern.crypto 2>/dev/null ||
        sysctl kern.crypto.allow_soft kern.cryptodevallowsoft 2>/dev/null
} >"$logdir/sysctl.kern.crypto.txt"
{
    echo "crid=$crid"
    echo "framework_driver_id=$framework_id"
    echo "alg=$alg"
    echo "openssl_version=$("$openssl" version 2>/dev/null | head -n 1)"
} >"$status"
if [ -z "$crid" ]; then
    echo "result=no-crid" >>"$status"
    say "no 'driver loaded: <crid>' line in $logdir/load.kernel.log: the driver did not register"
    exit "$EX_STATE"
fi

engine_rc=1
for engine in devcrypto cryptodev; do
    # No -seconds: OpenSSL 1.0.2 does not know it (3 s per block size either way).
    "$openssl" speed -elapsed -evp "$alg" -engine "$engine" >"$logdir/openssl.devcrypto.txt" 2>&1 && { engine_rc=0; break; }
done
echo "engine=$engine" >>"$status"
echo "engine_rc=$engine_rc" >>"$status"
"$openssl" speed -elapsed -evp "$alg" >"$logdir/openssl.software.txt" 2>&1
echo "software_rc=$?" >>"$status"
if [ "$engine_rc" -ne 0 ]; then
    echo "result=engine-failed" >>"$status"
    exit "$EX_FAILED"
fi
echo "result=measured" >>"$status"
exit "$EX_OK"
