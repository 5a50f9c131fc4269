#!/usr/bin/env bash
# Runs `bsdkm-ci run` from the action's inputs (BSDKM_* environment), on the runner or inside the
# FreeBSD VM. Plumbing only: turns inputs into flags, and records the exit status in
# $BSDKM_OUT/run.exit-code instead of failing, so the outputs and gate steps (which judge the
# results) still run, and so a failed VM step can only mean the VM itself failed.
set -uo pipefail

out="${BSDKM_OUT:?BSDKM_OUT is not set}"
mkdir -p "$out"

if [ "${BSDKM_IN_VM:-}" = true ]; then
  # The wheel with its base dependencies, as its metadata declares them: that is all `bsdkm-ci run`
  # needs. The PR comment's GitHub client ([github]) runs on the host runner, Buildbot is for the
  # Buildbot shell. pkg's py311-pyyaml already satisfies pyyaml, so nothing here is compiled.
  echo "::group::Install bsdkm-ci in the VM"
  if ! python3.11 -m pip install --quiet --retries 5 "$out"/.bsdkm-ci/*.whl; then
    echo "::endgroup::"
    echo "bsdkm-ci: could not install bsdkm-ci in the VM" >&2
    exit 1
  fi
  echo "::endgroup::"
fi

config="${BSDKM_CONFIG:-}"
if [ -n "${BSDKM_SOURCE:-}" ]; then
  # The config's own source is replaced by the checked-out tree (a copy; the original is untouched).
  bsdkm-ci action config --config "$config" --source "$BSDKM_SOURCE" --write "$out/bsdkm.action.yml" ||
    { echo 2 > "$out/run.exit-code"; exit 0; }
  config="$out/bsdkm.action.yml"
fi

# A configured target whose inputs this runner cannot get is an infrastructure failure here (retried,
# then an error), never a green "not run".
args=(--out "$out" --unavailable fail)
[ -n "$config" ] && args+=(--config "$config")
for v in ${BSDKM_VARIANTS//,/ }; do args+=(--variant "$v"); done
# BSDKM_RUN_TARGETS: the targets input, as --target (bsdkm-ci finds targets themselves by entry point).
for t in ${BSDKM_RUN_TARGETS//,/ }; do args+=(--target "$t"); done
# The base, built next to the head and measured interleaved with it (the perf gate's base).
if [ -n "${BSDKM_BASE_DIR:-}" ]; then
  args+=(--base-dir "$BSDKM_BASE_DIR")
elif [ -n "${BSDKM_BASE_REF:-}" ]; then
  if [ -z "${BSDKM_BASE_GIT:-}" ]; then
    echo "bsdkm-ci: base-ref $BSDKM_BASE_REF needs base-git (which repository?)" >&2
    echo 2 > "$out/run.exit-code"
    exit 0
  fi
  args+=(--base-git "$BSDKM_BASE_GIT" --base-ref "$BSDKM_BASE_REF")
fi
[ -n "${BSDKM_REPEATS:-}" ] && args+=(--repeats "$BSDKM_REPEATS")

# Each stage's lines in a log group of its own (the stage's progress lines open them).
echo "bsdkm-ci run ${args[*]}"
bsdkm-ci run --log-groups "${args[@]}"
rc=$?
echo "$rc" > "$out/run.exit-code"
exit 0
