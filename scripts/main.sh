#!/usr/bin/env bash
# The main job: bsdkm-ci on the embedded default configuration.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/bootstrap.sh
source "$here/bootstrap.sh" main
cd "$BSDKM_ROOT"
exec bsdkm-ci main "$@"
