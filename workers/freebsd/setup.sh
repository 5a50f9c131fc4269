#!/bin/sh
# setup.sh MASTER_HOST:PORT WORKER_NAME PASSWORD_FILE
# Makes a FreeBSD (amd64, 13.x/14.x) machine a bsdkm-ci worker for target freebsd-kmod.
# Run as root on a DEDICATED machine or VM: the worker loads kernel modules it
# just built, which is root-equivalent whatever sudo rule allows it.
#
#   1. pkg install the build tools (python3, git, autoconf, automake, libtool, gmake, sudo)
#   2. kernel sources in /usr/src (src.txz of the running release) if kmod.mk is missing
#   3. user 'buildbot', a venv with buildbot-worker (<5) and bsdkm-ci, the worker directory
#   4. sudo for `sh .../kmod/freebsd/{load,unload,collect}.sh` without a password
#   5. kernel log settings: console output into the message buffer, a 512 KiB buffer
#   6. start the worker at boot (cron @reboot)
# The worker password is read from PASSWORD_FILE and never printed.
# DRY_RUN=1 prints the actions (on stderr) instead of doing them.
# BSDKM_CI_SPEC: what pip installs as bsdkm-ci (default: the project's git repository).
# Exit: 0 done; 2 usage / not FreeBSD / not root; 1 a step failed.
set -eu

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
# write_file PATH MODE: content on stdin.
write_file() {
    if [ -n "${DRY_RUN:-}" ]; then
        printf 'would write %s (mode %s):\n' "$1" "$2" >&2
        sed 's/^/    /' >&2
    else
        cat >"$1"
        chmod "$2" "$1"
    fi
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
release=$(freebsd-version -k)
release=${release%-p*}
arch=$(uname -m)
bsdkm_ci_spec=${BSDKM_CI_SPEC:-buildbot-bsdkm @ git+https://github.com/wolfSSL/bsdkm-ci}
# The builds run `bsdkm-ci` from the worker's venv: its bin goes first on the worker's PATH.
start_worker="PATH=$venv/bin:/usr/local/bin:/usr/bin:/bin $venv/bin/buildbot-worker start $basedir"

say "1/6 packages"
run env ASSUME_ALWAYS_YES=yes pkg install -y python3 git autoconf automake libtool gmake sudo

say "2/6 kernel sources for $release"
if [ -f /usr/src/sys/conf/kmod.mk ]; then
    say "/usr/src/sys already present"
else
    run fetch -o /tmp/src.txz "https://download.freebsd.org/releases/$arch/$release/src.txz"
    run tar -C / -xf /tmp/src.txz
    run rm -f /tmp/src.txz
fi

say "3/6 user $user and buildbot-worker"
if ! id "$user" >/dev/null 2>&1; then
    run pw useradd "$user" -m -d "$home" -s /bin/sh -c "bsdkm-ci worker"
fi
run su -m "$user" -c "python3 -m venv $venv && $venv/bin/pip install -q 'buildbot-worker>=4,<5' '$bsdkm_ci_spec'"
if [ ! -f "$basedir/buildbot.tac" ]; then
    # The password goes through the environment of one command, never onto a command line.
    if [ -n "${DRY_RUN:-}" ]; then
        echo "would run: buildbot-worker create-worker $basedir $master $name <password from $password_file>" >&2
    else
        BSDKM_WORKER_PASSWORD=$(cat "$password_file") su -m "$user" -c \
            "$venv/bin/buildbot-worker create-worker --umask=0o22 $basedir $master $name \"\$BSDKM_WORKER_PASSWORD\"" \
            >/dev/null
    fi
fi

say "4/6 sudo rule"
write_file /usr/local/etc/sudoers.d/bsdkm-ci 0440 <<SUDOERS
# bsdkm-ci: load/unload the module built by the worker (see workers/freebsd/README.md).
Defaults:$user !requiretty
$user ALL=(root) NOPASSWD: /bin/sh $basedir/*/kmod/freebsd/load.sh *, \\
    /bin/sh $basedir/*/kmod/freebsd/unload.sh *, /bin/sh $basedir/*/kmod/freebsd/collect.sh *
SUDOERS

say "5/6 kernel log settings"
run sysctl kern.log_console_output=1
if ! grep -q '^kern.log_console_output=' /etc/sysctl.conf 2>/dev/null; then
    echo "kern.log_console_output=1" | run tee -a /etc/sysctl.conf >/dev/null
fi
if ! grep -q '^kern.msgbufsize=' /boot/loader.conf 2>/dev/null; then
    # Takes effect at the next boot; the default 96 KiB can wrap during a verbose run.
    echo 'kern.msgbufsize="524288"' | run tee -a /boot/loader.conf >/dev/null
fi

say "6/6 start at boot"
run sh -c "echo '@reboot $start_worker' | crontab -u $user -"
run su -m "$user" -c "$start_worker"
say "done: worker '$name' for $master in $basedir"
