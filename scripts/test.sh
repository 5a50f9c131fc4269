#!/usr/bin/env bash
# The whole test suite, including real wolfSSL builds and the Linux module in QEMU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/bootstrap.sh
source "$here/bootstrap.sh" test
cd "$BSDKM_ROOT"
# The real fixtures live in ../shared beside the checkout. A clone made elsewhere (a temp dir)
# finds them beside the checkout it was cloned from.
if [ -z "${BSDKM_SHARED:-}" ] && [ ! -d ../shared ]; then
    origin="$(git config --get remote.origin.url || true)"
    if [ -n "$origin" ] && [ -d "$origin/../shared/fixtures" ]; then
        BSDKM_SHARED="$(cd "$origin/../shared" && pwd)"
        export BSDKM_SHARED
        echo "test: fixtures from $BSDKM_SHARED (beside $origin)"
    fi
fi
ruff check .
# One worker per core, whole files longest first (tests/suite_schedule.py); BSDKM_TEST_WORKERS=0 runs
# it in this process.
exec pytest -q -p no:cacheprovider --durations=25 -n "${BSDKM_TEST_WORKERS:-auto}" --dist loadscope "$@"
