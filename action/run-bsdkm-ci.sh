#!/usr/bin/env bash
# Runs `bsdkm-ci run` from the action's inputs (BSDKM_* environment), on the runner or inside the
# FreeBSD VM. Plumbing only: turns inputs into flags, and records the exit status in
# $BSDKM_OUT/run.exit-code instead of failing, so the outputs and gate steps (which judge the
# results) still run, and so a failed VM step can only mean the VM itself failed.
set -uo pipefail

out="${BSDKM_OUT:?BSDKM_OUT is not set}"
mkdir -p "$out"

if [ "${BSDKM_IN_VM:-}" = true ]; then
  # Inside the VM only the light runtime dependencies; buildbot is for the Buildbot shell.
  python3.11 -m pip install --quiet --retries 5 --no-deps "$out"/.bsdkm-ci/*.whl &&
    python3.11 -m pip install --quiet --retries 5 junit-xml requests ||
    { echo "bsdkm-ci: could not install bsdkm-ci in the VM" >&2; exit 1; }
fi

config="${BSDKM_CONFIG:-}"
if [ -n "${BSDKM_SOURCE:-}" ]; then
  # The config's own source is replaced by the checked-out tree (a copy; the original is untouched).
  bsdkm-ci action config --config "$config" --source "$BSDKM_SOURCE" --write "$out/bsdkm.action.yml" ||
    { echo 2 > "$out/run.exit-code"; exit 0; }
  config="$out/bsdkm.action.yml"
fi

args=(--out "$out")
[ -n "$config" ] && args+=(--config "$config")
for v in ${BSDKM_VARIANTS//,/ }; do args+=(--variant "$v"); done
for t in ${BSDKM_TARGETS//,/ }; do args+=(--target "$t"); done

bsdkm-ci run "${args[@]}"
echo "$?" > "$out/run.exit-code"
exit 0
