#!/usr/bin/env bash
# The whole test suite, including real wolfSSL builds and the Linux module in QEMU.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/bootstrap.sh
source "$here/bootstrap.sh" test
cd "$BSDKM_ROOT"
ruff check .
exec pytest -q -p no:cacheprovider "$@"
