#!/usr/bin/env bash
# Local Buildbot master + embedded worker on loopback (sqlite unless --db-url / BSDKM_DB_URL).
#   scripts/master.sh up       start both, run the default (userspace) build, print the verdict, keep the UI up
#   scripts/master.sh down     stop both
#   scripts/master.sh status   what is running
# Options: scripts/master.sh --help; the directory is $BSDKM_MASTER_DIR or ~/.local/state/bsdkm-ci/buildbot.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/bootstrap.sh" test   # the venv with [buildbot]: buildbot-www, the views, buildbot-worker
cd "$BSDKM_ROOT"
exec python -m buildbot_bsdkm.buildbot.control "$@"
