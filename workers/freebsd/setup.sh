#!/bin/sh
# setup.sh MASTER_HOST:PORT WORKER_NAME PASSWORD_FILE
# Makes a FreeBSD (amd64, 13.x/14.x) machine a bsdkm-ci worker for target freebsd-kmod.
# Run as root on a DEDICATED machine or VM: the worker loads kernel modules it
# just built, which is root-equivalent whatever sudo rule allows it.
#
#   1. pkg install the build tools, sudo, Python and the worker's compiled Python packages
#   2. kernel sources in /usr/src (src.txz of the running release) if kmod.mk is missing
#   3. user 'buildbot', a venv over the packaged Python modules with bsdkm-ci, the worker directory
#   4. the root scripts in /usr/local/libexec/bsdkm-ci, copied from the installed package
#   5. sudo for exactly those scripts, without a password
#   6. kernel log settings: console output into the message buffer, a 512 KiB buffer
#   7. start the worker now and at boot (an @reboot line merged into the user's crontab)
#   8. bsdkm-ci doctor for freebsd-kmod, as the worker user
# Idempotent: a second run changes nothing. The worker password is read from PASSWORD_FILE
# (a file holding the password, not the password itself) and never printed.
# DRY_RUN=1 prints the actions (on stderr) instead of doing them.
# BSDKM_CI_SPEC: what pip installs as bsdkm-ci (default: the project's git repository).
# Exit: 0 done; 2 usage / not FreeBSD / not root; 1 a step failed.
set -eu
# Root's directories, whatever PATH called this (sysctl is in /sbin, pw in /usr/sbin, hier(7)).
PATH=$PATH:/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin
export PATH

usage() {
    echo "usage: setup.sh MASTER_HOST:PORT WORKER_NAME PASSWORD_FILE" >&2
    exit 2
}
say() { printf 'setup.sh: %s\n' "$*" >&2; }
run() {
    if [ -n "${DRY_RUN:-}" ]; then
        { printf 'would run:'; printf ' %s' "$@"; printf '\n'; } >&2
    else
        "$@"
    fi
}
# write_file PATH MODE: content on stdin; the file is left alone when it already holds it.
write_file() {
    _new=$(cat)
    if [ -f "$1" ] && [ "$(cat "$1")" = "$_new" ]; then
        return 0
    fi
    if [ -n "${DRY_RUN:-}" ]; then
        printf 'would write %s (mode %s):\n' "$1" "$2" >&2
        printf '%s\n' "$_new" | sed 's/^/    /' >&2
    else
        printf '%s\n' "$_new" >"$1.new"
        chmod "$2" "$1.new"
        mv "$1.new" "$1"
    fi
}
# add_line FILE LINE KEY: LINE appended to FILE unless a line starts with KEY.
add_line() {
    grep -q "^$3" "$1" 2>/dev/null && return 0
    if [ -n "${DRY_RUN:-}" ]; then
        echo "would append to $1: $2" >&2
    else
        echo "$2" >>"$1"
    fi
}
# The worker user's commands run in its own shell, /bin/sh. Not `su -m`: that runs root's
# login shell, csh on 13.x, where `VAR=value cmd` is no command (su(1)).
as_worker() {
    run su "$user" -c "$1"
}

[ $# -eq 3 ] || usage
master=$1
name=$2
password_file=$3
case $master in
    *:[0-9]*) ;;
    *) say "MASTER must be HOST:PORT, got '$master'"; exit 2 ;;
esac
[ -r "$password_file" ] || { say "cannot read password file '$password_file'"; exit 2; }
[ "$(uname -s)" = FreeBSD ] || { say "this is $(uname -s), not FreeBSD"; exit 2; }
[ -n "${DRY_RUN:-}" ] || [ "$(id -u)" -eq 0 ] || { say "run as root"; exit 2; }

user=buildbot
home=/home/$user
venv=$home/venv
basedir=$home/worker
libexec=/usr/local/libexec/bsdkm-ci
privileged="load.sh unload.sh collect.sh offload.sh"
python=python3.11
release=$(freebsd-version -r)
arch=$(uname -m)
bsdkm_ci_spec=${BSDKM_CI_SPEC:-buildbot-bsdkm @ git+https://github.com/wolfSSL/bsdkm-ci}
# The builds run `bsdkm-ci` from the venv, and the kernel tools from /sbin (hier(7)).
worker_path="$venv/bin:/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin"
worker_cmd=/usr/local/bin/buildbot-worker
start_worker="PATH=$worker_path $worker_cmd start --quiet $basedir"
cron_mark="# bsdkm-ci worker (workers/freebsd/setup.sh)"

say "1/8 packages"
# PyPI has no FreeBSD wheels of cryptography, cffi, ujson or cbor2 (buildbot-worker needs them
# through autobahn), and cryptography builds only with Rust: FreeBSD's packages carry them built.
run env ASSUME_ALWAYS_YES=yes pkg install -y python311 py311-buildbot-worker py311-cryptography \
    py311-twisted py311-treq py311-pyyaml py311-requests git autoconf automake libtool gmake sudo

say "2/8 kernel sources for $release"
if [ -f /usr/src/sys/conf/kmod.mk ]; then
    say "/usr/src/sys already present"
else
    case $release in
        *-RELEASE | *-RELEASE-p* | *-BETA* | *-RC*) ;;
        *)
            # -STABLE and -CURRENT have no releases/ directory; a snapshot's src.txz is newer
            # than this kernel. Only the kernel's own revision of the tree builds a module for it.
            say "$release is not a release: check out its sources into /usr/src (git clone of"
            say "  https://git.FreeBSD.org/src.git at the revision \`uname -v\` names), then run setup.sh again"
            exit 1
            ;;
    esac
    run fetch -o /tmp/src.txz "https://download.freebsd.org/releases/$arch/${release%-p*}/src.txz"
    run tar -C / -xf /tmp/src.txz
    run rm -f /tmp/src.txz
