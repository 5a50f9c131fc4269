#!/bin/sh
# offload.sh LOGDIR — crypto-register variant: offload vs software, after load.sh.
#
# With --enable-freebsdkm-crypto-register the module attaches a driver to FreeBSD's
# crypto framework (opencrypto) instead of running its self-test. This script, run as root
# while the module is loaded:
#   1. finds the crid the driver registered ("libwolf0: info: driver loaded: <crid>" in
#      LOGDIR/load.kernel.log, and opencrypto's "crypto: assign libwolf0 driver id <n>");
#   2. makes /dev/crypto exist: GENERIC has no `device cryptodev`, so it loads cryptodev.ko
#      unless kldstat lists the module;
#   3. sets kern.crypto.allow_soft=0 for the run (older: kern.cryptodevallowsoft) and puts the
#      old value back at the end. With 0, cryptodev refuses every driver that registered
#      CRYPTOCAP_F_SOFTWARE alone (cryptosoft0, aesni0, ossl0), while wolfSSL's driver, which
#      registers CRYPTOCAP_F_HARDWARE as well, stays eligible (checkforsoftware() in
#      sys/opencrypto/cryptodev.c looks at the driver's capabilities);
#   4. asks OpenSSL's devcrypto engine which driver /dev/crypto gives it for the cipher
#      (`openssl engine -pre DUMP_INFO devcrypto`: it opens a session the way it will for the
#      measurement and names the driver by CIOCFINDDEV). The engine picks by capability, not
#      by crid, so a driver other than wolfSSL's (real crypto hardware) is refused here,
#      rather than timed and called wolfSSL;
#   5. runs `openssl speed -elapsed -evp aes-128-cbc -engine devcrypto` and the same without
#      the engine, into LOGDIR/openssl.devcrypto.txt and LOGDIR/openssl.software.txt.
# The engine offers CBC and CTR through /dev/crypto, not GCM (an -evp aes-128-gcm run with
# the engine is OpenSSL's own code), hence aes-128-cbc. -elapsed matters: through /dev/crypto
# the work happens in the kernel, so user CPU time would make offload look absurdly fast.
# Writes LOGDIR/offload.status (crid, driver, cryptodev, allow_soft, engine, result, ...) and
# LOGDIR/sysctl.kern.crypto.txt. Environment (ignored under sudo, whose env_reset drops
# them): OFFLOAD_ALG (default aes-128-cbc).
# Exit status: 0 both measured through wolfSSL's driver; 1 /dev/crypto or the engine could
# not be used, or it would use another driver (software still measured); 2 usage;
# 4 no crid registered (nothing measured).
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/_common.sh
. "$here/_common.sh"

[ $# -eq 1 ] || die_usage "usage: offload.sh LOGDIR"
logdir=$1
[ -d "$logdir" ] || die_usage "LOGDIR not found: $logdir (run load.sh first)"
alg=${OFFLOAD_ALG:-aes-128-cbc}
need_commands sysctl kldstat kldload openssl
status="$logdir/offload.status"
note() { echo "$1=$2" >>"$status"; }

crid=$(sed -n 's/.*libwolf[0-9]*: info: driver loaded: \([0-9][0-9]*\).*/\1/p' \
    "$logdir/load.kernel.log" 2>/dev/null | tail -n 1)
# opencrypto's own line for the same registration (crypto_get_driverid): "crypto: assign
# libwolf0 driver id 1, flags 0xf000000"; recorded so a reader can check both agree.
framework_id=$(sed -n 's/.*crypto: assign libwolf[0-9]* driver id \([0-9][0-9]*\).*/\1/p' \
    "$logdir/load.kernel.log" 2>/dev/null | tail -n 1)
{
    echo "crid=$crid"
    echo "framework_driver_id=$framework_id"
    echo "alg=$alg"
    echo "openssl_version=$(openssl version 2>/dev/null | head -n 1)"
} >"$status"
if [ -z "$crid" ]; then
    { sysctl kern.crypto 2>/dev/null || sysctl kern.crypto.allow_soft kern.cryptodevallowsoft 2>/dev/null; } \
        >"$logdir/sysctl.kern.crypto.txt"
    note result no-crid
    say "no 'driver loaded: <crid>' line in $logdir/load.kernel.log: the driver did not register"
    exit "$EX_STATE"
fi

if kldstat -q -m cryptodev; then
    note cryptodev present
elif kldload cryptodev >"$logdir/kldload.cryptodev.out" 2>&1; then
    note cryptodev loaded
else
    note cryptodev load-failed
fi

soft_oid=kern.crypto.allow_soft
soft_before=$(sysctl -n "$soft_oid" 2>/dev/null) || {
    soft_oid=kern.cryptodevallowsoft
    soft_before=$(sysctl -n "$soft_oid" 2>/dev/null) || soft_oid=""
}
note allow_soft_oid "$soft_oid"
note allow_soft_before "$soft_before"
# shellcheck disable=SC2317 # run by the EXIT trap
restore_soft() {
    if [ -n "$soft_oid" ] && [ -n "$soft_before" ] && [ "$soft_before" != 0 ]; then
        sysctl "$soft_oid=$soft_before" >/dev/null 2>&1
    fi
}
trap restore_soft EXIT
if [ -n "$soft_oid" ] && sysctl "$soft_oid=0" >/dev/null 2>&1; then
    note allow_soft 0
else
    note allow_soft unchanged
fi
{ sysctl kern.crypto 2>/dev/null || sysctl "$soft_oid" 2>/dev/null; } >"$logdir/sysctl.kern.crypto.txt"

# "Cipher aes-128-cbc, NID=419, /dev/crypto info: id=11, driver=libwolf0 (hw accelerated)".
# The engine uses a cipher only through a driver it calls accelerated; otherwise its -evp run
# would be OpenSSL's own code under the engine's name.
openssl engine -pre DUMP_INFO devcrypto >"$logdir/openssl.dump_info.txt" 2>&1
info=$(grep "^Cipher $alg, " "$logdir/openssl.dump_info.txt" | head -n 1)
driver=$(echo "$info" | sed -n 's/.*driver=\([^ ]*\).*/\1/p')
case $info in
    *"(hw accelerated)"*) ;;
    *) driver="" ;;
esac
note driver "${driver:-unknown}"

engine_rc=1
case $driver in
    libwolf*)
        openssl speed -elapsed -evp "$alg" -engine devcrypto >"$logdir/openssl.devcrypto.txt" 2>&1
        engine_rc=$?
        ;;
    '' | unknown)
        say "OpenSSL's devcrypto engine named no driver for $alg (see $logdir/openssl.dump_info.txt)"
        ;;
    *)
        say "/dev/crypto would give OpenSSL $driver for $alg, not wolfSSL's driver: not measured"
        ;;
esac
note engine devcrypto
note engine_rc "$engine_rc"
openssl speed -elapsed -evp "$alg" >"$logdir/openssl.software.txt" 2>&1
note software_rc "$?"
if [ "$engine_rc" -ne 0 ]; then
    case $driver in
        libwolf*) note result engine-failed ;;
        '' | unknown) note result no-driver ;;
        *) note result other-driver ;;
    esac
    exit "$EX_FAILED"
fi
note result measured
exit "$EX_OK"
