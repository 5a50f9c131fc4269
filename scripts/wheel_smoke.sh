#!/usr/bin/env bash
# Installs a built wheel alone (its base dependencies, from the index) into a new venv and runs the
# command as a user would, from outside the checkout, on two benchmark logs recorded in bench/data:
# parse, junit, compare, and the Action's judging steps (action outputs, action gate).
#
#   bash scripts/wheel_smoke.sh dist/buildbot_bsdkm-X.Y.Z-py3-none-any.whl [VENV]
#
# The release workflow runs it on the wheel it is about to publish. The test suite runs it too
# (tests/integration/test_wheel.py), with VENV: a venv that already holds only that wheel.
set -euo pipefail

wheel="$(realpath "${1:?usage: wheel_smoke.sh WHEEL [VENV]}")"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="$root/bench/data/noise-2026-12-01-late"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "wheel_smoke: $*" >&2; exit 1; }

venv="${2:-}"
if [ -z "$venv" ]; then
  venv="$work/venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --retries 5 "$wheel"
fi
venv="$(realpath "$venv")"
cd "$work"
export PATH="$venv/bin:$PATH"

version="$(basename "$wheel" | cut -d- -f2)"
[ "$(bsdkm-ci --version)" = "bsdkm-ci $version" ] || fail "bsdkm-ci --version is not $version"
for module in buildbot requests; do
  if python -c "import $module" 2>/dev/null; then fail "the base install brought $module"; fi
done
[ -n "$(find "$venv" -path '*.dist-info/licenses/LICENSE' -print -quit)" ] || fail "no LICENSE installed"

zcat "$logs/intelasm_r01.txt.gz" > base.txt
zcat "$logs/intelasm_r02.txt.gz" > head.txt
bsdkm-ci parse base.txt --json --variant intelasm --target userspace > base.json
bsdkm-ci parse head.txt --json --variant intelasm --target userspace > head.json
# 0 pass, 1 a gate failed: both are judgements; 2 would be unusable input.
rc=0; bsdkm-ci junit head.txt -o junit.xml --markdown report.md > junit.out || rc=$?
[ "$rc" -le 1 ] || fail "junit exited $rc"
grep -q "<testsuite" junit.xml || fail "junit wrote no test suite"
rc=0; bsdkm-ci compare base.json head.json > compare.md || rc=$?
[ "$rc" -le 1 ] || fail "compare exited $rc"

mkdir out
cp head.json out/summary.json
echo 0 > out/run.exit-code
env -u GITHUB_OUTPUT bsdkm-ci action outputs --out out > outputs.txt
grep -q '^verdict=' outputs.txt || fail "action outputs wrote no verdict"
rc=0; bsdkm-ci action gate --out out || rc=$?
[ "$rc" -le 1 ] || fail "action gate exited $rc"
echo "wheel_smoke: $(basename "$wheel"): parse, junit, compare, action outputs and gate ran"