fi

say "3/8 user $user, its venv and the worker"
if ! id "$user" >/dev/null 2>&1; then
    run pw useradd "$user" -m -d "$home" -s /bin/sh -c "bsdkm-ci worker"
elif [ "$(pw usershow "$user" | cut -d: -f10)" != /bin/sh ]; then
    say "giving $user /bin/sh as its shell (the worker's commands are sh)"
    run pw usermod "$user" -s /bin/sh
fi
# Over the packaged modules (--system-site-packages): pip then finds buildbot-worker's compiled
# dependencies installed and builds nothing.
if [ ! -x "$venv/bin/python" ]; then
    as_worker "$python -m venv --system-site-packages $venv"
fi
as_worker "$venv/bin/pip install -q --disable-pip-version-check '$bsdkm_ci_spec'"
if [ ! -f "$basedir/buildbot.tac" ]; then
    # The password goes through the environment of one command, never onto a command line.
    if [ -n "${DRY_RUN:-}" ]; then
        echo "would run: $worker_cmd create-worker $basedir $master $name <password from $password_file>" >&2
    else
        BSDKM_WORKER_PASSWORD=$(cat "$password_file") su "$user" -c \
            "$worker_cmd create-worker --umask=0o22 $basedir $master $name \"\$BSDKM_WORKER_PASSWORD\"" \
            >/dev/null
    fi
fi

say "4/8 root scripts in $libexec"
if [ -n "${DRY_RUN:-}" ]; then
    packaged="<kmod/freebsd of bsdkm-ci in $venv>"
else
    packaged=$(su "$user" -c "$venv/bin/python -c 'from buildbot_bsdkm.pipeline.targets._freebsd import KMOD_DIR; print(KMOD_DIR)'") ||
        { say "bsdkm-ci is not importable from $venv"; exit 1; }
fi
[ -d "$libexec" ] || run install -d -o root -g wheel -m 0755 "$libexec"
for f in $privileged _common.sh; do
    if ! cmp -s "$packaged/$f" "$libexec/$f"; then
        run install -o root -g wheel -m 0555 "$packaged/$f" "$libexec/$f"
    fi
done

say "5/8 sudo rule"
rule=/usr/local/etc/sudoers.d/bsdkm-ci
{
    echo "# bsdkm-ci: the worker user runs the module's root scripts, and only those (workers/freebsd/README.md)."
    echo "Defaults:$user !requiretty"
    sep="$user ALL=(root) NOPASSWD:"
    for f in $privileged; do
        printf '%s /bin/sh %s/%s *' "$sep" "$libexec" "$f"
        sep=", \\
   "
    done
    echo
} | write_file "$rule" 0440
if [ -z "${DRY_RUN:-}" ] && ! visudo -c -q -f "$rule"; then
    say "visudo rejects $rule"
    exit 1
fi

say "6/8 kernel log settings"
[ "$(sysctl -n kern.log_console_output)" = 1 ] || run sysctl kern.log_console_output=1 >/dev/null
add_line /etc/sysctl.conf "kern.log_console_output=1" "kern.log_console_output="
# Takes effect at the next boot; the default 96 KiB can wrap during a verbose run.
add_line /boot/loader.conf 'kern.msgbufsize="524288"' "kern.msgbufsize="

say "7/8 start at boot and now"
# The user's other crontab lines stay; only this script's own line is replaced.
old_tab=$(crontab -u "$user" -l 2>/dev/null || true)
new_tab=$(printf '%s\n' "$old_tab" | awk -v mark="$cron_mark" '
    $0 == mark { skip = 1; next }
    skip { skip = 0; next }
    NF || kept { print; kept = 1 }')
new_tab=$(printf '%s\n%s\n@reboot %s\n' "$new_tab" "$cron_mark" "$start_worker" | sed '/./,$!d')
if [ "$new_tab" != "$old_tab" ]; then
    printf '%s\n' "$new_tab" | run crontab -u "$user" -
fi
if [ -f "$basedir/twistd.pid" ] && kill -0 "$(cat "$basedir/twistd.pid")" 2>/dev/null; then
    say "the worker is running already"
else
    as_worker "$start_worker"
fi

say "8/8 bsdkm-ci doctor"
if [ -z "${DRY_RUN:-}" ] && ! su "$user" -c "PATH=$worker_path $venv/bin/bsdkm-ci doctor --target freebsd-kmod --worker-dir $basedir"; then
    say "the worker is set up, but it misses what the doctor says above: fix that, then run setup.sh again"
    exit 1
fi
say "done: worker '$name' for $master in $basedir"
